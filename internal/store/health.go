package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// What a full disk does to the store. In WAL mode a commit appends its pages to the -wal file;
// when the file system has no room for them SQLite fails the statement with SQLITE_FULL (or
// SQLITE_IOERR_WRITE and kin for a failing write) and rolls it back: what was committed before
// stays, nothing half-written is kept. A checkpoint (copying the WAL into the database file)
// may need room too; when it fails the WAL just keeps the pages and a later checkpoint copies
// them. Reads keep working throughout. So a storage failure is a refusal of that one write —
// errdefs.ErrStoreFull, HTTP 507 — and the store is "degraded" until a write succeeds again.

// Health is the state of the store's writes.
type Health struct {
	Degraded bool      // the last write failed for the disk
	Reason   string    // the failure, when Degraded
	Since    time.Time // when it began, when Degraded
}

// health tracks whether writes work and tells OnHealth when that changes.
type health struct {
	degraded  atomic.Bool  // mirrors state.Degraded, for the writes' fast path
	lastProbe atomic.Int64 // when Probe last wrote, in Unix nanoseconds

	mu       sync.Mutex // guards state and onChange, and orders their calls
	state    Health
	onChange func(Health)
}

// OnHealth sets f to be called whenever writes start or stop failing for the disk (the daemon
// counts it in the metrics and records an event). f must not write to the store.
func (s *Store) OnHealth(f func(Health)) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	s.health.onChange = f
}

// Health reports whether the store's writes work.
func (s *Store) Health() Health {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.state
}

// probeEvery spaces Probe's writes: /healthz needs no key, and asks it.
const probeEvery = time.Second

// Probe tries a write when the store is degraded (one page: the database header's
// user_version, which airlock does not use, rewritten as it is), at most once per probeEvery,
// and returns the health after it; a store that is not degraded is not written.
func (s *Store) Probe(ctx context.Context) Health {
	now := time.Now().UnixNano()
	if last := s.health.lastProbe.Load(); s.health.degraded.Load() && now-last >= int64(probeEvery) &&
		s.health.lastProbe.CompareAndSwap(last, now) {
		var v int
		if err := s.write.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err == nil {
			// The writer records the outcome in the health returned below.
			_, _ = s.write.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v))
		}
	}
	return s.Health()
}

// wrote is the error of a write: nil clears a degraded store; a failure of the disk marks it
// degraded and is returned as an errdefs.ErrStoreFull that says so; any other error is
// returned as it is.
func (h *health) wrote(err error) error {
	if err == nil {
		if h.degraded.Load() {
			h.set(Health{})
		}
		return nil
	}
	if errors.Is(err, errdefs.ErrStoreFull) {
		return err
	}
	reason := diskFailure(err)
	if reason == "" {
		return err
	}
	if !h.degraded.Load() {
		h.set(Health{Degraded: true, Reason: reason, Since: time.Now().UTC()})
	}
	return &storeFullError{reason: reason, err: err}
}

// set changes the state and tells onChange, if it changed.
func (h *health) set(st Health) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state.Degraded == st.Degraded {
		return
	}
	h.state = st
	h.degraded.Store(st.Degraded)
	if h.onChange != nil {
		h.onChange(st)
	}
}

// diskFailure says why err is a failure of the disk under the database (full, or failing to
// write), or "" when it is not.
func diskFailure(err error) string {
	code := sqliteCode(err)
	switch {
	case code&0xff == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return "the data dir's disk is full (SQLITE_FULL)"
	case code&0xff == sqlite3.SQLITE_IOERR:
		return fmt.Sprintf("the data dir's disk fails to write (SQLITE_IOERR, extended code %d)", code)
	}
	return ""
}

// storeFullError is a write refused for the disk: errors.Is matches errdefs.ErrStoreFull and
// the SQLite error.
type storeFullError struct {
	reason string
	err    error
}

func (e *storeFullError) Error() string {
	return fmt.Sprintf("the daemon's store cannot be written: %s: %v", e.reason, e.err)
}

func (e *storeFullError) Unwrap() []error { return []error{errdefs.ErrStoreFull, e.err} }

// writer is the writer connection; the errors of its statements go through health.wrote.
// Queries on it (reads inside a write path) are not wrapped: a read that works says nothing of
// the disk.
type writer struct {
	*sql.DB
	health *health
}

// ExecContext runs a statement on the writer and checks its error for the disk.
func (w writer) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	r, err := w.DB.ExecContext(ctx, query, args...)
	return r, w.health.wrote(err)
}
