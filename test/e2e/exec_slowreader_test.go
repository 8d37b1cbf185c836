package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// stallWriter blocks its first Write until release is closed, then takes everything: a client
// that stops reading its interactive exec for a while.
type stallWriter struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	n       int64
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { <-w.release })
	w.mu.Lock()
	w.n += int64(len(p))
	w.mu.Unlock()
	return len(p), nil
}

// TestExecSlowReader runs a command that prints without end, with a 5 s timeout, for an
// interactive client that stops reading: the command still ends at 5 s, its record is written
// then with real usage figures (not when the client comes back), the sandbox serves other execs
// meanwhile, and the client, once it reads again, gets the output that waited for it (at most
// 10 MiB, and what the sockets buffered) and a result that says the rest was dropped.
func TestExecSlowReader(t *testing.T) {
	_, c := newDaemon(t)
	id := createN(t, c, 1)[0]

	w := &stallWriter{release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(w.release)
		}
	}
	defer release()
	type outcome struct {
		res api.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	noCapture := false
	start := time.Now()
	go func() {
		res, err := c.ExecInteractive(bg(), id, api.ExecStart{ExecRequest: api.ExecRequest{
			Command: api.Shell("yes airlock-slow-reader"), Timeout: 5, CaptureOutput: &noCapture}}, client.Stdio{Stdout: w})
		done <- outcome{res, err}
	}()

	// The client reads nothing; the exec must end at its timeout and be recorded as it ends.
	var rec api.Execution
	for {
		execs, err := c.Execs(bg(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(execs) == 1 && execs[0].Status == api.ExecDone {
			rec = execs[0]
			break
		}
		if time.Since(start) > 12*time.Second {
			t.Fatalf("12 s into an exec with timeout 5 whose client stopped reading, its record is %+v", execs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := rec.Result
	if r == nil || !r.TimedOut || r.DurationMs < 4900 || r.DurationMs > 8000 {
		t.Fatalf("record of the stalled exec: %+v, want timedOut after ~5 s", r)
	}
	if r.ResourceUsage.CPUTimeMs <= 0 || r.ResourceUsage.PeakMemoryMB <= 0 {
		t.Errorf("usage of a command that ran 5 s: %+v, want real figures", r.ResourceUsage)
	}
	// The sandbox is not held by the stalled client.
	if got := shOK(t, c, id, "echo free"); got != "free" {
		t.Errorf("exec beside the stalled client: %q", got)
	}

	release()
	o := <-done
	if o.err != nil {
		t.Fatalf("interactive exec, once the client read again: %v", o.err)
	}
	if !o.res.TimedOut || !o.res.Truncated {
		t.Errorf("result: timedOut %v truncated %v, want both", o.res.TimedOut, o.res.Truncated)
	}
	var dropped int64
	for _, e := range o.res.LimitEvents {
		if e.Type == "limit.output" {
			dropped = e.Count
		}
	}
	if dropped <= 0 {
		t.Errorf("limit events %+v: want a limit.output event counting the dropped bytes", o.res.LimitEvents)
	}
	w.mu.Lock()
	got := w.n
	w.mu.Unlock()
	// What waited: at most 10 MiB in the daemon, plus what the sockets' buffers held.
	if got <= 0 || got > 32<<20 {
		t.Errorf("the client got %d bytes after it read again; want the queued output, 10 MiB and the sockets' buffers at most", got)
	}
}
