package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// What tenants define through the API (tools, upstream servers, policies): stored, kept in memory
// by tenant, each kind capped per tenant (config tools.limits).

// load reads what tenants defined. One that no longer compiles (a limit changed) is skipped and
// logged, not fatal.
func (g *Gateway) load(ctx context.Context) error {
	objs, err := g.store.ToolObjects(ctx)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := g.loadOne(o); err != nil {
			g.log.Warn("a stored tool definition is skipped", "tenant", o.Tenant, "kind", o.Kind, "name", o.Name, "err", err)
		}
	}
	return nil
}

func (g *Gateway) loadOne(o store.ToolObject) error {
	ts := g.setOf(o.Tenant)
	switch o.Kind {
	case store.ToolKindTool:
		var d api.ToolDefinition
		if err := json.Unmarshal(o.Body, &d); err != nil {
			return err
		}
		t, err := g.compileTool(d, api.ToolSourceAPI)
		if err != nil {
			return err
		}
		t.updatedAt, t.createdBy = o.UpdatedAt, o.CreatedBy
		ts.tools[o.Name] = t
	case store.ToolKindServer:
		var d api.ToolServer
		if err := json.Unmarshal(o.Body, &d); err != nil {
			return err
		}
		s, err := compileServer(d, api.ToolSourceAPI)
		if err != nil {
			return err
		}
		s.updatedAt = o.UpdatedAt
		ts.servers[o.Name] = s
	case store.ToolKindPolicy:
		var p api.ToolPolicy
		if err := json.Unmarshal(o.Body, &p); err != nil {
			return err
		}
		p.Source, p.CreatedBy, p.Tenant = o.Source, o.CreatedBy, o.Tenant
		at := o.UpdatedAt
		p.UpdatedAt = &at
		cp, err := compilePolicy(p)
		if err != nil {
			return err
		}
		ts.policies[o.Name] = cp
		g.orderPolicies(ts)
	default:
		return fmt.Errorf("unknown kind %q", o.Kind)
	}
	return nil
}

// setOf returns tenant's set, made if new. The caller holds g.mu or is New.
func (g *Gateway) setOf(ten string) *tenantSet {
	ts := g.tenants[ten]
	if ts == nil {
		ts = &tenantSet{tools: map[string]*tool{}, servers: map[string]*server{}, policies: map[string]*policy{}}
		g.tenants[ten] = ts
	}
	return ts
}

// source is which kind of key the caller in ctx holds.
func source(ctx context.Context) string {
	if tenant.IsAdmin(ctx) {
		return api.PolicySourceAdmin
	}
	return api.PolicySourceTenant
}

// checkName refuses a body whose name differs from the path's.
func checkName(path, body string) error {
	if body != "" && body != path {
		return errdefs.Invalid("name", "the body names %q, the path %q", body, path)
	}
	return nil
}

