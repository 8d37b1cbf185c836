package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The cases below are about a command's standard streams: a terminal, streamed stdin and
// output, signals.

func testTTY(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// A new terminal of the sandbox's own, of the size asked for, owned by the sandbox's user,
	// controlling the command's session; stderr goes to it too.
	res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Rows: 30, Cols: 100, Command: h.Command(t, Script{
		Sh: `tty; stty size; stat -c %U "$(tty)"; test -t 0 && test -t 1 && test -t 2 && echo all-tty; echo to-stderr >&2; exec 3</dev/tty && echo ctty`,
		Py: `
import os, pwd, sys
print(os.ttyname(0))
size = os.get_terminal_size(0)
print(size.lines, size.columns)
print(pwd.getpwuid(os.stat(os.ttyname(0)).st_uid).pw_name)
if all(os.isatty(fd) for fd in (0, 1, 2)): print("all-tty")
print("to-stderr", file=sys.stderr, flush=True)
os.open("/dev/tty", os.O_RDWR)
print("ctty")`,
	})})
	out := strings.ReplaceAll(res.Stdout, "\r\n", "\n")
	if res.ExitCode != 0 || !strings.HasPrefix(out, "/dev/pts/") || res.Stderr != "" {
		t.Fatalf("tty exec: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"\n30 100\n", "\nagent\n", "\nall-tty\n", "\nto-stderr\n", "\nctty\n"} {
		mustContain(t, "tty exec output", out, want)
	}

	// A resize reaches the command as SIGWINCH and a new size.
	stream := newStream()
	resize := make(chan sandbox.Resize, 1)
	ch := execAsync(sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Rows: 30, Cols: 100, Resize: resize, Stdout: stream,
		Command: h.Command(t, Script{
			Sh: `trap 'stty size; exit 0' WINCH; echo ready; i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; exit 1`,
			Py: `
import os, signal, sys, time
got = []
signal.signal(signal.SIGWINCH, lambda *_: got.append(1))
print("ready", flush=True)
for _ in range(100):
    if got:
        size = os.get_terminal_size(0)
        print(size.lines, size.columns)
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)`,
		})})
	stream.waitFor(t, "ready", 5*time.Second)
	resize <- sandbox.Resize{Winsize: sandbox.Winsize{Rows: 40, Cols: 120}}
	r := <-ch
	if r.err != nil || r.res.ExitCode != 0 || !strings.Contains(r.res.Stdout, "40 120") {
		t.Fatalf("resize: %v exit %d stdout %q", r.err, r.res.ExitCode, r.res.Stdout)
	}
	if stream.String() != r.res.Stdout {
		t.Errorf("streamed %q, captured %q", stream.String(), r.res.Stdout)
	}

	// A resize is in force when its Done closes: input sent after it is read under the new size.
	for i := range 3 {
		stdin, typed := io.Pipe()
		stream := newStream()
		resize := make(chan sandbox.Resize)
		ch := execAsync(sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Rows: 30, Cols: 100, Resize: resize, Stdin: stdin, Stdout: stream,
			Command: h.Command(t, Script{
				Sh: `echo ready; read l; stty size`,
				Py: `
import os
print("ready", flush=True)
input()
size = os.get_terminal_size(0)
print(size.lines, size.columns)`,
			})})
		stream.waitFor(t, "ready", 5*time.Second)
		done := make(chan struct{})
		resize <- sandbox.Resize{Winsize: sandbox.Winsize{Rows: 41 + uint16(i), Cols: 121}, Done: done}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a resize's Done was not closed")
		}
		if _, err := typed.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
		r := <-ch
		typed.Close()
		if want := fmt.Sprintf("%d 121", 41+i); r.err != nil || r.res.ExitCode != 0 || !strings.Contains(r.res.Stdout, want) {
			t.Fatalf("input after a resize: %v exit %d stdout %q, want the size %s", r.err, r.res.ExitCode, r.res.Stdout, want)
		}
	}

	// Stdin is typed into the terminal; its end is the terminal's EOF, which ends a shell (or a
	// program that reads lines and evaluates them).
	interactive, typed := []string{"/bin/sh"}, "echo from-$((40+2))\n"
	seq := []string{"seq", "20000"}
	if h.Python() {
		interactive, typed = []string{"python3", "-c", "import sys\nfor l in sys.stdin: print(eval(l))"}, "'from-%d' % (40+2)\n"
		seq = []string{"python3", "-c", "for i in range(1, 20001): print(i)"}
	}
	res = ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Command: interactive, Stdin: strings.NewReader(typed)})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "from-42") {
		t.Fatalf("interactive shell on a tty: exit %d stdout %q", res.ExitCode, res.Stdout)
	}
	// Output written just before the command exits is all there (the master reads EIO at the
	// end, which is EOF).
	res = ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Command: seq})
	if out := strings.ReplaceAll(res.Stdout, "\r\n", "\n"); res.ExitCode != 0 || !strings.HasSuffix(out, "\n19999\n20000\n") || strings.Count(out, "\n") != 20000 {
		t.Fatalf("seq on a tty: exit %d, %d lines, ends %q", res.ExitCode, strings.Count(out, "\n"), out[max(0, len(out)-20):])
	}
}

