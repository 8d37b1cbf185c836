package audit

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// Event types of the log itself (tenant "", no sandbox).
const (
	// EventPruned says that retention removed events; Data: throughSeq, count, reason.
	EventPruned = "audit.pruned"
	// EventRecovered says that the daemon found the stored log damaged when it started (a
	// missing chain record, a cut-off tail, events added outside airlock) and went on from the
	// last stored event; Data: problem. Verify reports it, so a restart never hides tampering.
	EventRecovered = "audit.recovered"
)

// Config configures a Log.
type Config struct {
	// Disabled keeps events out of the store: the sinks and the logs stream still get them,
	// the events API answers nothing.
	Disabled bool
	// Retention removes events older than this (0: keep them).
	Retention time.Duration
	// MaxEvents removes the oldest events beyond this many (0: no cap).
	MaxEvents int64
	// FlushEvery is how long an event may wait in memory before it is written. Default 100 ms.
	FlushEvery time.Duration
	// Sinks get every event once it is in the log.
	Sinks []Sink
	// Written and Dropped, when set, count events written and events dropped because the store
	// could not keep up (metrics).
	Written, Dropped func(n int)
}

const (
	eventBatch     = 1024
	maxEventBuffer = 200_000 // beyond it (a store that cannot keep up) the oldest are dropped, and counted
	pruneEvery     = time.Minute
	pruneChunk     = 5000
	pruneMax       = 200_000 // events removed per pass at most, so a pass stays short
)

// Log is the audit log's writer.
type Log struct {
	st  *store.Store
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // guards buf, dropped and changed
	buf     []store.TenantEvent
	dropped int
	changed chan struct{} // closed when events were written, then replaced

	flushMu sync.Mutex // one writer at a time: guards chain, prev and loaded
	chain   store.Chain
	prev    []byte // the head's hash
	loaded  bool
	kick    chan struct{}
}

// New returns a Log writing to st. Run writes; nothing is read from st until the first write.
func New(st *store.Store, cfg Config, log *slog.Logger) *Log {
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = 100 * time.Millisecond
	}
	return &Log{st: st, cfg: cfg, log: log, kick: make(chan struct{}, 1), changed: make(chan struct{})}
}

// Enabled reports whether events are stored.
func (l *Log) Enabled() bool { return !l.cfg.Disabled }

// Add queues an event; it is written within FlushEvery. It never waits for the store.
func (l *Log) Add(e store.TenantEvent) {
	if e.ID == "" {
		e.ID = sandbox.NewOrderedID("evt_")
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	l.mu.Lock()
	l.buf = append(l.buf, e)
	full := len(l.buf) >= eventBatch
	l.trimLocked()
	l.mu.Unlock()
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *Log) trimLocked() {
	if over := len(l.buf) - maxEventBuffer; over > 0 {
		l.buf = l.buf[over:]
		l.dropped += over
	}
}

// Changed returns a channel closed the next time events are written: take it, read the store,
// then wait on it to learn of what came after.
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Run writes batches until stop is closed, then writes what is left. It also applies retention.
func (l *Log) Run(stop <-chan struct{}) {
	t := time.NewTicker(l.cfg.FlushEvery)
	defer t.Stop()
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-stop:
			l.Flush()
			return
		case <-t.C:
		case <-l.kick:
		case now := <-prune.C:
			if _, err := l.Prune(context.Background(), now); err != nil {
				l.log.Error("audit retention", "err", err)
			}
		}
		l.Flush()
	}
}

