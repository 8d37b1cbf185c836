package manager

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/tenant"
)

// logRing is a sandbox's recent output and events, for GET .../logs: bounded by bytes, oldest
// dropped first, with followers woken on every append.
type logRing struct {
	max int

	mu      sync.Mutex // guards everything below
	entries []api.LogEntry
	bytes   int
	seq     int64
	ended   bool
	wake    chan struct{} // closed and replaced on every append and at the end
}

func newLogRing(max int) *logRing { return &logRing{max: max, wake: make(chan struct{})} }

func (r *logRing) add(e api.LogEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.seq++
	e.Seq, e.Time = r.seq, time.Now().UTC()
	e.Timestamp, e.Message = e.Time, e.Data
	if e.Event != nil {
		e.Message = e.Event.Message
	}
	r.entries = append(r.entries, e)
	r.bytes += len(e.Data) + 64
	for r.bytes > r.max && len(r.entries) > 1 {
		r.bytes -= len(r.entries[0].Data) + 64
		r.entries[0] = api.LogEntry{}
		r.entries = r.entries[1:]
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// writer returns an io.Writer that appends output chunks of one stream of an exec, and passes
// them on to next when it is not nil.
func (r *logRing) writer(sandboxID, execID, stream string, next io.Writer) io.Writer {
	return &logWriter{r: r, execID: execID, stream: stream, next: next}
}

type logWriter struct {
	r              *logRing
	execID, stream string
	next           io.Writer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.r.add(api.LogEntry{Stream: w.stream, ExecutionID: w.execID, Data: string(p)})
	if w.next != nil {
		// A slow or gone client must not stop the command: its errors are not the command's.
		_, _ = w.next.Write(p)
	}
	return len(p), nil
}

// end marks the log complete (the sandbox ended) and wakes followers.
func (r *logRing) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		r.ended = true
		close(r.wake)
		r.wake = make(chan struct{})
	}
}

// since returns the entries after seq, whether the log has ended, and a channel closed at the
// next change.
func (r *logRing) since(seq int64) ([]api.LogEntry, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []api.LogEntry
	for i := len(r.entries) - 1; i >= 0 && r.entries[i].Seq > seq; i-- {
		out = append(out, r.entries[i])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, r.ended, r.wake
}

// Logs calls fn with the sandbox's log entries after seq; with follow it waits for more until
// the sandbox ends or ctx is done. The logs of a sandbox that ended long ago are gone: it then
// returns none.
func (m *Manager) Logs(ctx context.Context, id string, seq int64, follow bool, fn func(api.LogEntry) error) error {
	if _, err := m.Get(ctx, id); err != nil {
		return err
	}
	r := m.logsOf(tenant.From(ctx), id)
	if r == nil {
		return nil
	}
	for {
		entries, ended, wake := r.since(seq)
		for _, e := range entries {
			if err := fn(e); err != nil {
				return err
			}
			seq = e.Seq
		}
		if !follow || ended {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil
		}
	}
}

func (m *Manager) logsOf(ten, id string) *logRing {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.boxes[id]; ok && (ten == "" || b.tenant == ten) {
		return b.logs
	}
	for _, b := range m.ended {
		if b.id == id && (ten == "" || b.tenant == ten) {
			return b.logs
		}
	}
	return nil
}
