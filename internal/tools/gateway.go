package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// Config is the operator's part of the gateway (config tools:); the zero value offers the
// built-in tools in a default workspace and bounds what tenants define by DefaultLimits.
type Config struct {
	// Tools are the operator's tools, each granted to the tenants it names ("*" for all). They
	// may use every backend, the daemon's own egress included.
	Tools []ConfigTool
	// Servers are the operator's upstream MCP servers: a command run in each tenant's sandbox,
	// or a URL the daemon dials.
	Servers []ConfigServer
	// Policies are the operator's policies; Tenant "*" binds every tenant.
	Policies []api.ToolPolicy
	// Workspace is where the built-in tools run when a call names no sandbox (default: a
	// sandbox of DefaultWorkspace's spec per caller).
	Workspace *api.ToolSandbox
	// Builtins changes built-in tools by name: off, their own sandbox, a rate limit.
	Builtins map[string]BuiltinConfig
	Limits   Limits
	// Metrics counts and times calls; nil counts nothing.
	Metrics *metrics.Metrics
}

// ConfigTool is one of the operator's tools and the tenants that may call it.
type ConfigTool struct {
	api.ToolDefinition
	Tenants []string
}

// ConfigServer is one of the operator's upstream MCP servers and the tenants that may use it;
// Headers are sent to a URL server with every request (its credentials: never shown).
type ConfigServer struct {
	api.ToolServer
	Headers map[string]string
	Tenants []string
}

// BuiltinConfig changes one built-in tool.
type BuiltinConfig struct {
	Disabled  bool
	Sandbox   *api.ToolSandbox
	RateLimit string
}

// Limits bound what each tenant defines and what a call returns.
type Limits struct {
	MaxToolsPerTenant, MaxServersPerTenant, MaxPoliciesPerTenant int
	// MaxSchemaBytes caps a tool's input schema as JSON (413 beyond).
	MaxSchemaBytes int
	// MaxResultBytes caps the text of a result (the rest is cut, and the result says so) and
	// what read_file and http tools read.
	MaxResultBytes int
	// MaxBuckets bounds the rate limiter's buckets before the refilled ones are dropped.
	MaxBuckets int
}

// DefaultLimits are the limits a zero field takes.
var DefaultLimits = Limits{MaxToolsPerTenant: 64, MaxServersPerTenant: 8, MaxPoliciesPerTenant: 64,
	MaxSchemaBytes: 64 << 10, MaxResultBytes: 1 << 20, MaxBuckets: 100_000}

// DefaultWorkspace is the sandbox the built-in tools run in when the operator sets none: one per
// caller, without network, ended after 10 idle minutes.
var DefaultWorkspace = api.ToolSandbox{Reuse: api.ReuseCaller, Spec: &api.Spec{
	Resources: api.Resources{MemoryMB: 512, DiskMB: 1024},
	Network:   api.Network{EgressPolicy: api.EgressNone},
	Timeout:   api.Timeout{IdleTimeoutSeconds: 600},
}}

// defaultTimeout bounds a call whose tool sets none.
const defaultTimeout = 60 * time.Second

// Gateway is the tool gateway. It is safe for concurrent use.
type Gateway struct {
	cfg   Config
	m     *manager.Manager
	store *store.Store
	log   *slog.Logger
	mx    *metrics.Metrics

	// fixed are the built-in and operator tools by name, fixedServers the operator's servers,
	// fixedPolicies the operator's policies: all from the configuration, never changed.
	fixed         map[string]*tool
	fixedServers  map[string]*server
	fixedPolicies []*policy

	mu      sync.RWMutex // guards tenants
	tenants map[string]*tenantSet

	rates    *limiter
	sessions *sessions
	ups      *upstreams
	clients  *httpClients
}

// tenantSet is what one tenant defined through the API.
type tenantSet struct {
	tools    map[string]*tool
	servers  map[string]*server
	policies map[string]*policy
	// ordered are the operator's policies and then policies by name (policiesOf), remade at
	// every change of policies; nil when the tenant has none.
	ordered []*policy
}

