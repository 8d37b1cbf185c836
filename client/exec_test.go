package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/client/clienttest"
	"github.com/airlockrun/airlock/internal/websocket"
)

// newSandbox starts a fake daemon with one sandbox.
func newSandbox(t *testing.T) (*client.Client, string) {
	t.Helper()
	d := clienttest.NewDaemon()
	t.Cleanup(d.Close)
	c := d.Client()
	sb, err := c.Create(context.Background(), api.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	return c, sb.ID
}

func TestExec(t *testing.T) {
	c, id := newSandbox(t)
	ctx := context.Background()
	res, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Command{"cat"}, Stdin: "in\n"})
	if err != nil || res.Stdout != "in\n" || res.ExitCode != 0 || res.ExecutionID == "" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	x, err := c.Execution(ctx, id, res.ExecutionID)
	if err != nil || x.Status != api.ExecDone || x.Result == nil || x.Result.Stdout != "in\n" {
		t.Fatalf("Execution = %+v, %v", x, err)
	}
	if _, err := c.Terminate(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, id, api.ExecRequest{Command: api.Shell("true")})
	if e, ok := errors.AsType[*client.Error](err); !ok || !errors.Is(err, client.ErrConflict) || e.Status != api.StatusTerminated {
		t.Fatalf("exec in a terminated sandbox: %v", err)
	}
}

func TestExecInteractive(t *testing.T) {
	c, id := newSandbox(t)
	for _, tc := range []struct {
		name           string
		start          api.ExecStart
		stdin          string
		stdout, stderr string
		exit           int
	}{
		{"stdin streams through", api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Command{"cat"}}}, "hello\nworld\n", "hello\nworld\n", "", 0},
		{"no stdin", api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("echo hi")}}, "", "hi\n", "", 0},
		{"stderr stays apart", api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("warn oops")}}, "", "", "oops\n", 0},
		{"a TTY merges stderr", api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("warn oops")}, TTY: true}, "", "oops\n", "", 0},
		{"exit status", api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("exit 3")}}, "", "", "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			stdio := client.Stdio{Stdout: &stdout, Stderr: &stderr}
			if tc.stdin != "" {
				stdio.Stdin = strings.NewReader(tc.stdin)
			}
			res, err := c.ExecInteractive(context.Background(), id, tc.start, stdio)
			if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stderr || res.ExitCode != tc.exit {
				t.Errorf("stdout %q stderr %q exit %d; want %q %q %d", stdout.String(), stderr.String(), res.ExitCode, tc.stdout, tc.stderr, tc.exit)
			}
		})
	}
}

func TestExecInteractiveSignal(t *testing.T) {
	c, id := newSandbox(t)
	sig := make(chan syscall.Signal, 1)
	sig <- syscall.SIGINT
	res, err := c.ExecInteractive(context.Background(), id, api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("sleep 30")}},
		client.Stdio{Signal: sig})
	if err != nil || res.ExitCode != 128+int(syscall.SIGINT) {
		t.Fatalf("after SIGINT: %+v, %v", res, err)
	}
}

func TestExecInteractiveCancel(t *testing.T) {
	c, id := newSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.ExecInteractive(ctx, id, api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("sleep 30")}}, client.Stdio{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
}

func TestExecInteractiveRefused(t *testing.T) {
	c, _ := newSandbox(t)
	_, err := c.ExecInteractive(context.Background(), "sbx_nope", api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Shell("true")}}, client.Stdio{})
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
}

// scripted is a daemon side of interactive exec that records the client's frames until "eof"
// and then answers with the frames of reply.
func scripted(t *testing.T, reply []api.Frame) (*client.Client, <-chan []api.Frame) {
	t.Helper()
	got := make(chan []api.Frame, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r)
		if err != nil {
			return
		}
		defer func() { _ = conn.CloseNow() }() // after the Close below it does nothing
		var frames []api.Frame
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				break
			}
			var f api.Frame
			if err := json.Unmarshal(msg, &f); err != nil {
				t.Errorf("frame %s: %v", msg, err)
			}
			frames = append(frames, f)
			if f.Type == api.FrameEOF {
				break
			}
		}
		got <- frames
		for _, f := range reply {
			b, _ := json.Marshal(f)
			_ = conn.WriteMessage(websocket.Text, b) // a failure is the client's to see
		}
		conn.Close(websocket.CloseNormal, "")
	}))
	t.Cleanup(srv.Close)
	c, _ := client.New(srv.URL, "tok")
	return c, got
}

func TestExecInteractiveFrames(t *testing.T) {
	c, got := scripted(t, []api.Frame{
		{Type: api.FrameStarted, ExecutionID: "exec_1"},
		{Type: api.FrameStdout, Data: []byte("out")},
		{Type: "progress"}, // unknown types are ignored
		{Type: api.FrameExit, Result: &api.ExecResult{ExecutionID: "exec_1", ExitCode: 7}},
	})
	resize := make(chan client.Winsize, 1)
	resize <- client.Winsize{Rows: 40, Cols: 120}
	stdin := &slowReader{data: "typed", wait: 100 * time.Millisecond} // resize goes first
	var stdout bytes.Buffer
	start := api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Command{"/bin/sh"}}, TTY: true, Rows: 24, Cols: 80}
	res, err := c.ExecInteractive(context.Background(), "sbx_1", start, client.Stdio{Stdin: stdin, Stdout: &stdout, Resize: resize})
	if err != nil || res.ExitCode != 7 || stdout.String() != "out" {
		t.Fatalf("ExecInteractive = %+v, %v; stdout %q", res, err, stdout.String())
	}
	frames := <-got
	var types []string
	for _, f := range frames {
		types = append(types, f.Type)
	}
	if strings.Join(types, " ") != "start resize stdin eof" {
		t.Fatalf("frames %v", types)
	}
	if s := frames[0].Start; s == nil || !s.TTY || s.Rows != 24 || s.Cols != 80 || s.Command[0] != "/bin/sh" {
		t.Errorf("start frame %+v", frames[0].Start)
	}
	if frames[1].Rows != 40 || frames[1].Cols != 120 || string(frames[2].Data) != "typed" {
		t.Errorf("resize %+v, stdin %q", frames[1], frames[2].Data)
	}
}

func TestExecInteractiveErrorFrame(t *testing.T) {
	c, _ := scripted(t, []api.Frame{{Type: api.FrameError, Error: &api.Error{Code: api.CodeInvalidArgument, Field: "command", Message: "is required"}}})
	_, err := c.ExecInteractive(context.Background(), "sbx_1", api.ExecStart{}, client.Stdio{})
	if e, ok := errors.AsType[*client.Error](err); !ok || e.Field != "command" || !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("err %v", err)
	}
}

func TestExecInteractiveClosedEarly(t *testing.T) {
	c, _ := scripted(t, []api.Frame{{Type: api.FrameStarted, ExecutionID: "exec_1"}})
	_, err := c.ExecInteractive(context.Background(), "sbx_1", api.ExecStart{}, client.Stdio{})
	if err == nil || !strings.Contains(err.Error(), "before the command exited") {
		t.Fatalf("err %v", err)
	}
}

// slowReader yields data once, after a pause, then EOF.
type slowReader struct {
	data string
	wait time.Duration
	done bool
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	time.Sleep(r.wait)
	r.done = true
	return copy(p, r.data), nil
}