// Flush writes every queued event now, in order, and returns once they are written (or failed
// to be: then they stay queued for the next try).
func (l *Log) Flush() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	buf, dropped := l.buf, l.dropped
	l.buf, l.dropped = nil, 0
	l.mu.Unlock()
	if dropped > 0 {
		l.log.Error("audit log buffer overflowed; oldest events dropped", "dropped", dropped)
		if l.cfg.Dropped != nil {
			l.cfg.Dropped(dropped)
		}
	}
	if len(buf) == 0 {
		return
	}
	wrote := false
	for len(buf) > 0 {
		n := min(len(buf), eventBatch)
		if err := l.write(buf[:n]); err != nil {
			l.log.Error("audit log: write events; they stay queued", "count", len(buf), "err", err)
			l.mu.Lock()
			l.buf = append(buf, l.buf...)
			l.trimLocked()
			l.mu.Unlock()
			break
		}
		buf, wrote = buf[n:], true
	}
	if wrote {
		l.mu.Lock()
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

// write appends one batch to the chain and hands it to the sinks. flushMu is held.
func (l *Log) write(evs []store.TenantEvent) error {
	if !l.cfg.Disabled {
		ctx := context.Background()
		rec, err := l.load(ctx)
		if err != nil {
			return err
		}
		if rec != nil {
			evs = append([]store.TenantEvent{*rec}, evs...)
		}
		rows := make([]store.EventRow, len(evs))
		c, prev := l.chain, l.prev
		for i := range evs {
			c.HeadSeq++
			evs[i].Seq = c.HeadSeq
			r, err := row(evs[i])
			if err != nil {
				return err
			}
			prev = Hash(prev, r)
			r.Hash = hex.EncodeToString(prev)
			rows[i] = r
		}
		c.HeadHash = rows[len(rows)-1].Hash
		if err := l.st.AppendEvents(ctx, rows, c); err != nil {
			l.loaded = false // read the head again: the store is the truth
			if strings.Contains(err.Error(), "events.id") {
				// Two IDs met (32 random bits within a millisecond): new ones for the retry.
				for i := range evs {
					evs[i].ID = sandbox.NewOrderedID("evt_")
				}
			}
			return err
		}
		l.chain, l.prev = c, prev
		if l.cfg.Written != nil {
			l.cfg.Written(len(evs))
		}
	}
	for _, s := range l.cfg.Sinks {
		s.Publish(evs)
	}
	return nil
}

// row is the stored form of e (its Seq set).
func row(e store.TenantEvent) (store.EventRow, error) {
	body, err := json.Marshal(e.Event)
	if err != nil {
		return store.EventRow{}, fmt.Errorf("event %s: %w", e.ID, err)
	}
	return store.EventRow{Seq: e.Seq, ID: e.ID, Tenant: e.Tenant, SandboxID: e.SandboxID, ExecutionID: e.ExecutionID,
		Type: e.Type, At: e.Time.UnixNano(), Body: body}, nil
}

// load reads the chain's head from the store, once. A log written before the chain existed is
// chained now; a stored log that disagrees with its chain record (damaged or tampered with) is
// taken as it is, from its last event on, and the disagreement is recorded as an event of the
// chain (EventRecovered, returned to be written first), where Verify finds it. flushMu is held.
func (l *Log) load(ctx context.Context) (*store.TenantEvent, error) {
	if l.loaded {
		return nil, nil
	}
	c, err := l.st.ChainState(ctx)
	if err != nil {
		return nil, err
	}
	last, found, err := l.st.LastEvent(ctx)
	if err != nil {
		return nil, err
	}
	var problem string
	switch {
	case !c.Present && found && last.Hash == "":
		if c, err = l.chainUnhashed(ctx); err != nil {
			return nil, err
		}
	case !c.Present && found:
		problem = fmt.Sprintf("the chain record is missing; events are stored up to %d", last.Seq)
	case c.Present && !found && c.HeadSeq != c.AnchorSeq:
		problem = fmt.Sprintf("every event after %d is missing; the chain record's head is %d", c.AnchorSeq, c.HeadSeq)
	case c.Present && found && last.Seq < c.HeadSeq:
		problem = fmt.Sprintf("events %d to %d are missing (the log was cut off); the chain record's head is %d", last.Seq+1, c.HeadSeq, c.HeadSeq)
	case c.Present && found && last.Seq > c.HeadSeq:
		problem = fmt.Sprintf("events %d to %d were added after the chain record's head %d", c.HeadSeq+1, last.Seq, c.HeadSeq)
	case c.Present && found && last.Hash != c.HeadHash:
		problem = fmt.Sprintf("the last event %d's hash differs from the chain record's head", last.Seq)
	}
	if problem != "" {
		c = store.Chain{HeadSeq: last.Seq, HeadHash: last.Hash, AnchorSeq: c.AnchorSeq, AnchorHash: c.AnchorHash, Present: true}
		if !found {
			c.HeadSeq, c.HeadHash = c.AnchorSeq, c.AnchorHash
		}
		l.log.Error("audit log damaged; going on from its last stored event (recorded as "+EventRecovered+")", "problem", problem)
	}
	prev, ok := decodeHash(c.HeadHash)
	if !ok {
		prev = Hash(Genesis, last) // an unreadable stored hash: the chain goes on from this event's content
		problem += "; the head's stored hash is not a hash"
	}
	l.chain, l.prev, l.loaded = c, prev, true
	if problem == "" {
		return nil, nil
	}
	return &store.TenantEvent{Event: api.Event{ID: sandbox.NewOrderedID("evt_"), Type: EventRecovered, Time: time.Now().UTC(),
		Message: "the audit log was damaged when the daemon started: " + problem, Data: map[string]any{"problem": problem}}}, nil
}

// chainUnhashed hashes the events a log written before the chain existed holds, in order.
func (l *Log) chainUnhashed(ctx context.Context) (store.Chain, error) {
	c := store.Chain{Present: true}
	prev := Genesis
	for {
		rows, err := l.st.EventRows(ctx, c.HeadSeq, pruneChunk)
		if err != nil || len(rows) == 0 {
			return c, err
		}
		for i := range rows {
			if i == 0 && c.HeadSeq == 0 {
				// Older rows may have been numbered from anywhere: the chain starts before the first.
				c.AnchorSeq, c.HeadSeq = rows[0].Seq-1, rows[0].Seq-1
			}
			prev = Hash(prev, rows[i])
			rows[i].Hash = hex.EncodeToString(prev)
		}
		c.HeadSeq, c.HeadHash = rows[len(rows)-1].Seq, rows[len(rows)-1].Hash
		if err := l.st.SetEventHashes(ctx, rows, c); err != nil {
			return c, err
		}
	}
}

// Prune applies retention: it removes the oldest events that are older than Retention or beyond
// MaxEvents, moves the chain's anchor to the last one removed, and records an audit.pruned event.
func (l *Log) Prune(ctx context.Context, now time.Time) (int64, error) {
	if l.cfg.Disabled || (l.cfg.Retention <= 0 && l.cfg.MaxEvents <= 0) {
		return 0, nil
	}
	l.Flush()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	rec, err := l.load(ctx)
	if err != nil {
		return 0, err
	}
	if rec != nil {
		l.mu.Lock()
		l.buf = append([]store.TenantEvent{*rec}, l.buf...)
		l.mu.Unlock()
	}
	cutoff := now.Add(-l.cfg.Retention).UnixNano()
	capSeq := l.chain.HeadSeq - l.cfg.MaxEvents
	old := func(r store.EventRow) bool {
		return (l.cfg.Retention > 0 && r.At < cutoff) || (l.cfg.MaxEvents > 0 && r.Seq <= capSeq)
	}
	c := l.chain
	for c.AnchorSeq-l.chain.AnchorSeq < pruneMax {
		rows, err := l.st.EventRows(ctx, c.AnchorSeq, pruneChunk)
		if err != nil {
			return 0, err
		}
		i := 0
		for i < len(rows) && old(rows[i]) && rows[i].Seq < l.chain.HeadSeq {
			i++
		}
		if i > 0 {
			c.AnchorSeq, c.AnchorHash = rows[i-1].Seq, rows[i-1].Hash
		}
		if i < len(rows) || len(rows) < pruneChunk {
			break
		}
	}
	if c.AnchorSeq == l.chain.AnchorSeq {
		return 0, nil
	}
	n, err := l.st.PruneEvents(ctx, c)
	if err != nil {
		return 0, err
	}
	from := l.chain.AnchorSeq + 1
	l.chain = c
	reason := "retention"
	if l.cfg.MaxEvents > 0 {
		reason = "retention or maxEvents"
	}
	l.mu.Lock()
	l.buf = append(l.buf, store.TenantEvent{Event: api.Event{ID: sandbox.NewOrderedID("evt_"), Type: EventPruned, Time: now.UTC(),
		Message: fmt.Sprintf("retention removed events %d to %d", from, c.AnchorSeq),
		Data:    map[string]any{"fromSeq": from, "throughSeq": c.AnchorSeq, "count": n, "reason": reason, "anchorHash": c.AnchorHash}}})
	l.mu.Unlock()
	l.log.Info("audit retention", "removed", n, "through", c.AnchorSeq)
	return n, nil
}
