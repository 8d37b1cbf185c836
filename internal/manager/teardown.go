package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// Teardown is intent before effect, effect before completion: the store records that a sandbox
// is to end (store.Teardown, with its instance and reason), the level destroys it, and only then
// is the end recorded and the intent cleared. A daemon killed in between leaves the intent, and
// whoever comes next finishes it from the recorded facts — Recover at the next start, a retried
// DELETE, a clean stop — so a record never says terminated while the host still holds the
// sandbox.

// errNothingDestroyed marks a client's terminate refused before anything was destroyed.
var errNothingDestroyed = errors.New("nothing was destroyed")

// release destroys b's host resources and moves it to its end: `end` is terminated (a normal
// end: through completed when it ran), completed (its agent exited 0) or failed. It returns once the end is recorded, also when
// another release of b was under way, with the error of recording it: a client's terminate
// whose intent could not be recorded destroys nothing (errNothingDestroyed).
func (m *Manager) release(b *box, end, reason string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t, err := b.beginEnd(ctx, end, reason)
	if t == nil {
		return err
	}
	defer close(t.done)
	if t.intent != nil {
		m.log.Error("record teardown", "sandbox", b.id, "err", t.intent)
	}
	var destroyErr error
	if t.sb != nil {
		if destroyErr = t.sb.Destroy(ctx); destroyErr != nil {
			m.log.Error("destroy sandbox", "sandbox", b.id, "err", destroyErr)
		}
	}
	m.discardSpare(t.spec, t.spare)
	b.retiring.Wait() // a terminated sandbox leaves nothing, also of what a restore replaced
	recorded := b.recordEnd(ctx, end, reason)
	// A failed destroy keeps the intent: the next start, a retried DELETE or the clean stop
	// reclaims what is left.
	if t.intent == nil && recorded == nil && destroyErr == nil {
		if err := m.store.TornDown(ctx, b.id); err != nil {
			m.log.Error("record teardown done", "sandbox", b.id, "err", err)
		}
	}
	m.forget(b, true)
	return recorded
}

// ends is the path of statuses a sandbox at status takes to its end: failed, or terminated —
// through completed when it ran. One ended already takes at most the last step (a teardown cut
// off between its transitions, or one whose reclaim failed at a restart).
func ends(status, end string) []string {
	switch {
	case status == api.StatusTerminated:
		return nil
	case !sandbox.Live(status):
		if end == api.StatusTerminated {
			return []string{api.StatusTerminated}
		}
		return nil
	case end == api.StatusFailed || status == api.StatusProvisioning:
		return []string{api.StatusFailed}
	case end == api.StatusCompleted && sandbox.CanTransition(status, api.StatusCompleted):
		return []string{api.StatusCompleted} // its agent exited 0: terminated only when asked
	case sandbox.CanTransition(status, api.StatusTerminated):
		return []string{api.StatusTerminated}
	default:
		return []string{api.StatusCompleted, api.StatusTerminated}
	}
}

// finishTeardown finishes teardown td of a sandbox whose record is at status, with no driver
// sandbox of this daemon: its level reclaims what is left of the instance by the recorded facts,
// then the end is recorded (if the record is still live) and the intent cleared. It returns the
// status the record ends at; on an error the intent stays for the next try.
func (m *Manager) finishTeardown(ctx context.Context, td store.Teardown, status string) (string, error) {
	d, err := m.drivers.Lookup(td.Isolation)
	if err != nil {
		return status, fmt.Errorf("sandbox %s: finish its teardown: %w", td.SandboxID, err)
	}
	if rc, ok := d.(driver.Reclaimer); ok {
		if err := rc.Reclaim(ctx, td.LevelID); err != nil {
			return status, fmt.Errorf("sandbox %s: reclaim %s: %w", td.SandboxID, td.LevelID, err)
		}
	}
	for _, to := range ends(status, td.End) {
		t := api.Transition{To: to, Reason: td.Reason, At: time.Now().UTC()}
		if err := m.store.Transition(ctx, td.SandboxID, status, t); err != nil {
			return status, err
		}
		status = to
	}
	return status, m.store.TornDown(ctx, td.SandboxID)
}

// endUnadopted ends sandbox r, recorded live, which this daemon did not adopt: as teardown td
// when one was recorded (a killed daemon's), else failed with reason daemon_restart, itself
// recorded as a teardown first. A reclaim that fails leaves the intent for the next try, and the
// record failed (daemon_restart) meanwhile. It returns the status the record ends at.
func (m *Manager) endUnadopted(ctx context.Context, r store.Sandbox, td *store.Teardown) (string, error) {
	if td == nil {
		td = &store.Teardown{SandboxID: r.ID, LevelID: r.LevelID(), Isolation: r.Spec.Isolation, End: api.StatusFailed, Reason: sandbox.ReasonDaemonRestart}
		if err := m.store.BeginTeardown(ctx, *td); err != nil {
			return r.Status, fmt.Errorf("recover sandbox %s: %w", r.ID, err)
		}
	}
	status, err := m.finishTeardown(ctx, *td, r.Status)
	if err == nil || !sandbox.Live(status) {
		return status, nil
	}
	m.log.Error("reclaim sandbox", "sandbox", r.ID, "err", err)
	t := api.Transition{To: api.StatusFailed, Reason: sandbox.ReasonDaemonRestart, At: time.Now().UTC()}
	if err := m.store.Transition(ctx, r.ID, status, t); err != nil {
		return status, fmt.Errorf("recover sandbox %s: %w", r.ID, err)
	}
	return api.StatusFailed, nil
}

// finishTeardowns finishes the intents recorded for sandboxes whose records have ended (the
// live ones Recover handles first): a daemon killed between a teardown's record and its end, or
// a destroy that failed. It returns how many it finished.
func (m *Manager) finishTeardowns(ctx context.Context) int {
	tds, err := m.store.Teardowns(ctx)
	if err != nil {
		m.log.Error("unfinished teardowns", "err", err)
		return 0
	}
	n := 0
	for _, td := range tds {
		m.mu.Lock()
		_, live := m.boxes[td.SandboxID]
		m.mu.Unlock()
		if live {
			continue // its release is under way
		}
		rec, err := m.store.Sandbox(ctx, "", td.SandboxID)
		if err != nil {
			m.log.Error("unfinished teardown", "sandbox", td.SandboxID, "err", err)
			continue
		}
		if _, err := m.finishTeardown(ctx, td, rec.Status); err != nil {
			m.log.Error("finish a teardown", "sandbox", td.SandboxID, "err", err)
			continue
		}
		m.log.Info("finished the teardown of a sandbox", "sandbox", td.SandboxID, "instance", td.LevelID, "reason", td.Reason)
		n++
	}
	return n
}
