package pid1

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// slowWriter holds every write until released, as a relay starved of CPU, or a host that reads
// slowly, would.
type slowWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *slowWriter) Write(b []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

func (w *slowWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// nonblockingPipe is a pipe whose read end is init's end of a relayed stream.
func nonblockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	if err := unix.SetNonblock(p[1], false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// An exit is told only once the output its command wrote has been sent: bytes still in the pipe
// and bytes the relay holds both count; bytes written after the exit (a background process) do
// not hold it back.
func TestExitWaitsForOutput(t *testing.T) {
	for _, tc := range []struct {
		name       string
		background bool // a process that outlives the command keeps the pipe open
	}{
		{"command alone", false},
		{"with a background writer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w := nonblockingPipe(t)
			dst := &slowWriter{release: make(chan struct{})}
			c := &outCopy{src: r}
			done := make(chan struct{})
			go func() { defer close(done); c.run(dst, nil) }()

			if _, err := w.WriteString("first\n"); err != nil {
				t.Fatal(err)
			}
			// The relay has read "first" and is stuck sending it; "last" waits in the pipe.
			waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.read > 0 })
			if _, err := w.WriteString("last\n"); err != nil {
				t.Fatal(err)
			}
			if !tc.background {
				w.Close()
			}
			p := newPendingExit(&guest.Message{Kind: guest.MsgExited, ID: "e"}, []*outCopy{c})
			if p.ready() {
				t.Fatal("the exit was ready while its output was neither sent nor read")
			}
			dst.release <- struct{}{} // "first" is sent
			waitFor(t, func() bool { return dst.String() == "first\n" })
			time.Sleep(20 * time.Millisecond) // the relay reads "last", and waits to send it
			if p.ready() {
				t.Fatal("the exit was ready while the last of its output was not sent")
			}
			dst.release <- struct{}{} // "last"
			waitFor(t, p.ready)
			if got := dst.String(); got != "first\nlast\n" {
				t.Fatalf("sent %q when the exit was ready, want all the command wrote", got)
			}
			close(dst.release)
			if tc.background {
				// Still open: the copy goes on, and the exit did not wait for its end.
				select {
				case <-done:
					t.Fatal("the copy ended while a writer held the pipe")
				default:
				}
				w.Close()
			}
			<-done
			if !p.ready() || c.mark() != -1 {
				t.Fatal("an ended copy must count as sent")
			}
		})
	}
}

// A host that never reads does not hold an exit back for longer than drainWait.
func TestExitWaitIsBounded(t *testing.T) {
	r, w := nonblockingPipe(t)
	dst := &slowWriter{release: make(chan struct{})}
	defer close(dst.release)
	c := &outCopy{src: r}
	go c.run(dst, nil)
	if _, err := w.WriteString("stuck\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.read > 0 })
	p := newPendingExit(&guest.Message{Kind: guest.MsgExited, ID: "e"}, []*outCopy{c})
	if p.ready() {
		t.Fatal("ready before its output was sent")
	}
	p.deadline = time.Now()
	if !p.ready() {
		t.Fatal("an exit past its deadline must be told")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
