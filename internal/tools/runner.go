package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
)

// Where a call runs: always a sandbox of the caller's tenant, under its grants and quotas. A
// tool names one of the tenant's sandboxes, or a spec (a pool's) to make one from; a sandbox
// made for tools is kept per caller or per tool (its idle timeout ends it when unused) or made
// for one call. A kept one carries metadata airlock.tools.session (a digest of what it is kept
// for), by which it is found again after a daemon restart.

// MetaSession and MetaTool are the metadata of sandboxes the gateway made.
const (
	MetaSession = "airlock.tools.session"
	MetaTool    = "airlock.tools.for"
)

// sessions finds or makes the sandboxes kept for tools, one at a time per key.
type sessions struct {
	mu   sync.Mutex // guards byID
	byID map[string]*session
}

// session is one kept sandbox: id is "" until made. mu is held while it is found or made, so
// that concurrent first calls make one sandbox.
type session struct {
	mu sync.Mutex
	id string
}

func newSessions() *sessions { return &sessions{byID: map[string]*session{}} }

// maxSessions bounds the sessions remembered; past it the idle ones are forgotten (harmless: a
// kept sandbox is found again by its metadata).
const maxSessions = 4096

func (s *sessions) get(key string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.byID[key]; ss != nil {
		return ss
	}
	if len(s.byID) >= maxSessions {
		for k, ss := range s.byID {
			if ss.mu.TryLock() {
				delete(s.byID, k)
				ss.mu.Unlock()
			}
		}
	}
	ss := &session{}
	s.byID[key] = ss
	return ss
}

// place is where one call runs.
type place struct {
	id      string
	release func() // after the call: ends a sandbox made for one call
}

// sandboxFor resolves where inv runs, given ts (the tool's, or the workspace when nil) and
// scope (what a kept sandbox is for: a tool, a server, "workspace").
func (g *Gateway) sandboxFor(ctx context.Context, inv *invocation, ts *api.ToolSandbox, scope string) (place, error) {
	if inv.sandboxID != "" {
		id, err := g.resolveSandbox(ctx, inv.sandboxID)
		return place{id: id, release: func() {}}, err
	}
	if ts == nil {
		ts = g.cfg.Workspace
	}
	return g.placeFor(ctx, inv.caller, *ts, scope)
}

// placeFor is sandboxFor without a call's own sandbox.
func (g *Gateway) placeFor(ctx context.Context, c Caller, ts api.ToolSandbox, scope string) (place, error) {
	if ts.SandboxID != "" {
		id, err := g.resolveSandbox(ctx, ts.SandboxID)
		return place{id: id, release: func() {}}, err
	}
	spec, err := g.specOf(ts)
	if err != nil {
		return place{}, err
	}
	if spec.Metadata == nil {
		spec.Metadata = map[string]string{}
	} else {
		spec.Metadata = maps.Clone(spec.Metadata)
	}
	spec.Metadata[MetaTool] = scope
	// A kept sandbox is for one spec: a changed definition gets a new one (the old one idles out).
	shape := specDigest(spec)
	switch ts.Reuse {
	case api.ReuseCall:
		sb, err := g.m.Create(ctx, spec)
		if err != nil {
			return place{}, sandboxErr(scope, err)
		}
		end := context.WithoutCancel(ctx)
		return place{id: sb.ID, release: func() {
			go func() { _, _ = g.m.Terminate(end, sb.ID) }() // one that failed ends by its timeout
		}}, nil
	case api.ReuseTool:
		return g.kept(ctx, spec, c.Tenant+"\x00"+scope+"\x00"+shape+"\x00tool")
	default:
		return g.kept(ctx, spec, c.Tenant+"\x00"+scope+"\x00"+shape+"\x00caller\x00"+c.key())
	}
}

// specDigest names a spec's content.
func specDigest(s api.Spec) string {
	b, _ := json.Marshal(s) // a spec always encodes
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// sandboxErr explains that a sandbox for scope could not be made.
func sandboxErr(scope string, err error) error {
	return fmt.Errorf("a sandbox for %s: %w", scope, err)
}

// specOf is the spec a tool sandbox is made from: its own, or its pool's (so that a create of it
// claims one of the pool's).
func (g *Gateway) specOf(ts api.ToolSandbox) (api.Spec, error) {
	if ts.Spec != nil {
		return cloneSpec(*ts.Spec), nil
	}
	if ts.Pool != "" {
		p, err := g.m.Pool(ts.Pool)
		if err != nil {
			return api.Spec{}, err
		}
		return cloneSpec(p.Spec), nil
	}
	return cloneSpec(*DefaultWorkspace.Spec), nil
}

func cloneSpec(s api.Spec) api.Spec {
	b, _ := json.Marshal(s) // a spec always encodes
	var c api.Spec
	_ = json.Unmarshal(b, &c)
	c.Binds, c.RootDir = nil, ""
	return c
}

// kept finds or makes the sandbox kept for key, of spec.
func (g *Gateway) kept(ctx context.Context, spec api.Spec, key string) (place, error) {
	h := sha256.Sum256([]byte(key))
	tag := hex.EncodeToString(h[:12])
	ss := g.sessions.get(tag)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	noop := func() {}
	if ss.id != "" {
		if g.isLive(ctx, ss.id) {
			return place{id: ss.id, release: noop}, nil
		}
		ss.id = ""
	}
	// A daemon restart forgot it: the sandbox carries its tag.
	if list, err := g.m.List(ctx, manager.ListOptions{Status: []string{api.StatusReady, api.StatusRunning, api.StatusProvisioning}, Metadata: map[string]string{MetaSession: tag}}); err == nil && len(list) > 0 {
		ss.id = list[0].ID
		return place{id: ss.id, release: noop}, nil
	}
	spec.Metadata[MetaSession] = tag
	if spec.Name == "" {
		spec.Name = "tools-" + strings.ReplaceAll(spec.Metadata[MetaTool], "\x00", "-")
	}
	sb, err := g.m.Create(ctx, spec)
	if err != nil {
		return place{}, sandboxErr(spec.Metadata[MetaTool], err)
	}
	ss.id = sb.ID
	return place{id: sb.ID, release: noop}, nil
}

// isLive reports whether sandbox id of the tenant in ctx takes execs (ready or running).
func (g *Gateway) isLive(ctx context.Context, id string) bool {
	sb, err := g.m.Get(ctx, id)
	return err == nil && (sb.Status == api.StatusReady || sb.Status == api.StatusRunning || sb.Status == api.StatusProvisioning)
}

// resolveSandbox resolves a sandbox of the tenant in ctx named by ID or by name (the newest live
// one of that name).
func (g *Gateway) resolveSandbox(ctx context.Context, ref string) (string, error) {
	if strings.HasPrefix(ref, "sbx_") {
		if _, err := g.m.Get(ctx, ref); err != nil {
			return "", err
		}
		return ref, nil
	}
	list, err := g.m.List(ctx, manager.ListOptions{Status: []string{api.StatusReady, api.StatusRunning, api.StatusPaused, api.StatusProvisioning}})
	if err != nil {
		return "", err
	}
	for _, sb := range list { // newest first
		if sb.Name == ref {
			return sb.ID, nil
		}
	}
	return "", fmt.Errorf("no live sandbox named %q: %w", ref, errdefs.ErrNotFound)
}
