package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/websocket"
)

// Exec runs a command in a sandbox to completion and returns its result: exit code, captured
// output, limits hit. A command that fails, times out or is OOM-killed is not an error; look at
// the result's ExitCode, TimedOut and OOMKilled. The call lasts as long as the command, so give
// ctx a deadline longer than req.Timeout.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest) (api.ExecResult, error) {
	var res api.ExecResult
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/exec"), json: req}, &res)
	return res, err
}

// Execs lists the executions of a sandbox, running and finished.
func (c *Client) Execs(ctx context.Context, id string) ([]api.Execution, error) {
	var xs []api.Execution
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/execs")}, &xs)
	return xs, err
}

// Execution returns one execution of a sandbox; its Result is set once it has ended.
func (c *Client) Execution(ctx context.Context, id, execID string) (api.Execution, error) {
	var x api.Execution
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/execs/"+url.PathEscape(execID))}, &x)
	return x, err
}

// Winsize is a terminal's size in characters.
type Winsize struct{ Rows, Cols uint16 }

// Stdio connects the command of ExecInteractive to the caller.
type Stdio struct {
	// Stdin is copied to the command's stdin; at its end the command's stdin is closed. nil closes
	// it at once. Stdin is read from a goroutine of its own, which ends at the first Read that
	// returns after ExecInteractive has returned (a blocking os.Stdin is never interrupted).
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it comes; nil discards it. With a TTY,
	// everything arrives on Stdout.
	Stdout, Stderr io.Writer
	// Resize changes the size of the command's terminal (TTY only).
	Resize <-chan Winsize
	// Signal delivers signals to the command's process group, e.g. syscall.SIGINT.
	Signal <-chan syscall.Signal
}

// maxFrame bounds one WebSocket message from the daemon; the exit frame can carry captured
// output.
const maxFrame = 64 << 20

// stdinChunk is the most stdin one frame carries.
const stdinChunk = 32 << 10

// ExecInteractive runs a command in a sandbox over a WebSocket, streaming stdin, stdout and
// stderr as the command runs, with a pseudo-terminal when start.TTY is set. It returns the
// command's result when it exits. Cancelling ctx drops the connection, which ends the command.
// A failure the daemon reports (e.g. no such sandbox) is an *Error.
func (c *Client) ExecInteractive(ctx context.Context, id string, start api.ExecStart, stdio Stdio) (api.ExecResult, error) {
	conn, err := c.dialWS(ctx, sandboxPath(id, "/exec"))
	if err != nil {
		return api.ExecResult{}, err
	}
	defer func() { _ = conn.CloseNow() }() // after a Close it does nothing
	conn.SetReadLimit(maxFrame)
	// A blocked ReadMessage only returns when the connection goes away.
	stop := context.AfterFunc(ctx, func() { _ = conn.CloseNow() })
	defer stop()

	s := &session{conn: conn}
	if err := s.send(api.Frame{Type: api.FrameStart, Start: &start}); err != nil {
		return api.ExecResult{}, s.fail(ctx, err)
	}
	done := make(chan struct{})
	defer close(done)
	if stdio.Stdin == nil {
		_ = s.send(api.Frame{Type: api.FrameEOF}) // a connection gone shows in the reads that follow
	} else {
		go s.pumpStdin(stdio.Stdin, done)
	}
	if stdio.Resize != nil || stdio.Signal != nil {
		go s.pumpControl(stdio.Resize, stdio.Signal, done)
	}
	stdout, stderr := orDiscard(stdio.Stdout), orDiscard(stdio.Stderr)
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return api.ExecResult{}, s.fail(ctx, err)
		}
		var f api.Frame
		if err := json.Unmarshal(msg, &f); err != nil {
			return api.ExecResult{}, fmt.Errorf("airlock client: interactive exec: bad frame from the daemon: %w", err)
		}
		switch f.Type {
		case api.FrameStdout, api.FrameStderr:
			w := stdout
			if f.Type == api.FrameStderr {
				w = stderr
			}
			if _, err := w.Write(f.Data); err != nil {
				return api.ExecResult{}, fmt.Errorf("airlock client: interactive exec: writing %s: %w", f.Type, err)
			}
		case api.FrameExit:
			if f.Result == nil {
				return api.ExecResult{}, errors.New("airlock client: interactive exec: exit frame without a result")
			}
			conn.Close(websocket.CloseNormal, "")
			return *f.Result, nil
		case api.FrameError:
			e := &Error{Code: api.CodeInternal, Message: "interactive exec failed"}
			if f.Error != nil {
				e.Code, e.Message, e.Field, e.Status = f.Error.Code, f.Error.Message, f.Error.Field, f.Error.Status
			}
			return api.ExecResult{}, e
		}
		// "started" and frame types this client does not know are ignored.
	}
}

// session is the client's half of one interactive exec connection.
type session struct {
	conn *websocket.Conn // WriteMessage is safe for concurrent use
}

func (s *session) send(f api.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return s.conn.WriteMessage(websocket.Text, b)
}

// fail explains why the connection ended before the exit frame.
func (s *session) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
		return fmt.Errorf("airlock client: interactive exec: the daemon closed the connection before the command exited (%d %s)", ce.Code, ce.Reason)
	}
	return fmt.Errorf("airlock client: interactive exec: %w", err)
}

func (s *session) pumpStdin(r io.Reader, done <-chan struct{}) {
	buf := make([]byte, stdinChunk)
	for {
		n, err := r.Read(buf)
		select {
		case <-done:
			return
		default:
		}
		if n > 0 {
			if s.send(api.Frame{Type: api.FrameStdin, Data: buf[:n]}) != nil {
				return
			}
		}
		if err != nil {
			// At the end of Stdin, or when it fails, the command sees the end of its input.
			_ = s.send(api.Frame{Type: api.FrameEOF}) // a connection gone shows in the session's reads
			return
		}
	}
}

func (s *session) pumpControl(resize <-chan Winsize, sig <-chan syscall.Signal, done <-chan struct{}) {
	for {
		var f api.Frame
		select {
		case <-done:
			return
		case ws, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			f = api.Frame{Type: api.FrameResize, Rows: ws.Rows, Cols: ws.Cols}
		case sg, ok := <-sig:
			if !ok {
				sig = nil
				continue
			}
			f = api.Frame{Type: api.FrameSignal, Signal: int(sg)}
		}
		if s.send(f) != nil {
			return
		}
	}
}

// dialWS opens a WebSocket to an API path. A refused upgrade is an *Error.
func (c *Client) dialWS(ctx context.Context, path string) (*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(c.url(path, nil), "http") // http → ws, https → wss
	h := http.Header{}
	c.authorize(h)
	conn, resp, err := websocket.Dial(ctx, u, h, c.tls)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		return nil, err
	}
	return conn, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
