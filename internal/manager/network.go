package manager

import (
	"context"
	"slices"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenant"
)

// NetworkEvent records one decision of a sandbox's egress proxy or DNS server (the network
// service's sink): in the sandbox's log stream at once, in the store by the event writer. The
// execution is the one that was running in the sandbox when the connection or query began
// (allowed connections are reported when they end, perhaps after their exec); with several
// running then, the event names them all instead.
func (m *Manager) NetworkEvent(id string, ev netpolicy.Event) {
	m.mu.Lock()
	b, ok := m.boxes[id]
	m.mu.Unlock()
	if !ok {
		return
	}
	e := api.Event{ID: sandbox.NewOrderedID("evt_"), Type: "network." + ev.Kind, Time: ev.Time.UTC(), SandboxID: id,
		Message: ev.String(), Data: netData(ev)}
	switch ids := b.execsAt(ev.Start); len(ids) {
	case 0:
	case 1:
		e.ExecutionID = ids[0]
	default:
		e.Data["runningExecutions"] = ids
	}
	m.recordEvent(b, b.owner(), e)
}

func netData(ev netpolicy.Event) map[string]any {
	d := map[string]any{"proto": ev.Proto, "decision": "deny", "rule": ev.Rule, "reason": ev.Reason}
	if ev.Allow {
		d["decision"] = "allow"
	}
	if ev.Name != "" {
		d["name"] = ev.Name
	}
	if ev.Addr.IsValid() {
		d["address"] = ev.Addr.String()
	}
	if ev.Port != 0 {
		d["port"] = ev.Port
	}
	if ev.QType != "" {
		d["qtype"] = ev.QType
	}
	if len(ev.Answers) > 0 {
		a := make([]string, len(ev.Answers))
		for i, x := range ev.Answers {
			a[i] = x.String()
		}
		d["answers"] = a
	}
	if ev.Kind == netpolicy.KindConnect {
		d["bytesOut"], d["bytesIn"] = ev.BytesOut, ev.BytesIn
	}
	if ev.Credential != "" {
		d["credentialHeader"] = ev.Credential
	}
	return d
}

// UpdateNetwork changes a live sandbox's network policy. Credentials given without value or
// secret keep the value they had (responses never show values, so a client can send back what
// it read). The new policy is recorded, then in force, before it returns.
func (m *Manager) UpdateNetwork(ctx context.Context, id string, n sandbox.Network) (api.Sandbox, error) {
	b, err := m.live(ctx, id, "change the network policy of")
	if err != nil {
		return api.Sandbox{}, err
	}
	sb, err := b.begin(ctx, "change the network policy of", false)
	if err != nil {
		return api.Sandbox{}, err
	}
	defer b.done()
	nw, ok := sb.(driver.Networker)
	if !ok {
		return api.Sandbox{}, errdefs.Unavailable("network", "the %s level cannot change a sandbox's network policy live", b.level())
	}
	spec := b.specNow()
	for i, c := range n.Credentials {
		if c.Value == "" && c.Secret == "" {
			for _, old := range spec.Network.Credentials {
				if old.Host == c.Host && old.Header == c.Header {
					n.Credentials[i] = old
				}
			}
		}
	}
	spec.Network = n
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		return api.Sandbox{}, err
	}
	if !tenant.IsAdmin(ctx) {
		if err := m.cfg.Grants.CheckCredentials(b.owner(), spec.Network.Credentials); err != nil {
			return api.Sandbox{}, err
		}
	}
	if err := nw.UpdateNetwork(ctx, spec.Network); err != nil {
		return api.Sandbox{}, err
	}
	if err := m.store.SetSpec(context.WithoutCancel(ctx), id, spec); err != nil {
		return api.Sandbox{}, err
	}
	v := b.setSpec(spec)
	e := api.Event{ID: sandbox.NewOrderedID("evt_"), Type: api.EventNetworkPolicy, Time: time.Now().UTC(), SandboxID: id,
		Message: "network policy changed to " + spec.Network.EgressPolicy,
		Data:    map[string]any{"egressPolicy": spec.Network.EgressPolicy, "allowedDomains": spec.Network.AllowedDomains}}
	m.recordEvent(b, b.owner(), e)
	return v, nil
}

// redact removes credential values from a sandbox as the API shows it.
func redact(v api.Sandbox) api.Sandbox {
	if len(v.Spec.Network.Credentials) == 0 {
		return v
	}
	cs := slices.Clone(v.Spec.Network.Credentials)
	for i := range cs {
		cs[i].Value = ""
	}
	v.Spec.Network.Credentials = cs
	return v
}

// execSpan is when an exec ran; end is zero while it runs.
type execSpan struct {
	id         string
	start, end time.Time
}

// maxExecSpans bounds the exec history a sandbox keeps for attributing network events.
const maxExecSpans = 256

func (b *box) execStarted(id string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.execs) >= maxExecSpans {
		// Drop the oldest finished one; running ones stay.
		if i := slices.IndexFunc(b.execs, func(s execSpan) bool { return !s.end.IsZero() }); i >= 0 {
			b.execs = slices.Delete(b.execs, i, i+1)
		}
	}
	b.execs = append(b.execs, execSpan{id: id, start: at})
}

// execsStartedBetween returns the execs that started in [from, to).
func (b *box) execsStartedBetween(from, to time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for _, s := range b.execs {
		if !s.start.Before(from) && s.start.Before(to) {
			ids = append(ids, s.id)
		}
	}
	return ids
}

func (b *box) execEnded(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.execs {
		if b.execs[i].id == id {
			b.execs[i].end = time.Now()
		}
	}
}

// execsAt returns the IDs of the execs that were running at t.
func (b *box) execsAt(t time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for _, s := range b.execs {
		if !t.Before(s.start) && (s.end.IsZero() || !t.After(s.end)) {
			ids = append(ids, s.id)
		}
	}
	return ids
}
