package manager

import (
	"context"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// Request is one API call, for the audit log: who did what, from where, and how it ended.
type Request struct {
	Method, Path string
	SandboxID    string // the sandbox the path names, if any
	KeyID        string // the API key used ("" when none was accepted)
	Remote       string // the client's address
	UserAgent    string
	Status       int
	Code         string // the error code of a refusal
	Duration     time.Duration
	// ClosedBy, when set, is why the connection was closed before the answer reached the
	// client (api.EndedByDaemonShutdown): Status is then the answer that was not delivered.
	ClosedBy string
}

// RecordRequest records an API call (a change, or a refusal) of the tenant in ctx as an
// api.request event: of its sandbox when the path names one the tenant owns, else of the tenant.
// Every string the client chose is capped first (see capRequest).
func (m *Manager) RecordRequest(ctx context.Context, r Request) {
	r = capRequest(r)
	ten := tenant.From(ctx)
	e := api.Event{ID: sandbox.NewOrderedID("evt_"), Type: api.EventAPIRequest, Time: time.Now().UTC(),
		Message: r.Method + " " + r.Path + " → " + strconv.Itoa(r.Status),
		Data: map[string]any{"method": r.Method, "path": r.Path, "status": r.Status, "remote": r.Remote,
			"durationMs": r.Duration.Milliseconds()}}
	if r.KeyID != "" {
		e.Data["keyId"] = r.KeyID
	}
	if r.UserAgent != "" {
		e.Data["userAgent"] = r.UserAgent
	}
	if r.Code != "" {
		e.Data["code"] = r.Code
	}
	if r.ClosedBy != "" {
		e.Message = r.Method + " " + r.Path + " → no answer: connection closed by " + r.ClosedBy
		e.Data["closedBy"], e.Data["delivered"] = r.ClosedBy, false
	}
	if r.SandboxID != "" && ten != "" {
		m.mu.Lock()
		b, ok := m.boxes[r.SandboxID]
		m.mu.Unlock()
		if ok && b.owner() == ten {
			m.recordEvent(b, ten, e)
			return
		}
		// Without the request's cancellation: a call the daemon's shutdown cut off is recorded
		// after its connection (and so its context) is gone, and after its sandbox ended.
		if _, err := m.store.Sandbox(context.WithoutCancel(ctx), ten, r.SandboxID); err == nil {
			e.SandboxID = r.SandboxID // an ended sandbox of the tenant
		}
	}
	m.events.Add(store.TenantEvent{Tenant: ten, Event: e})
}

// Caps of the strings of a recorded Request, in bytes: a request is recorded whatever it
// carried, so what it carried must not decide how much is stored. They are far above what the
// SDKs and the CLI send (a sandbox ID is 30 bytes).
const (
	maxMethod    = 16
	maxPath      = 1 << 10
	maxSandboxID = 128
	maxRemote    = 64
	maxUserAgent = 256
)

// capRequest caps r's strings, so that an API call's record is small whatever the client sent
// (a 900 KB User-Agent made one record of 900 KB). The one place where a Request's size is
// bounded: RecordRequest calls it before anything is built from r.
func capRequest(r Request) Request {
	r.Method = capString(r.Method, maxMethod)
	r.Path = capString(r.Path, maxPath)
	r.SandboxID = capString(r.SandboxID, maxSandboxID)
	r.Remote = capString(r.Remote, maxRemote)
	r.UserAgent = capString(r.UserAgent, maxUserAgent)
	return r
}

// capString keeps at most n bytes of s (cut at a UTF-8 boundary) and says how much was cut, e.g.
// "Mozilla/5.0 (X11; …[+9120 bytes]", so that a reader of the record knows it is not whole.
func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…[+" + strconv.Itoa(len(s)-cut) + " bytes]"
}

// Events returns one page of the events f selects among the tenant's in ctx: of one sandbox
// when f.SandboxID is set (another tenant's is not found), else of all its sandboxes and its API
// calls. Events just produced are written first, so a caller reads its own.
func (m *Manager) Events(ctx context.Context, f store.EventFilter) (api.EventPage, error) {
	if err := m.eventScope(ctx, &f); err != nil {
		return api.EventPage{}, err
	}
	m.settle(ctx, f.SandboxID)
	evs, err := m.store.Events(ctx, f)
	if err != nil {
		return api.EventPage{}, err
	}
	p := api.EventPage{Events: evs, Next: f.After}
	if n := len(evs); n > 0 {
		p.Next = evs[n-1].Seq
	}
	return p, nil
}

