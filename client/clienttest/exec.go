package clienttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/websocket"
)

// command is one run of the toy shell.
type command struct {
	argv           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	cat            func(path string) ([]byte, bool) // reads a file of the sandbox
}

// run interprets c and returns its exit status. ctx ending stops sleep.
func (c command) run(ctx context.Context) int {
	argv := c.argv
	if len(argv) == 3 && strings.HasSuffix(argv[0], "sh") && argv[1] == "-c" {
		argv = strings.Fields(argv[2])
	}
	if len(argv) == 0 {
		return 0
	}
	args := strings.Join(argv[1:], " ")
	switch argv[0] {
	case "echo":
		fmt.Fprintln(c.stdout, args)
	case "warn":
		fmt.Fprintln(c.stderr, args)
	case "pwd":
		fmt.Fprintln(c.stdout, "/workspace")
	case "true":
	case "false":
		return 1
	case "exit":
		n, _ := strconv.Atoi(args)
		return n
	case "cat":
		if len(argv) == 1 {
			if _, err := io.Copy(c.stdout, c.stdin); err != nil {
				return 1
			}
			return 0
		}
		for _, p := range argv[1:] {
			b, ok := c.cat(p)
			if !ok {
				fmt.Fprintf(c.stderr, "cat: %s: No such file or directory\n", p)
				return 1
			}
			_, _ = c.stdout.Write(b) // a failure is the client's to see
		}
	case "sleep":
		secs, _ := strconv.ParseFloat(args, 64)
		select {
		case <-ctx.Done():
			return 137
		case <-time.After(time.Duration(secs * float64(time.Second))):
		}
	default:
		fmt.Fprintf(c.stderr, "sh: %s: not found\n", argv[0])
		return 127
	}
	return 0
}

// startExec checks the sandbox, marks it running and records the execution; d.mu must be held.
func (d *Daemon) startExec(sb *sandbox, argv []string) *api.Execution {
	if sb.Status == api.StatusReady {
		d.transition(sb, api.StatusRunning, "exec")
	}
	x := api.Execution{ID: fmt.Sprintf("exec_fake%04d", len(sb.execs)+1), SandboxID: sb.ID, Command: argv,
		Status: api.ExecRunning, StartedAt: time.Now().UTC()}
	sb.execs = append(sb.execs, x)
	d.logLocked(sb, api.LogEntry{Stream: api.StreamEvent, ExecutionID: x.ID,
		Event: &api.Event{Type: api.EventExecStarted, SandboxID: sb.ID, ExecutionID: x.ID, Data: map[string]any{"command": argv}}})
	return &sb.execs[len(sb.execs)-1]
}

// endExec records the end of an execution and its output; d.mu must not be held.
func (d *Daemon) endExec(id, execID string, res api.ExecResult, stdout, stderr []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.sandboxes[id]
	for _, out := range []struct {
		stream string
		data   []byte
	}{{api.StreamStdout, stdout}, {api.StreamStderr, stderr}} {
		if len(out.data) > 0 {
			d.logLocked(sb, api.LogEntry{Stream: out.stream, ExecutionID: execID, Data: string(out.data)})
		}
	}
	d.logLocked(sb, api.LogEntry{Stream: api.StreamEvent, ExecutionID: execID, Event: &api.Event{Type: api.EventExecExited,
		SandboxID: id, ExecutionID: execID, Data: map[string]any{"exitCode": res.ExitCode, "durationMs": res.DurationMs}}})
	for i := range sb.execs {
		if sb.execs[i].ID == execID {
			end := time.Now().UTC()
			sb.execs[i].Status, sb.execs[i].EndedAt, sb.execs[i].Result = api.ExecDone, &end, &res
		}
	}
}

// catFunc reads the files of sandbox id.
func (d *Daemon) catFunc(id string) func(string) ([]byte, bool) {
	return func(p string) ([]byte, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		f := d.sandboxes[id].files[p]
		if f == nil || f.dir {
			return nil, false
		}
		return bytes.Clone(f.data), true
	}
}

func (d *Daemon) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "bad JSON: " + err.Error()})
		return
	}
	if len(req.Command) == 0 {
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "command", Message: "is required"})
		return
	}
	d.mu.Lock()
	sb := d.lookup(w, r)
	if sb == nil || !live(w, sb) {
		d.mu.Unlock()
		return
	}
	x := d.startExec(sb, req.Command)
	execID, id := x.ID, sb.ID
	d.mu.Unlock()

	ctx := r.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout*float64(time.Second)))
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := command{argv: req.Command, stdin: strings.NewReader(req.Stdin), stdout: &stdout, stderr: &stderr, cat: d.catFunc(id)}.run(ctx)
	res := api.ExecResult{ExecutionID: execID, ExitCode: code, DurationMs: time.Since(start).Milliseconds(),
		TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded), LimitEvents: []api.LimitEvent{}}
	if res.TimedOut {
		res.LimitEvents = append(res.LimitEvents, api.LimitEvent{Type: "limit.timeout", Message: "the exec timeout killed the command", Time: time.Now().UTC()})
	}
	if req.CaptureOutput == nil || *req.CaptureOutput {
		res.Stdout, res.Stderr = stdout.String(), stderr.String()
	}
	d.endExec(id, execID, res, stdout.Bytes(), stderr.Bytes())
	reply(w, http.StatusOK, res)
}