// New checks the operator's configuration, loads what tenants defined and returns the gateway.
func New(ctx context.Context, cfg Config, m *manager.Manager, st *store.Store, log *slog.Logger) (*Gateway, error) {
	cfg.Limits = withDefaults(cfg.Limits)
	if cfg.Workspace == nil {
		w := DefaultWorkspace
		cfg.Workspace = &w
	}
	g := &Gateway{cfg: cfg, m: m, store: st, log: log, mx: cfg.Metrics,
		fixed: map[string]*tool{}, fixedServers: map[string]*server{}, tenants: map[string]*tenantSet{},
		rates: newLimiter(cfg.Limits.MaxBuckets), sessions: newSessions(), clients: newHTTPClients()}
	g.ups = newUpstreams(g)
	if err := checkSandbox("tools.workspace", *cfg.Workspace, false); err != nil {
		return nil, err
	}
	for name, b := range cfg.Builtins {
		if _, ok := builtinSchemas[name]; !ok {
			return nil, fmt.Errorf("config: tools.builtins: %q is not a built-in tool (%s)", name, builtinNames())
		}
		if b.Sandbox != nil {
			if err := checkSandbox("tools.builtins."+name+".sandbox", *b.Sandbox, false); err != nil {
				return nil, err
			}
		}
	}
	for name := range builtinSchemas {
		t, err := g.builtin(name)
		if err != nil {
			return nil, fmt.Errorf("config: tools.builtins.%s: %w", name, err)
		}
		if t != nil {
			g.fixed[name] = t
		}
	}
	for i, ct := range cfg.Tools {
		if len(ct.Tenants) == 0 {
			return nil, fmt.Errorf("config: tools.tools[%d] (%s): name the tenants that may call it (tenants: [\"*\"] for all)", i, ct.Name)
		}
		t, err := g.compileTool(ct.ToolDefinition, api.ToolSourceConfig)
		if err != nil {
			return nil, fmt.Errorf("config: tools.tools[%d]: %w", i, err)
		}
		if _, dup := g.fixed[t.name]; dup {
			return nil, fmt.Errorf("config: tools.tools[%d]: the name %q is taken (a built-in tool, or another of the list)", i, t.name)
		}
		t.tenants = ct.Tenants
		g.fixed[t.name] = t
	}
	for i, cs := range cfg.Servers {
		if len(cs.Tenants) == 0 {
			return nil, fmt.Errorf("config: tools.servers[%d] (%s): name the tenants that may use it (tenants: [\"*\"] for all)", i, cs.Name)
		}
		s, err := compileServer(cs.ToolServer, api.ToolSourceConfig)
		if err != nil {
			return nil, fmt.Errorf("config: tools.servers[%d]: %w", i, err)
		}
		if _, dup := g.fixedServers[s.name]; dup {
			return nil, fmt.Errorf("config: tools.servers[%d]: a second server named %q", i, s.name)
		}
		s.headers, s.tenants = cs.Headers, cs.Tenants
		g.fixedServers[s.name] = s
	}
	for i, p := range cfg.Policies {
		if p.Tenant == "" {
			return nil, fmt.Errorf("config: tools.policies[%d] (%s): name the tenant it binds (\"*\" for every tenant)", i, p.Name)
		}
		p.Source = api.PolicySourceConfig
		cp, err := compilePolicy(p)
		if err != nil {
			return nil, fmt.Errorf("config: tools.policies[%d]: %w", i, err)
		}
		g.fixedPolicies = append(g.fixedPolicies, cp)
	}
	if err := g.load(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

func withDefaults(l Limits) Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int }{
		{&l.MaxToolsPerTenant, &d.MaxToolsPerTenant}, {&l.MaxServersPerTenant, &d.MaxServersPerTenant},
		{&l.MaxPoliciesPerTenant, &d.MaxPoliciesPerTenant}, {&l.MaxSchemaBytes, &d.MaxSchemaBytes},
		{&l.MaxResultBytes, &d.MaxResultBytes}, {&l.MaxBuckets, &d.MaxBuckets},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return l
}

// Close stops the upstream MCP servers the gateway runs.
func (g *Gateway) Close() {
	g.ups.closeAll()
	g.clients.close()
}

// callerOf is who ctx (an API request's) and req say the caller is.
func callerOf(ctx context.Context, agentID, sandboxID string) Caller {
	return Caller{Tenant: tenant.From(ctx), KeyID: tenant.KeyFrom(ctx), Admin: tenant.IsAdmin(ctx), AgentID: agentID, SandboxID: sandboxID}
}

// granted reports whether tenant may see a tool or server the operator granted to tenants.
func granted(tenants []string, ten string) bool {
	return slices.Contains(tenants, "*") || slices.Contains(tenants, ten)
}

// policiesOf are the policies that may bind tenant: the operator's, then the tenant's own by
// name. The slice is shared: callers do not change it.
func (g *Gateway) policiesOf(ten string) []*policy {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if ts := g.tenants[ten]; ts != nil && ts.ordered != nil {
		return ts.ordered
	}
	return g.fixedPolicies
}

// orderPolicies remakes ts.ordered after a change of ts.policies. Under g.mu.
func (g *Gateway) orderPolicies(ts *tenantSet) {
	if len(ts.policies) == 0 {
		ts.ordered = nil
		return
	}
	names := make([]string, 0, len(ts.policies))
	for n := range ts.policies {
		names = append(names, n)
	}
	sort.Strings(names)
	ps := slices.Clone(g.fixedPolicies)
	for _, n := range names {
		ps = append(ps, ts.policies[n])
	}
	ts.ordered = ps
}

// lookup finds the tool name as the caller's tenant sees it: a built-in or operator tool granted
// to it, its own, or a tool of an upstream server it may use (which starts the server). Nothing
// found is ok false.
func (g *Gateway) lookup(ctx context.Context, c Caller, name string) (*tool, bool, error) {
	if t, ok := g.fixed[name]; ok && (t.tenants == nil || granted(t.tenants, c.Tenant)) {
		return t, true, nil
	}
	g.mu.RLock()
	var own *tool
	if ts := g.tenants[c.Tenant]; ts != nil {
		own = ts.tools[name]
	}
	g.mu.RUnlock()
	if own != nil {
		if t, shadowed := g.fixed[name]; !shadowed || t.tenants != nil && !granted(t.tenants, c.Tenant) {
			return own, true, nil
		}
	}
	srv, toolName, ok := splitServerTool(name)
	if !ok {
		return nil, false, nil
	}
	s := g.serverFor(c.Tenant, srv)
	if s == nil {
		return nil, false, nil
	}
	t, err := g.ups.tool(ctx, c, s, toolName)
	if err != nil || t == nil {
		return nil, false, err
	}
	return t, true, nil
}

// List returns the tools the caller in ctx may call (its policies applied), by name. Upstream
// servers it may use are started to list theirs; one that fails is left out (and logged).
func (g *Gateway) List(ctx context.Context, agentID string) ([]api.Tool, error) {
	c := callerOf(ctx, agentID, "")
	ps := g.policiesOf(c.Tenant)
	var out []api.Tool
	seen := map[string]bool{}
	add := func(t *tool) {
		if seen[t.name] {
			return
		}
		seen[t.name] = true
		cc := c
		if t.sandbox != nil && t.sandbox.SandboxID != "" {
			cc.SandboxID = t.sandbox.SandboxID
		}
		if ok, _ := decide(ps, cc, t.name); ok {
			out = append(out, t.view())
		}
	}
	for _, t := range sortedTools(g.fixed) {
		if t.tenants == nil || granted(t.tenants, c.Tenant) {
			add(t)
		}
	}
	g.mu.RLock()
	var own []*tool
	if ts := g.tenants[c.Tenant]; ts != nil {
		own = sortedTools(ts.tools)
	}
	g.mu.RUnlock()
	for _, t := range own {
		add(t)
	}
	for _, s := range g.serversOf(c.Tenant) {
		ts, err := g.ups.tools(ctx, c, s)
		if err != nil {
			g.log.Warn("an upstream MCP server's tools are not listed", "tenant", c.Tenant, "server", s.name, "err", err)
			continue
		}
		for _, t := range ts {
			add(t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns one tool the caller may call (404 otherwise, whether it does not exist or the
// caller may not call it).
func (g *Gateway) Get(ctx context.Context, name string) (api.Tool, error) {
	c := callerOf(ctx, "", "")
	t, ok, err := g.lookup(ctx, c, name)
	if err != nil {
		return api.Tool{}, err
	}
	if ok {
		cc := c
		if t.sandbox != nil && t.sandbox.SandboxID != "" {
			cc.SandboxID = t.sandbox.SandboxID
		}
		if allowed, _ := decide(g.policiesOf(c.Tenant), cc, name); allowed {
			return t.view(), nil
		}
	}
	return api.Tool{}, fmt.Errorf("tool %q: no tool of that name that this key may call (GET /api/v1/tools lists them): %w", name, errdefs.ErrNotFound)
}

func sortedTools(m map[string]*tool) []*tool {
	out := make([]*tool, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Call runs one call of tool name for the caller in ctx: allowed by its policies, its arguments
// valid, within its rate limits; recorded as a tool.call event whatever happens. A refusal is
// an error (403 tool_not_allowed, 400 invalid_arguments, 429 rate_limited); a tool that ran and
// failed is a result with IsError.
func (g *Gateway) Call(ctx context.Context, name string, req api.ToolCallRequest) (api.ToolResult, error) {
	start := time.Now()
	c := callerOf(ctx, req.AgentID, req.SandboxID)
	c.Remote = remoteOf(ctx)
	rc := &record{id: sandbox.NewOrderedID("evt_"), tool: name, caller: c, args: req.Arguments, start: start, sandboxID: req.SandboxID}
	res, err := g.call(ctx, rc, name, req)
	rc.err = err
	g.finish(ctx, rc, &res)
	if err != nil {
		return api.ToolResult{}, err
	}
	return res, nil
}

// call is Call's steps; rc collects what the event says.
func (g *Gateway) call(ctx context.Context, rc *record, name string, req api.ToolCallRequest) (api.ToolResult, error) {
	c := rc.caller
	t, ok, err := g.lookup(ctx, c, name)
	if err != nil {
		rc.rule = "lookup"
		return api.ToolResult{}, err
	}
	if !ok {
		rc.rule = "not_granted"
		return api.ToolResult{}, &errdefs.FieldError{Kind: errdefs.ErrPermissionDenied, Code: api.CodeToolNotAllowed, Rule: rc.rule,
			Message: fmt.Sprintf("tool %q is not allowed: no tool of that name is granted to tenant %s (GET /api/v1/tools lists those this key may call)", name, c.Tenant)}
	}
	rc.t = t
	if t.sandbox != nil && t.sandbox.SandboxID != "" && c.SandboxID == "" {
		c.SandboxID = t.sandbox.SandboxID
		rc.caller = c
	}
	allowed, rule := decide(g.policiesOf(c.Tenant), c, name)
	rc.rule = rule
	if !allowed {
		return api.ToolResult{}, &errdefs.FieldError{Kind: errdefs.ErrPermissionDenied, Code: api.CodeToolNotAllowed, Rule: rule,
			Message: fmt.Sprintf("tool %q is not allowed for this caller (%s)", name, rule)}
	}
	if err := t.schema.Validate(req.Arguments); err != nil {
		if fe, ok := errors.AsType[*errdefs.FieldError](err); ok {
			rc.rule, rc.field = fe.Rule, fe.Field
		}
		return api.ToolResult{}, err
	}
	if ok, rule, wait := g.rates.take(g.limitsOf(t, c), time.Now()); !ok {
		rc.rule = rule
		return api.ToolResult{}, &errdefs.FieldError{Kind: errdefs.ErrQuota, Code: api.CodeRateLimited, Rule: rule, RetryAfter: wait,
			Message: fmt.Sprintf("tool %q: rate limit reached (%s); retry after %s", name, rule, wait.Round(time.Millisecond))}
	}
	rc.ran = true
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.run(ctx, g, &invocation{caller: c, tool: t, args: req.Arguments, sandboxID: req.SandboxID, rec: rc})
	if err != nil {
		return api.ToolResult{}, err
	}
	return g.capResult(res), nil
}

// limitsOf are the buckets a call of t by c takes a token from: the tool's own (per caller) and
// the policies'.
func (g *Gateway) limitsOf(t *tool, c Caller) []limit {
	ls := limits(g.policiesOf(c.Tenant), c, t.name)
	if t.rate != nil {
		ls = append(ls, limit{key: "t\x00" + c.Tenant + "\x00" + t.name + "\x00" + c.key(), rate: *t.rate,
			rule: fmt.Sprintf("tool %s: rateLimit %s", t.name, t.rateText)})
	}
	return ls
}

// capResult cuts a result's text to MaxResultBytes, saying so.
func (g *Gateway) capResult(res api.ToolResult) api.ToolResult {
	limit := g.cfg.Limits.MaxResultBytes
	for i, ct := range res.Content {
		if len(ct.Text) > limit {
			res.Content[i].Text = ct.Text[:limit] + fmt.Sprintf("\n[airlock: %d more bytes cut; a result holds at most %d]", len(ct.Text)-limit, limit)
		}
		if len(ct.Data) > limit*4/3+4 {
			res.Content[i] = api.ToolContent{Type: api.ContentText, Text: fmt.Sprintf("[airlock: a %s of %d bytes (base64) was cut; a result holds at most %d]", ct.Type, len(ct.Data), limit)}
		}
	}
	if res.Content == nil {
		res.Content = []api.ToolContent{}
	}
	return res
}

// remoteKey carries the client's address in a call's context, for its event.
type remoteKey struct{}

// WithRemote returns ctx carrying the client's address, recorded in tool.call events.
func WithRemote(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, remoteKey{}, addr)
}

func remoteOf(ctx context.Context) string {
	s, _ := ctx.Value(remoteKey{}).(string)
	return s
}
