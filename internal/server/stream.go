package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/query"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/websocket"
)

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// frameWriter sends everything written to it as frames of one type.
type frameWriter struct {
	c   *websocket.Conn
	typ string
}

func (f frameWriter) Write(p []byte) (int, error) {
	if err := sendFrame(f.c, api.Frame{Type: f.typ, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func sendFrame(c *websocket.Conn, f api.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return c.WriteMessage(websocket.Text, b)
}

// resizeWait bounds how long an interactive exec's reader waits for a resize to be in force.
const resizeWait = 2 * time.Second

// execInteractive runs one command over a WebSocket: the client's first frame is "start", then
// stdin, resize, eof and signal frames; the daemon answers started, stdout/stderr chunks and one
// exit (or error) frame. A client that goes away kills the command.
func execInteractive(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	id := r.PathValue("id")
	if _, err := s.m.Get(r.Context(), id); err != nil {
		return nil, err
	}
	if !isUpgrade(r) {
		return nil, errdefs.Invalid("Upgrade", "interactive exec is a WebSocket; use POST .../exec for a plain request")
	}
	c, err := accept(w, r)
	if err != nil {
		return nil, written
	}
	defer func() { _ = c.CloseNow() }() // after a Close, or the client gone: nothing to do
	c.SetReadLimit(s.cfg.MaxBodyBytes)
	c.SetWriteTimeout(s.cfg.WriteTimeout) // a client that stops reading is cut, the command ended
	fail := func(err error) (any, error) {
		_, e := errorStatus(err)
		_ = sendFrame(c, api.Frame{Type: api.FrameError, Error: &e}) // the client gone: nothing to answer
		c.Close(websocket.CloseNormal, "")
		return nil, written
	}
	_, msg, err := c.ReadMessage()
	if err != nil {
		return nil, written
	}
	var start api.Frame
	if err := decodeJSON(msg, &start); err != nil {
		return fail(err)
	}
	if start.Type != api.FrameStart || start.Start == nil {
		return fail(errdefs.Invalid("type", "the first frame must be {\"type\":\"start\",\"start\":{...}}"))
	}

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stdinR, stdinW := io.Pipe()
	defer stdinR.Close()
	// Resizes are applied in order with stdin: the reader takes the client's next frame only once
	// a resize is in force (or the exec is over; or after resizeWait, for an init adopted from an
	// earlier airlock, which does not say when), so that what the client types after it sees the
	// new size.
	resize := make(chan sandbox.Resize)
	signals := make(chan syscall.Signal, 8)
	go func() {
		// The reader: the client's frames until it goes away, which ends the command.
		defer cancel()
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				stdinW.CloseWithError(io.EOF)
				return
			}
			var f api.Frame
			if json.Unmarshal(msg, &f) != nil {
				continue
			}
			switch f.Type {
			case api.FrameStdin:
				_, _ = stdinW.Write(f.Data) // fails once the command has ended and no longer reads
			case api.FrameEOF:
				stdinW.Close()
			case api.FrameResize:
				if !start.Start.TTY {
					continue // no terminal to resize
				}
				applied := make(chan struct{})
				select {
				case resize <- sandbox.Resize{Winsize: sandbox.Winsize{Rows: f.Rows, Cols: f.Cols}, Done: applied}:
					select {
					case <-applied:
					case <-ctx.Done():
					case <-time.After(resizeWait):
					}
				case <-ctx.Done():
				}
			case api.FrameSignal:
				select {
				case signals <- syscall.Signal(f.Signal):
				default:
				}
			}
		}
	}()
	var stdin io.Reader = stdinR
	if start.Start.Stdin != "" {
		stdin = io.MultiReader(strings.NewReader(start.Start.Stdin), stdinR)
	}
	st := manager.Stream{
		Stdin: stdin, Stdout: frameWriter{c, api.FrameStdout}, Stderr: frameWriter{c, api.FrameStderr},
		TTY: start.Start.TTY, Rows: start.Start.Rows, Cols: start.Start.Cols, Resize: resize, Signal: signals,
		// A client gone is cut by its reader, which ends the command.
		Started: func(execID string) { _ = sendFrame(c, api.Frame{Type: api.FrameStarted, ExecutionID: execID}) },
	}
	res, err := s.m.Exec(ctx, id, start.Start.ExecRequest, st)
	if err != nil {
		return fail(err)
	}
	_ = sendFrame(c, api.Frame{Type: api.FrameExit, ExecutionID: res.ExecutionID, Result: &res}) // the client gone: nothing to answer
	c.Close(websocket.CloseNormal, "")
	return nil, written
}

// logs answers GET .../logs: a JSON list, or with follow=true a stream (WebSocket when the
// request upgrades, SSE otherwise) that ends when the sandbox does.
func logs(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	id := r.PathValue("id")
	follow, err := boolQuery(r, "follow")
	if err != nil {
		return nil, err
	}
	since, err := query.Int(r.URL.Query(), "since")
	if err != nil {
		return nil, err
	}
	if _, err := s.m.Get(r.Context(), id); err != nil {
		return nil, err
	}
	// A WebSocket is a stream: it follows, follow=true or not, so that the endpoints' logs URL
	// (wss://…/logs) works as it is.
	switch {
	case isUpgrade(r):
		return logsWebSocket(s, w, r, id, since)
	case !follow:
		out := []api.LogEntry{}
		err := s.m.Logs(r.Context(), id, since, false, func(e api.LogEntry) error { out = append(out, e); return nil })
		return out, err
	}
	return logsSSE(s, w, r, id, since)
}

func logsSSE(s *Server, w http.ResponseWriter, r *http.Request, id string, since int64) (any, error) {
	ctx, send, stop := s.startSSE(w, r, "airlock logs of "+id)
	defer stop()
	err := s.m.Logs(ctx, id, since, true, func(e api.LogEntry) error {
		return sendSSE(send, "log", e.Seq, e)
	})
	if err == nil && ctx.Err() == nil {
		_ = send("event: end\ndata: {}\n\n") // the client gone: nothing to answer
	}
	return nil, written
}

// startSSE answers r with a text/event-stream whose first line is a comment naming it. send
// writes and flushes raw SSE text, within WriteTimeout (a client that stops reading is cut); a
// comment every 15 s keeps proxies from closing a quiet stream. ctx ends when the client goes
// away; call stop when done.
func (s *Server) startSSE(w http.ResponseWriter, r *http.Request, banner string) (ctx context.Context, send func(string) error, stop func()) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex // guards w between the stream and the heartbeat
	send = func(text string) error {
		mu.Lock()
		defer mu.Unlock()
		s.writeDeadline(w)
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
		return rc.Flush()
	}
	_ = send(": " + banner + "\n\n") // a client gone fails the next send too
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if send(": keep-alive\n\n") != nil {
					cancel()
				}
			}
		}
	}()
	return ctx, send, cancel
}

// sendSSE sends v as JSON in one SSE event of the given name and id.
func sendSSE(send func(string) error, event string, id int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return send(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", id, event, b))
}

func logsWebSocket(s *Server, w http.ResponseWriter, r *http.Request, id string, since int64) (any, error) {
	c, err := accept(w, r)
	if err != nil {
		return nil, written
	}
	defer func() { _ = c.CloseNow() }()   // after a Close, or the client gone: nothing to do
	c.SetWriteTimeout(s.cfg.WriteTimeout) // a client that stops reading is cut
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	go func() {
		// Nothing is expected from the client; its going away ends the stream.
		defer cancel()
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}()
	// The stream is under way: an error (most often the client gone) has no answer but the close.
	_ = s.m.Logs(ctx, id, since, true, func(e api.LogEntry) error {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return c.WriteMessage(websocket.Text, b)
	})
	c.Close(websocket.CloseNormal, "end of log")
	return nil, written
}