func testStreams(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// Stdin from a reader that blocks is fed as data arrives; output streams as it is written.
	pr, pw := io.Pipe()
	stream := newStream()
	ch := execAsync(sb, 10*time.Second, sandbox.ExecRequest{Stdin: pr, Stdout: stream,
		Command: h.Command(t, Script{
			Sh: `while read l; do echo "got $l"; done; echo end`,
			Py: `
import sys
while True:
    l = sys.stdin.readline()
    if not l: break
    print("got", l.rstrip("\n"), flush=True)
print("end")`,
		})})
	for _, l := range []string{"a", "b"} {
		if _, err := pw.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
		stream.waitFor(t, "got "+l+"\n", 5*time.Second)
	}
	pw.Close()
	r := <-ch
	if r.err != nil || r.res.ExitCode != 0 || r.res.Stdout != "got a\ngot b\nend\n" || stream.String() != r.res.Stdout {
		t.Fatalf("streamed stdin: %v exit %d captured %q streamed %q", r.err, r.res.ExitCode, r.res.Stdout, stream.String())
	}

	// A stdin reader that never returns does not hold the exec once the command is done.
	idle, idleW := io.Pipe()
	defer idleW.Close()
	start := time.Now()
	nothing := []string{"true"}
	if h.Python() {
		nothing = []string{"python3", "-c", "pass"}
	}
	expect(t, ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Stdin: idle, Command: nothing}), 0, "")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("exec with an idle stdin took %v", took)
	}

	// The capture limit applies to the result only: the stream gets every byte.
	outS, errS := newStream(), newStream()
	res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Stdout: outS, Stderr: errS, OutputLimit: 1000,
		Command: h.Command(t, Script{
			Sh: `head -c 100000 /dev/zero | tr '\0' a; echo e >&2`,
			Py: `import sys; sys.stdout.write("a" * 100000); sys.stdout.flush(); sys.stderr.write("e\n")`,
		})})
	if len(res.Stdout) != 1000 || !res.Truncated || outS.Len() != 100000 || res.Stderr != "e\n" || errS.String() != "e\n" {
		t.Fatalf("capture %d bytes (truncated %v), streamed %d; stderr %q streamed %q", len(res.Stdout), res.Truncated, outS.Len(), res.Stderr, errS.String())
	}

	// The result has all a command wrote before it ended, also where its output crosses a relay
	// (gVisor, a VM) that busy processes of the sandbox leave little CPU: the exit is not
	// delivered ahead of the output.
	h.part(t, "all output before the exit", func(t *testing.T) {
		if !h.Python() {
			expect(t, ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: []string{"/bin/sh", "-c",
				`for i in 1 2 3; do (while :; do :; done) >/dev/null 2>&1 & echo $! >> /tmp/busy; done`}}), 0, "")
			defer ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: []string{"/bin/sh", "-c", `kill $(cat /tmp/busy); rm /tmp/busy`}})
		}
		want := strings.Repeat("a", 65536) + "\nlast\n"
		for i := range 10 {
			res := ExecReq(t, sb, 30*time.Second, sandbox.ExecRequest{Command: h.Command(t, Script{
				Sh: `head -c 65536 /dev/zero | tr '\0' a; echo; echo last`,
				Py: `import sys; sys.stdout.write("a" * 65536 + "\nlast\n")`,
			})})
			if res.ExitCode != 0 || res.Stdout != want {
				t.Fatalf("exec %d: exit %d, %d bytes of stdout ending %q, want %d ending \"last\\n\"", i, res.ExitCode, len(res.Stdout), res.Stdout[max(0, len(res.Stdout)-8):], len(want))
			}
		}
	})

	// Signals reach the command's process group.
	h.part(t, "signals", func(t *testing.T) {
		stream := newStream()
		sig := make(chan syscall.Signal, 1)
		ch := execAsync(sb, 10*time.Second, sandbox.ExecRequest{Stdout: stream, Signal: sig,
			Command: h.Command(t, Script{
				Sh: `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`,
				// The handler only notes the signal: a level may deliver it more than once (to
				// the command and to its group), and printing from a handler is not reentrant.
				Py: `
import signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
print("ready", flush=True)
while not got: time.sleep(0.05)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("got-term", flush=True)
sys.exit(3)`,
			})})
		stream.waitFor(t, "ready", 5*time.Second)
		sig <- syscall.SIGTERM
		if r := <-ch; r.err != nil || r.res.ExitCode != 3 || !strings.Contains(r.res.Stdout, "got-term") {
			t.Fatalf("signal: %v exit %d stdout %q stderr %q", r.err, r.res.ExitCode, r.res.Stdout, r.res.Stderr)
		}
	})
}

// execOut is the outcome of an exec started with execAsync.
type execOut struct {
	res sandbox.ExecResult
	err error
}

// execAsync runs req (ID and capture filled in) in the background.
func execAsync(sb driver.Sandbox, timeout time.Duration, req sandbox.ExecRequest) <-chan execOut {
	ch := make(chan execOut, 1)
	req.ID = sandbox.NewID("exec_")
	req.Capture = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res, err := sb.Exec(ctx, req)
		ch <- execOut{res, err}
	}()
	return ch
}

// stream is an output writer that is not a file, as a streaming client's is, that tests can wait on.
type stream struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func newStream() *stream { return &stream{} }

func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *stream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *stream) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// waitFor waits until the stream has sub in it.
func (s *stream) waitFor(t *testing.T, sub string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); !strings.Contains(s.String(), sub); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %q in the stream after %v: %q", sub, d, s.String())
		}
	}
}
