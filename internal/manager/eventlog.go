package manager

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// eventLog batches events into the store off the path that produced them: a DNS answer or a
// proxied connection never waits for a database write. Events are written within flushEvery,
// or as soon as a batch is full.
type eventLog struct {
	st  *store.Store
	log *slog.Logger

	mu      sync.Mutex // guards buf and dropped
	buf     []store.TenantEvent
	dropped int

	flushMu sync.Mutex // serialises writers, so that events reach the store in order
	kick    chan struct{}
}

const (
	flushEvery     = 100 * time.Millisecond
	eventBatch     = 512
	maxEventBuffer = 100_000 // beyond it (a store that cannot keep up) the oldest are dropped, and counted
)

func newEventLog(st *store.Store, log *slog.Logger) *eventLog {
	return &eventLog{st: st, log: log, kick: make(chan struct{}, 1)}
}

func (l *eventLog) add(e store.TenantEvent) {
	l.mu.Lock()
	l.buf = append(l.buf, e)
	if over := len(l.buf) - maxEventBuffer; over > 0 {
		l.buf = l.buf[over:]
		l.dropped += over
	}
	full := len(l.buf) >= eventBatch
	l.mu.Unlock()
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// run writes batches until stop is closed, then writes what is left.
func (l *eventLog) run(stop <-chan struct{}) {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			l.flush()
			return
		case <-t.C:
		case <-l.kick:
		}
		l.flush()
	}
}

// flush writes every buffered event now.
func (l *eventLog) flush() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	buf, dropped := l.buf, l.dropped
	l.buf, l.dropped = nil, 0
	l.mu.Unlock()
	if dropped > 0 {
		l.log.Warn("event buffer overflowed; oldest events dropped", "dropped", dropped)
	}
	for len(buf) > 0 {
		n := min(len(buf), eventBatch)
		if err := l.st.AddEvents(context.Background(), buf[:n]); err != nil {
			l.log.Error("record events", "count", n, "err", err)
		}
		buf = buf[n:]
	}
}

// recordEvent puts an event of sandbox b, owned by tenant ten, in its logs and in the store for
// the events API.
func (m *Manager) recordEvent(b *box, ten string, e api.Event) {
	e.ID, e.SandboxID = sandbox.NewID("evt_"), b.id
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b.logs.add(api.LogEntry{Stream: api.StreamEvent, Event: &e})
	m.events.add(store.TenantEvent{Tenant: ten, Event: e})
}
