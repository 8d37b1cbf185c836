package manager

import (
	"context"
	"fmt"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// Recovery at start: what a previous daemon left is adopted or reclaimed before any request.

// Recover runs once at start, before any request. Execs cut off by a crash are marked lost. Every
// sandbox the store says was live is adopted if its level can verify it survived (its status and
// records continue), and otherwise reclaimed — whatever of it is left is removed — and marked
// failed with reason daemon_restart. A sandbox whose teardown was recorded (store.Teardown) is
// never adopted: its teardown is finished — reclaimed by the instance's recorded facts, then its
// end recorded — whatever its record says. Then the snapshot blobs no record uses are removed,
// and each level sweeps what no record names.
func (m *Manager) Recover(ctx context.Context) error {
	n, err := m.store.MarkLost(ctx)
	if err != nil {
		return fmt.Errorf("recover execs: %w", err)
	}
	if err := m.loadStored(ctx); err != nil {
		return fmt.Errorf("recover stored bytes: %w", err)
	}
	recs, err := m.store.Sandboxes(ctx, store.Filter{Status: sandbox.LiveStatuses})
	if err != nil {
		return fmt.Errorf("recover sandboxes: %w", err)
	}
	// A sandbox whose teardown was recorded is not adopted: the teardown is finished.
	tds, err := m.store.Teardowns(ctx)
	if err != nil {
		return fmt.Errorf("recover teardowns: %w", err)
	}
	intents := map[string]*store.Teardown{}
	for i := range tds {
		intents[tds[i].SandboxID] = &tds[i]
	}
	adopted, failed, ended := 0, 0, 0
	for _, r := range recs {
		td := intents[r.ID]
		if td == nil {
			d, err := m.drivers.Lookup(r.Spec.Isolation)
			if err != nil {
				m.log.Error("recover sandbox: its level is gone", "sandbox", r.ID, "err", err)
			}
			if d != nil && m.adopt(ctx, d, r) {
				adopted++
				continue
			}
		}
		status, err := m.endUnadopted(ctx, r, td)
		if err != nil {
			return err
		}
		if status == api.StatusFailed {
			failed++
		} else {
			ended++
		}
	}
	ended += m.finishTeardowns(ctx)
	m.reclaimRetired(ctx)
	m.collectBlobs(ctx)
	m.sweep(ctx)
	if n > 0 || len(recs) > 0 || ended > 0 {
		m.log.Warn("recovered after an unclean stop", "adopted", adopted, "failed", failed, "tornDown", ended, "lostExecs", n)
	}
	return nil
}

// reclaimRetired reclaims the instances restores replaced whose teardown a killed daemon did
// not finish.
func (m *Manager) reclaimRetired(ctx context.Context) {
	retired, err := m.store.Retired(ctx)
	if err != nil {
		m.log.Error("recover retired instances", "err", err)
		return
	}
	for _, r := range retired {
		d, _ := m.drivers.Lookup(r.Isolation)
		rc, ok := d.(driver.Reclaimer)
		if !ok {
			continue // its level is gone; its own sweep (if it comes back) finds it
		}
		if err := rc.Reclaim(ctx, r.LevelID); err != nil {
			m.log.Error("reclaim a retired instance", "sandbox", r.SandboxID, "instance", r.LevelID, "err", err)
			continue
		}
		if err := m.store.Reclaimed(ctx, r.LevelID); err != nil {
			m.log.Error("record a reclaimed instance", "instance", r.LevelID, "err", err)
		}
		m.log.Info("reclaimed the instance a restore replaced", "sandbox", r.SandboxID, "instance", r.LevelID)
	}
}

// adopt takes over a sandbox that outlived the previous daemon, if its level can.
func (m *Manager) adopt(ctx context.Context, d driver.Driver, r store.Sandbox) bool {
	a, ok := d.(driver.Adopter)
	// A warm pool's unclaimed sandbox is reclaimed: the pool makes a new one.
	if !ok || len(r.Host) == 0 || r.Status == api.StatusProvisioning || isPoolTenant(r.Tenant) {
		return false
	}
	spec := r.Spec
	if err := m.cfg.Grants.Resolve(&spec); err != nil {
		m.log.Info("sandbox not adopted", "sandbox", r.ID, "err", err)
		return false
	}
	r.Spec = spec
	sb, err := a.Adopt(ctx, r.LevelID(), r.Spec, r.Host)
	if err != nil {
		m.log.Info("sandbox not adopted", "sandbox", r.ID, "err", err)
		return false
	}
	// The host follows the record: a pause or resume the killed daemon did not record did not
	// happen (a sandbox frozen and recorded ready would refuse every exec).
	if p, ok := sb.(driver.Pauser); ok {
		follow := p.Resume
		if r.Status == api.StatusPaused {
			follow = p.Pause
		}
		if err := follow(ctx); err != nil {
			m.log.Info("sandbox not adopted", "sandbox", r.ID, "err", err)
			if err := sb.Destroy(ctx); err != nil {
				m.log.Error("destroy a sandbox not adopted", "sandbox", r.ID, "err", err)
			}
			return false
		}
	}
	b := m.newBox(r)
	b.sb = sb
	m.recordEvent(b, r.Tenant, api.Event{Type: api.EventSandboxAdopted, Message: "adopted by a restarted daemon", Data: map[string]any{"status": r.Status}})
	m.mu.Lock()
	m.boxes[r.ID] = b
	m.mu.Unlock()
	m.watchIfWatcher(b, sb)
	return true
}