// PutTool makes or replaces the tenant's tool name (the caller's tenant).
func (g *Gateway) PutTool(ctx context.Context, name string, d api.ToolDefinition) (api.Tool, error) {
	if err := checkName(name, d.Name); err != nil {
		return api.Tool{}, err
	}
	d.Name = name
	ten := tenant.From(ctx)
	if f, ok := g.fixed[name]; ok && (f.tenants == nil || granted(f.tenants, ten)) {
		return api.Tool{}, errdefs.New(errdefs.ErrConflict, "tool %q: the name is a %s tool's; choose another", name, f.source)
	}
	t, err := g.compileTool(d, api.ToolSourceAPI)
	if err != nil {
		return api.Tool{}, err
	}
	t.updatedAt, t.createdBy = time.Now().UTC(), tenant.KeyFrom(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.setOf(ten)
	if _, replace := ts.tools[name]; !replace && len(ts.tools) >= g.cfg.Limits.MaxToolsPerTenant {
		return api.Tool{}, quotaErr("tools", g.cfg.Limits.MaxToolsPerTenant, "maxToolsPerTenant")
	}
	if err := g.put(ctx, ten, store.ToolKindTool, name, d, t.createdBy, t.updatedAt); err != nil {
		return api.Tool{}, err
	}
	ts.tools[name] = t
	return t.view(), nil
}

// DeleteTool removes the tenant's tool name and answers it as it was.
func (g *Gateway) DeleteTool(ctx context.Context, name string) (api.Tool, error) {
	ten := tenant.From(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.tenants[ten]
	if ts == nil || ts.tools[name] == nil {
		return api.Tool{}, fmt.Errorf("tool %q: no tool of that name was made through the API by tenant %s: %w", name, ten, errdefs.ErrNotFound)
	}
	if err := g.store.DeleteToolObject(ctx, ten, store.ToolKindTool, name); err != nil {
		return api.Tool{}, err
	}
	t := ts.tools[name]
	delete(ts.tools, name)
	return t.view(), nil
}

func quotaErr(what string, n int, setting string) error {
	return &errdefs.FieldError{Field: "name", Kind: errdefs.ErrQuota,
		Message: fmt.Sprintf("the tenant has %d %s already, the most it may define (config tools.limits.%s)", n, what, setting)}
}

// put stores one object. Under g.mu.
func (g *Gateway) put(ctx context.Context, ten, kind, name string, body any, by string, at time.Time) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return g.store.PutToolObject(ctx, store.ToolObject{Tenant: ten, Kind: kind, Name: name, Body: b, Source: source(ctx), CreatedBy: by, UpdatedAt: at})
}

// Servers returns the upstream MCP servers the tenant in ctx may use, by name.
func (g *Gateway) Servers(ctx context.Context) []api.ToolServerInfo {
	var out []api.ToolServerInfo
	for _, s := range g.serversOf(tenant.From(ctx)) {
		out = append(out, s.view())
	}
	return out
}

// Server returns one.
func (g *Gateway) Server(ctx context.Context, name string) (api.ToolServerInfo, error) {
	s := g.serverFor(tenant.From(ctx), name)
	if s == nil {
		return api.ToolServerInfo{}, fmt.Errorf("tool server %q: %w", name, errdefs.ErrNotFound)
	}
	return s.view(), nil
}

// serversOf are the servers tenant may use: the operator's granted to it, then its own (one
// named as an operator's is hidden by it).
func (g *Gateway) serversOf(ten string) []*server {
	var out []*server
	for _, s := range g.fixedServers {
		if granted(s.tenants, ten) {
			out = append(out, s)
		}
	}
	g.mu.RLock()
	if ts := g.tenants[ten]; ts != nil {
		for n, s := range ts.servers {
			if f := g.fixedServers[n]; f == nil || !granted(f.tenants, ten) {
				out = append(out, s)
			}
		}
	}
	g.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// serverFor is the server name that tenant may use, or nil.
func (g *Gateway) serverFor(ten, name string) *server {
	if s := g.fixedServers[name]; s != nil && granted(s.tenants, ten) {
		return s
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if ts := g.tenants[ten]; ts != nil {
		return ts.servers[name]
	}
	return nil
}

// PutServer makes or replaces the tenant's upstream server name; a running one is stopped (the
// next use starts the new definition).
func (g *Gateway) PutServer(ctx context.Context, name string, d api.ToolServer) (api.ToolServerInfo, error) {
	if err := checkName(name, d.Name); err != nil {
		return api.ToolServerInfo{}, err
	}
	d.Name = name
	ten := tenant.From(ctx)
	if f := g.fixedServers[name]; f != nil && granted(f.tenants, ten) {
		return api.ToolServerInfo{}, errdefs.New(errdefs.ErrConflict, "tool server %q: the name is an operator's server's; choose another", name)
	}
	s, err := compileServer(d, api.ToolSourceAPI)
	if err != nil {
		return api.ToolServerInfo{}, err
	}
	s.updatedAt = time.Now().UTC()
	g.mu.Lock()
	ts := g.setOf(ten)
	old, replace := ts.servers[name]
	if !replace && len(ts.servers) >= g.cfg.Limits.MaxServersPerTenant {
		g.mu.Unlock()
		return api.ToolServerInfo{}, quotaErr("tool servers", g.cfg.Limits.MaxServersPerTenant, "maxServersPerTenant")
	}
	if err := g.put(ctx, ten, store.ToolKindServer, name, d, tenant.KeyFrom(ctx), s.updatedAt); err != nil {
		g.mu.Unlock()
		return api.ToolServerInfo{}, err
	}
	ts.servers[name] = s
	g.mu.Unlock()
	if old != nil {
		g.ups.stop(ten, old)
	}
	return s.view(), nil
}

// DeleteServer removes the tenant's server name, stopping it, and answers it as it was.
func (g *Gateway) DeleteServer(ctx context.Context, name string) (api.ToolServerInfo, error) {
	ten := tenant.From(ctx)
	g.mu.Lock()
	ts := g.tenants[ten]
	if ts == nil || ts.servers[name] == nil {
		g.mu.Unlock()
		return api.ToolServerInfo{}, fmt.Errorf("tool server %q: no server of that name was made through the API by tenant %s: %w", name, ten, errdefs.ErrNotFound)
	}
	if err := g.store.DeleteToolObject(ctx, ten, store.ToolKindServer, name); err != nil {
		g.mu.Unlock()
		return api.ToolServerInfo{}, err
	}
	s := ts.servers[name]
	delete(ts.servers, name)
	g.mu.Unlock()
	g.ups.stop(ten, s)
	return s.view(), nil
}

// Policies: the operator's (config) bind whom they name; an admin key makes any tenant's; a
// tenant key makes its own tenant's, and never one that binds its own key whatever the call
// (no agentId or sandboxId): a key cannot loosen what binds it.

// Policies returns the policies that may bind the tenant in ctx (with an admin key and no
// tenant named: every tenant's), the operator's first.
func (g *Gateway) Policies(ctx context.Context, of string) ([]api.ToolPolicy, error) {
	ten, all := tenant.From(ctx), false
	if of != "" {
		if !tenant.IsAdmin(ctx) && of != ten {
			return nil, errdefs.Denied("tenant", api.CodeForbidden, "a tenant key sees its own tenant's policies only")
		}
		ten = of
	} else if tenant.IsAdmin(ctx) {
		all = true
	}
	var out []api.ToolPolicy
	for _, p := range g.fixedPolicies {
		if all || p.Tenant == "*" || p.Tenant == ten {
			out = append(out, p.ToolPolicy)
		}
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	names := make([]string, 0, len(g.tenants))
	for n := range g.tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !all && n != ten {
			continue
		}
		ps := g.tenants[n].policies
		keys := make([]string, 0, len(ps))
		for k := range ps {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, ps[k].ToolPolicy)
		}
	}
	return out, nil
}

// Policy returns one policy of tenant of (default: the caller's own).
func (g *Gateway) Policy(ctx context.Context, name, of string) (api.ToolPolicy, error) {
	ten, err := g.policyTenant(ctx, of)
	if err != nil {
		return api.ToolPolicy{}, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if ts := g.tenants[ten]; ts != nil && ts.policies[name] != nil {
		return ts.policies[name].ToolPolicy, nil
	}
	for _, p := range g.fixedPolicies {
		if p.Name == name && (p.Tenant == ten || p.Tenant == "*") {
			return p.ToolPolicy, nil
		}
	}
	return api.ToolPolicy{}, fmt.Errorf("tool policy %q of tenant %s: %w", name, ten, errdefs.ErrNotFound)
}

// policyTenant is the tenant a policy request is about: of, which only an admin key may name
// other than its own.
func (g *Gateway) policyTenant(ctx context.Context, of string) (string, error) {
	ten := tenant.From(ctx)
	if of == "" || of == ten {
		return ten, nil
	}
	if !tenant.IsAdmin(ctx) {
		return "", errdefs.Denied("tenant", api.CodeForbidden, "a tenant key makes and sees policies of its own tenant only")
	}
	if !api.ValidName(of) {
		return "", errdefs.Invalid("tenant", "%q is not a tenant name", of)
	}
	return of, nil
}

// PutPolicy makes or replaces policy name of p.Tenant (default: the caller's).
func (g *Gateway) PutPolicy(ctx context.Context, name string, p api.ToolPolicy) (api.ToolPolicy, error) {
	if err := checkName(name, p.Name); err != nil {
		return api.ToolPolicy{}, err
	}
	ten, err := g.policyTenant(ctx, p.Tenant)
	if err != nil {
		return api.ToolPolicy{}, err
	}
	now := time.Now().UTC()
	p.Name, p.Tenant, p.Source, p.CreatedBy, p.UpdatedAt = name, ten, source(ctx), tenant.KeyFrom(ctx), &now
	cp, err := compilePolicy(p)
	if err != nil {
		return api.ToolPolicy{}, err
	}
	if p.KeyID != "" {
		if kt, err := g.store.KeyTenant(ctx, p.KeyID); err != nil || kt != ten {
			if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return api.ToolPolicy{}, err
			}
			return api.ToolPolicy{}, errdefs.Invalid("keyId", "no API key %q of tenant %s", p.KeyID, ten)
		}
	}
	if err := g.mayChange(ctx, cp); err != nil {
		return api.ToolPolicy{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.setOf(ten)
	old, replace := ts.policies[name]
	if replace {
		if err := g.mayChange(ctx, old); err != nil {
			return api.ToolPolicy{}, err
		}
	} else if len(ts.policies) >= g.cfg.Limits.MaxPoliciesPerTenant {
		return api.ToolPolicy{}, quotaErr("tool policies", g.cfg.Limits.MaxPoliciesPerTenant, "maxPoliciesPerTenant")
	}
	body := p
	body.Source, body.CreatedBy, body.UpdatedAt = "", "", nil
	if err := g.put(ctx, ten, store.ToolKindPolicy, name, body, p.CreatedBy, now); err != nil {
		return api.ToolPolicy{}, err
	}
	ts.policies[name] = cp
	g.orderPolicies(ts)
	return cp.ToolPolicy, nil
}

// DeletePolicy removes policy name of tenant of and answers it as it was.
func (g *Gateway) DeletePolicy(ctx context.Context, name, of string) (api.ToolPolicy, error) {
	ten, err := g.policyTenant(ctx, of)
	if err != nil {
		return api.ToolPolicy{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.tenants[ten]
	if ts == nil || ts.policies[name] == nil {
		return api.ToolPolicy{}, fmt.Errorf("tool policy %q of tenant %s (the configuration's are changed there): %w", name, ten, errdefs.ErrNotFound)
	}
	p := ts.policies[name]
	if err := g.mayChange(ctx, p); err != nil {
		return api.ToolPolicy{}, err
	}
	if err := g.store.DeleteToolObject(ctx, ten, store.ToolKindPolicy, name); err != nil {
		return api.ToolPolicy{}, err
	}
	delete(ts.policies, name)
	g.orderPolicies(ts)
	return p.ToolPolicy, nil
}

// mayChange refuses a tenant key a change of p (made, replaced or removed): one an admin key
// made, or one that binds the caller's own key whatever the call.
func (g *Gateway) mayChange(ctx context.Context, p *policy) error {
	if tenant.IsAdmin(ctx) {
		return nil
	}
	if p.Source == api.PolicySourceAdmin || p.Source == api.PolicySourceConfig {
		return errdefs.Denied("name", api.CodeForbidden, "tool policy %q was made with an admin key: only an admin key changes it", p.Name)
	}
	if p.unconditional() && (p.KeyID == "" || p.KeyID == tenant.KeyFrom(ctx)) {
		return errdefs.Denied("keyId", api.CodeForbidden, "tool policy %q binds this key whatever the call (no agentId or sandboxId): "+
			"a key never makes, changes or removes a policy that binds it; use another of the tenant's keys, or an admin key", p.Name)
	}
	return nil
}

// ToolsOnly reports whether a policy that binds key keyID of tenant ten whatever the call limits
// it to the tool routes (toolsOnly).
func (g *Gateway) ToolsOnly(ten, keyID string) bool {
	for _, p := range g.policiesOf(ten) {
		if p.ToolsOnly && p.unconditional() && p.applies(Caller{Tenant: ten, KeyID: keyID}) {
			return true
		}
	}
	return false
}