// frameWriter sends what is written to it as frames of one type.
type frameWriter struct {
	conn *websocket.Conn
	typ  string
	mu   sync.Mutex // guards out
	out  bytes.Buffer
}

func (fw *frameWriter) Write(p []byte) (int, error) {
	fw.mu.Lock()
	fw.out.Write(p)
	fw.mu.Unlock()
	b, _ := json.Marshal(api.Frame{Type: fw.typ, Data: p})
	if err := fw.conn.WriteMessage(websocket.Text, b); err != nil {
		return 0, err
	}
	return len(p), nil
}

func sendFrame(conn *websocket.Conn, f api.Frame) error {
	b, _ := json.Marshal(f)
	return conn.WriteMessage(websocket.Text, b)
}

// errSignalled ends a command's stdin when a signal frame arrives.
var errSignalled = errors.New("signalled")

func (d *Daemon) execInteractive(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	sb := d.lookup(w, r)
	ok := sb != nil && live(w, sb)
	d.mu.Unlock()
	if !ok {
		return
	}
	conn, err := websocket.Accept(w, r)
	if err != nil {
		return
	}
	defer func() { _ = conn.CloseNow() }() // after the close below it does nothing
	_, msg, err := conn.ReadMessage()
	var f api.Frame
	if err != nil || json.Unmarshal(msg, &f) != nil || f.Type != api.FrameStart || f.Start == nil || len(f.Start.Command) == 0 {
		_ = sendFrame(conn, api.Frame{Type: api.FrameError, Error: &api.Error{Code: api.CodeInvalidArgument, Field: "start", Message: "the first frame must be a start frame with a command"}}) // a failure is the client's to see
		conn.Close(websocket.CloseNormal, "")
		return
	}
	start := f.Start
	d.mu.Lock()
	x := d.startExec(sb, start.Command)
	execID, id := x.ID, sb.ID
	d.mu.Unlock()
	_ = sendFrame(conn, api.Frame{Type: api.FrameStarted, ExecutionID: execID}) // a failure is the client's to see

	stdinR, stdinW := io.Pipe()
	var signal atomic.Int64
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	runCtx := ctx
	if start.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(ctx, time.Duration(start.Timeout*float64(time.Second)))
		defer stop()
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer stdinW.Close()
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
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
			case api.FrameSignal:
				signal.Store(int64(f.Signal))
				stdinR.CloseWithError(errSignalled)
				cancel()
			}
		}
	}()
	stdout := &frameWriter{conn: conn, typ: api.FrameStdout}
	stderr := &frameWriter{conn: conn, typ: api.FrameStderr}
	if start.TTY {
		stderr.typ = api.FrameStdout
	}
	began := time.Now()
	code := command{argv: start.Command, stdin: stdinR, stdout: stdout, stderr: stderr, cat: d.catFunc(id)}.run(runCtx)
	stdinR.Close() // a command that did not read its stdin must not block the reader
	if sig := signal.Load(); sig != 0 {
		code = 128 + int(sig)
	}
	res := api.ExecResult{ExecutionID: execID, ExitCode: code, DurationMs: time.Since(began).Milliseconds(),
		TimedOut: errors.Is(runCtx.Err(), context.DeadlineExceeded), LimitEvents: []api.LimitEvent{}}
	d.endExec(id, execID, res, stdout.out.Bytes(), stderr.out.Bytes())
	_ = sendFrame(conn, api.Frame{Type: api.FrameExit, Result: &res}) // a failure is the client's to see
	conn.Close(websocket.CloseNormal, "")
	_ = conn.CloseNow() // after the Close, it only ends the reader
	<-readerDone
}

func (d *Daemon) execs(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if sb := d.lookup(w, r); sb != nil {
		reply(w, http.StatusOK, append([]api.Execution{}, sb.execs...))
	}
}

func (d *Daemon) execution(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.lookup(w, r)
	if sb == nil {
		return
	}
	for _, x := range sb.execs {
		if x.ID == r.PathValue("execId") {
			reply(w, http.StatusOK, x)
			return
		}
	}
	fail(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("execution %q not found", r.PathValue("execId"))})
}

func (d *Daemon) logs(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	follow := r.URL.Query().Get("follow") == "true" && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	d.mu.Lock()
	sb := d.lookup(w, r)
	if sb == nil {
		d.mu.Unlock()
		return
	}
	if !follow {
		entries := []api.LogEntry{}
		if since < int64(len(sb.logs)) {
			entries = append(entries, sb.logs[max(since, 0):]...)
		}
		d.mu.Unlock()
		reply(w, http.StatusOK, entries)
		return
	}
	d.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	for {
		d.mu.Lock()
		var entries []api.LogEntry
		if since < int64(len(sb.logs)) {
			entries = append(entries, sb.logs[max(since, 0):]...)
		}
		ended, changed := sb.Status == api.StatusTerminated, d.changed
		d.mu.Unlock()
		for _, e := range entries {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\nevent: log\ndata: %s\n\n", e.Seq, b)
			since = e.Seq
		}
		if ended {
			_, _ = io.WriteString(w, "event: end\ndata: {}\n\n") // a failure is the client's to see
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}