// CheckEvents refuses what Events and FollowEvents would refuse for f (an unknown sandbox, a
// bad time range) without reading any event: a stream answers its refusal before it starts.
func (m *Manager) CheckEvents(ctx context.Context, f store.EventFilter) error {
	return m.eventScope(ctx, &f)
}

func (m *Manager) eventScope(ctx context.Context, f *store.EventFilter) error {
	f.Tenant = tenant.From(ctx)
	if f.SandboxID != "" {
		if _, err := m.Get(ctx, f.SandboxID); err != nil {
			return err
		}
	}
	if f.Since != 0 && f.Until != 0 && f.Until <= f.Since {
		return errdefs.Invalid("until", "must be after since")
	}
	return nil
}

// FollowEvents calls fn with every event f selects from f.After on, oldest first, as they are
// written, until ctx ends or fn fails. Following one sandbox ends once it is terminated and its
// last events were delivered.
func (m *Manager) FollowEvents(ctx context.Context, f store.EventFilter, fn func(api.Event) error) error {
	if err := m.eventScope(ctx, &f); err != nil {
		return err
	}
	m.events.Flush()
	ending := false
	for {
		changed := m.events.Changed()
		evs, err := m.store.Events(ctx, f)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
			f.After = e.Seq
		}
		if len(evs) == f.Limit && f.Limit > 0 {
			continue
		}
		if ending {
			return nil
		}
		if f.SandboxID != "" {
			if sb, err := m.Get(ctx, f.SandboxID); err == nil && sb.Status == api.StatusTerminated {
				// Its teardown's last events (network, status) may still be queued: one more round.
				m.events.Flush()
				ending = true
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(time.Second): // a sandbox ending writes its terminated event: seen within a second anyway
		}
	}
}

// settle writes the events produced so far, after the file scans of sandbox id's execs that
// have answered (when id is not ""), so that a reader sees what it caused.
func (m *Manager) settle(ctx context.Context, id string) {
	if id != "" {
		m.mu.Lock()
		b, ok := m.boxes[id]
		m.mu.Unlock()
		if ok {
			b.waitScans(ctx, 5*time.Second)
		}
	}
	m.events.Flush()
}

// maxReplayEvents bounds a replay; a longer history is cut, and the replay says so.
const maxReplayEvents = 100_000

// Replay returns sandbox id's whole recorded history ordered for display: every event with its
// offset from the sandbox's creation (its message is the one-line summary), and each exec's
// record (command, output, result) on its exec.exited entry.
func (m *Manager) Replay(ctx context.Context, id string) (api.Replay, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return api.Replay{}, err
	}
	m.settle(ctx, id)
	execs, err := m.store.Execs(ctx, id, 0)
	if err != nil {
		return api.Replay{}, err
	}
	byID := make(map[string]api.Execution, len(execs))
	for _, x := range execs {
		byID[x.ID] = x
	}
	r := api.Replay{Sandbox: sb, Entries: []api.ReplayEntry{}}
	f := store.EventFilter{Tenant: tenant.From(ctx), SandboxID: id, Limit: 10000}
	for len(r.Entries) < maxReplayEvents {
		evs, err := m.store.Events(ctx, f)
		if err != nil {
			return api.Replay{}, err
		}
		for _, e := range evs {
			en := api.ReplayEntry{Seq: e.Seq, Time: e.Time, OffsetMs: e.Time.Sub(sb.CreatedAt).Milliseconds(), Type: e.Type,
				ExecutionID: e.ExecutionID, Event: e}
			if x, ok := byID[e.ExecutionID]; ok && e.Type == api.EventExecExited {
				en.Exec = &x
			}
			r.Entries = append(r.Entries, en)
		}
		if len(evs) < f.Limit {
			break
		}
		f.After = evs[len(evs)-1].Seq
	}
	r.Truncated = len(r.Entries) >= maxReplayEvents
	// The log's order is the order events were written; display wants the order they happened
	// (a connection is reported when it ends, after what came later).
	sort.SliceStable(r.Entries, func(i, j int) bool { return r.Entries[i].Time.Before(r.Entries[j].Time) })
	return r, nil
}
