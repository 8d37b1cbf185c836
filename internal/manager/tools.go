package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// What the tool gateway (internal/tools) needs of the sandboxes beyond the API's own operations:
// its tool.call events recorded like the manager's own, a sandbox's egress proxy to send an http
// tool's request through, and the files an exec wrote (run_code's result).

// RecordEvent records e (its ID kept when set) for the tenant in ctx: as an event of sandbox id
// when the tenant owns it (live: also in its logs stream), else of the tenant alone.
func (m *Manager) RecordEvent(ctx context.Context, id string, e api.Event) {
	ten := tenant.From(ctx)
	if e.ID == "" {
		e.ID = sandbox.NewOrderedID("evt_")
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if id != "" && ten != "" {
		m.mu.Lock()
		b, ok := m.boxes[id]
		m.mu.Unlock()
		if ok && b.owner() == ten {
			m.recordEvent(b, ten, e)
			return
		}
		if _, err := m.store.Sandbox(context.WithoutCancel(ctx), ten, id); err == nil {
			e.SandboxID = id // an ended sandbox of the tenant
		}
	}
	m.events.Add(store.TenantEvent{Tenant: ten, Event: e})
}

// EgressProxy returns the egress proxy of live sandbox id of the tenant in ctx (http://HOST:PORT),
// and a release to call once the request through it is done: meanwhile the sandbox counts as
// busy (its idle timeout waits). A sandbox without a network (egress none) is ErrConflict.
func (m *Manager) EgressProxy(ctx context.Context, id string) (string, func(), error) {
	b, err := m.live(ctx, id, "send a request through")
	if err != nil {
		return "", nil, err
	}
	sb, err := b.begin(ctx, "send a request through", false)
	if err != nil {
		return "", nil, err
	}
	ep, ok := sb.(driver.EgressProxier)
	var u string
	if ok {
		u, ok = ep.EgressProxy()
	}
	if !ok {
		b.done()
		return "", nil, fmt.Errorf("sandbox %s has no network of its own (egressPolicy none, or a level without one): "+
			"a request cannot leave through it; give the tool a sandbox with egressPolicy restricted and the hosts it may reach: %w", id, errdefs.ErrConflict)
	}
	return u, b.done, nil
}

// maxRecentChanges is how many execs' file changes a sandbox keeps for ExecFiles.
const maxRecentChanges = 16

// remember keeps the changes the scan after exec execID found, for ExecFiles. Under s.mu.
func (s *layerScans) rememberLocked(execID string, ch fsdiff.Changes) {
	if execID == "" {
		return
	}
	if s.recent == nil {
		s.recent = map[string]fsdiff.Changes{}
	}
	s.recent[execID] = ch
	s.order = append(s.order, execID)
	if len(s.order) > maxRecentChanges {
		delete(s.recent, s.order[0])
		s.order = s.order[1:]
	}
}

// ExecFiles returns the files exec execID of sandbox id created and modified, waiting up to
// timeout for the scan of the sandbox's layer after it. ok is false when they are not known: the
// level cannot read the layer, the audit log is off, or the scan did not come in time.
func (m *Manager) ExecFiles(ctx context.Context, id, execID string, timeout time.Duration) (created, modified []string, ok bool) {
	ten := tenant.From(ctx)
	m.mu.Lock()
	b, live := m.boxes[id]
	m.mu.Unlock()
	if !live || ten != "" && b.owner() != ten {
		return nil, nil, false
	}
	b.waitScans(ctx, timeout)
	s := &b.scans
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layer == nil || s.unavailable {
		return nil, nil, false
	}
	ch, found := s.recent[execID]
	if !found {
		if s.idle != nil {
			return nil, nil, false // the scan did not come in time
		}
		return []string{}, []string{}, true // it found nothing changed
	}
	return ch.Created, ch.Modified, true
}
