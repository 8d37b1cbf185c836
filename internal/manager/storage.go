package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/store"
)

// What the manager does while the store cannot be written (its disk is full): every request
// whose record must come first is refused with the store's errdefs.ErrStoreFull (HTTP 507)
// before anything is done on the host — a create before its provisioning record, an exec before
// its start record, a terminate before its end record. An exec that ran but whose result could
// not be recorded is kept here and recorded by the timekeeper once the store has room; a daemon
// stopped before that marks it lost at its next start, like any exec cut off (store.MarkLost).

// unrecorded holds results of execs that ran but could not be recorded.
type unrecorded struct {
	mu   sync.Mutex // guards byID
	byID map[string]unrecordedExec
}

type unrecordedExec struct {
	res   api.ExecResult
	ended time.Time
}

func (u *unrecorded) add(id string, res api.ExecResult, ended time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byID == nil {
		u.byID = map[string]unrecordedExec{}
	}
	u.byID[id] = unrecordedExec{res: res, ended: ended}
}

// take returns and forgets what is held.
func (u *unrecorded) take() map[string]unrecordedExec {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.byID
	u.byID = nil
	return out
}

// finishExec records exec id's result; when the store cannot be written, the result is kept
// for recordUnrecorded and the error says so.
func (m *Manager) finishExec(ctx context.Context, id string, res api.ExecResult) error {
	ended := time.Now().UTC()
	err := m.store.FinishExec(context.WithoutCancel(ctx), id, res, ended)
	if err == nil || !errors.Is(err, errdefs.ErrStoreFull) {
		return err
	}
	m.unrec.add(id, res, ended)
	m.log.Warn("exec result not recorded; kept until the store has room", "exec", id, "err", err)
	return fmt.Errorf("exec %s ran (exit %d) but its result could not be recorded; it is kept and recorded when the store has room (GET .../execs/%s): %w",
		id, res.ExitCode, id, err)
}

// recordUnrecorded retries the exec results the store could not take; what still fails stays.
func (m *Manager) recordUnrecorded(ctx context.Context) {
	for id, u := range m.unrec.take() {
		err := m.store.FinishExec(ctx, id, u.res, u.ended)
		switch {
		case err == nil:
			m.log.Info("exec result recorded late", "exec", id)
		case errors.Is(err, errdefs.ErrStoreFull):
			m.unrec.add(id, u.res, u.ended)
		default: // no longer running (marked lost) or gone: nothing left to record
			m.log.Warn("exec result dropped", "exec", id, "err", err)
		}
	}
}

// checkStore refuses work that needs the store while its writes fail (probing it first, so
// that a store with room again is noticed at once).
func (m *Manager) checkStore(ctx context.Context) error {
	if h := m.store.Probe(ctx); h.Degraded {
		return errdefs.New(errdefs.ErrStoreFull, "the daemon's store cannot be written since %s: %s; nothing was done",
			h.Since.Format(time.RFC3339), h.Reason)
	}
	return nil
}

// StoreHealth records that the store's writes started or stopped failing, as a daemon-wide
// event (queued: it is written once the store has room). The daemon passes it to
// store.OnHealth.
func (m *Manager) StoreHealth(h store.Health) {
	msg := "the daemon's store can be written again"
	if h.Degraded {
		msg = "the daemon's store cannot be written: " + h.Reason
		m.log.Error("store degraded: writes refused (HTTP 507) until the data dir has room", "reason", h.Reason)
	} else {
		m.log.Info("store writable again")
	}
	m.events.Add(store.TenantEvent{Event: api.Event{Type: api.EventDaemonStore, Message: msg,
		Data: map[string]any{"degraded": h.Degraded, "reason": h.Reason}}})
}
