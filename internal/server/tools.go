package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/mcpserve"
	"github.com/airlockrun/airlock/internal/tenant"
	"github.com/airlockrun/airlock/internal/tools"
)

// The tool gateway's routes (docs/tools.md): tools, upstream MCP servers and policies as
// resources, calls, and MCP over streamable HTTP at /mcp. Who may do what is the gateway's:
// a tenant key defines its tenant's tools, servers and policies (never loosening one that binds
// it); an admin key also names another tenant's policies.

const (
	toolPath   = "/api/v1/tools/{name}"
	serverPath = "/api/v1/tool-servers/{name}"
	policyPath = "/api/v1/tool-policies/{name}"
	mcpPath    = "/mcp"
)

var (
	toolParam   = []param{{"name", "string", "a tool's name: 1-64 letters, digits, '_' or '-' (an upstream server's tools: SERVER__TOOL)"}}
	serverParam = []param{{"name", "string", "an upstream MCP server's name"}}
	policyParam = []param{{"name", "string", "a tool policy's name"}}
	tenantQuery = []param{{"tenant", "string", "an admin key's: the tenant whose policy it is (default: the key's own)"}}
	agentHeader = "Airlock-Agent-Id"
	sbxHeader   = "Airlock-Sandbox-Id"
)

// toolRoutes are the gateway's routes, in the route table.
func toolRoutes() []route {
	mcpDoc := "MCP over streamable HTTP (JSON-RPC 2.0, protocol 2025-03-26 and later): initialize, tools/list (exactly the tools this key may call), " +
		"tools/call (the same checks, limits and record as POST /api/v1/tools/{name}/call; a refusal is a tool error). Headers Airlock-Agent-Id and " +
		"Airlock-Sandbox-Id set a call's agentId and sandboxId. "
	return []route{
		{"GET", "/api/v1/tools", false, listTools, opDoc{toolRoute: true, summary: "The tools this key may call (built-in, the operator's granted to the tenant, the tenant's own, " +
			"its upstream MCP servers' as SERVER__TOOL), its policies applied, by name", resp: []api.Tool{}, query: []param{
			{"agentId", "string", "list what the key may call when acting for this agent"}}}},
		{"GET", toolPath, false, getTool, opDoc{toolRoute: true, summary: "One tool this key may call (404 otherwise)", resp: api.Tool{}, path: toolParam}},
		{"PUT", toolPath, false, putTool, opDoc{summary: "Make or replace one of the tenant's tools (exec or http backend); the body's name may be left out. " +
			"403 for a daemon egress, 409 for a built-in or operator's tool's name, 413 for a schema over the limit, 429 past the tenant's count of tools",
			body: api.ToolDefinition{}, resp: api.Tool{}, path: toolParam}},
		{"DELETE", toolPath, false, deleteTool, opDoc{summary: "Remove one of the tenant's tools; answers it as it was", resp: api.Tool{}, path: toolParam}},
		{"POST", toolPath + "/call", false, callTool, opDoc{toolRoute: true, ownEvents: true, summary: "Call a tool: 403 tool_not_allowed (not granted, or refused by a policy: rule), " +
			"400 invalid_arguments (field: the argument's JSON pointer, rule: the schema keyword), 429 rate_limited with Retry-After; " +
			"a tool that ran and failed answers isError. Recorded as a tool.call event", body: api.ToolCallRequest{}, resp: api.ToolResult{}, path: toolParam}},

		{"GET", "/api/v1/tool-servers", false, listToolServers, opDoc{summary: "The upstream MCP servers the tenant may use (the operator's granted to it, and its own)", resp: []api.ToolServerInfo{}}},
		{"GET", serverPath, false, getToolServer, opDoc{summary: "One upstream MCP server", resp: api.ToolServerInfo{}, path: serverParam}},
		{"PUT", serverPath, false, putToolServer, opDoc{summary: "Make or replace one of the tenant's upstream MCP servers: a command run in a sandbox of the tenant (a url is the operator's, 403); " +
			"a running one is stopped", body: api.ToolServer{}, resp: api.ToolServerInfo{}, path: serverParam}},
		{"DELETE", serverPath, false, deleteToolServer, opDoc{summary: "Remove one of the tenant's upstream MCP servers, stopping it; answers it as it was", resp: api.ToolServerInfo{}, path: serverParam}},

		{"GET", "/api/v1/tool-policies", false, listToolPolicies, opDoc{summary: "The tool policies that may bind the tenant (the operator's and its own); an admin key sees every tenant's", resp: []api.ToolPolicy{},
			query: tenantQuery}},
		{"GET", policyPath, false, getToolPolicy, opDoc{summary: "One tool policy", resp: api.ToolPolicy{}, path: policyParam, query: tenantQuery}},
		{"PUT", policyPath, false, putToolPolicy, opDoc{summary: "Make or replace a tool policy of the tenant (an admin key: of the tenant the body names). " +
			"403 when a tenant key would change one an admin key made, or one that binds the key itself whatever the call", body: api.ToolPolicy{}, resp: api.ToolPolicy{}, path: policyParam}},
		{"DELETE", policyPath, false, deleteToolPolicy, opDoc{summary: "Remove a tool policy; answers it as it was (the same 403s as a change)", resp: api.ToolPolicy{}, path: policyParam, query: tenantQuery}},

		{"POST", mcpPath, false, serveMCP, opDoc{toolRoute: true, ownEvents: true, summary: mcpDoc + "Send a JSON-RPC message; the answer is JSON or an SSE stream (Accept: application/json, text/event-stream)",
			rawBody: true, rawResp: true, rawType: "text/event-stream"}},
		{"GET", mcpPath, false, serveMCP, opDoc{toolRoute: true, ownEvents: true, summary: mcpDoc + "Open the session's stream of server messages (SSE; Mcp-Session-Id)",
			rawResp: true, rawType: "text/event-stream", stream: "sse"}},
		{"DELETE", mcpPath, false, serveMCP, opDoc{toolRoute: true, ownEvents: true, summary: mcpDoc + "End the session named by Mcp-Session-Id", rawResp: true, rawType: "text/plain"}},
	}
}

// gateway is the tool gateway, or a 503 when the daemon has none.
func (s *Server) gateway() (*tools.Gateway, error) {
	if s.cfg.Tools == nil {
		return nil, errdefs.New(errdefs.ErrServiceUnavailable, "this daemon serves no tool gateway")
	}
	return s.cfg.Tools, nil
}

// toolsOnly refuses a route other than the tool routes to a key a toolsOnly policy binds.
func (s *Server) toolsOnly(r *http.Request, rt route) error {
	if s.cfg.Tools == nil || rt.doc.toolRoute || rt.public {
		return nil
	}
	ctx := r.Context()
	if s.cfg.Tools.ToolsOnly(tenant.From(ctx), tenant.KeyFrom(ctx)) {
		return errdefs.Denied("", api.CodeForbidden, "this key is bound by a toolsOnly policy: it may list, inspect and call tools (and use /mcp), nothing else")
	}
	return nil
}

func listTools(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.List(r.Context(), r.URL.Query().Get("agentId"))
}

func getTool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.Get(r.Context(), r.PathValue("name"))
}

func putTool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var d api.ToolDefinition
	if err := decode(w, r, s.cfg.MaxBodyBytes, &d); err != nil {
		return nil, err
	}
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.PutTool(syncCtx(r), r.PathValue("name"), d)
}

func deleteTool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.DeleteTool(syncCtx(r), r.PathValue("name"))
}

func callTool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ToolCallRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	// The call runs to its end and is recorded even if the client hangs up.
	return g.Call(tools.WithRemote(syncCtx(r), r.RemoteAddr), r.PathValue("name"), req)
}

func listToolServers(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.Servers(r.Context()), nil
}

func getToolServer(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.Server(r.Context(), r.PathValue("name"))
}

func putToolServer(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var d api.ToolServer
	if err := decode(w, r, s.cfg.MaxBodyBytes, &d); err != nil {
		return nil, err
	}
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.PutServer(syncCtx(r), r.PathValue("name"), d)
}

func deleteToolServer(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.DeleteServer(syncCtx(r), r.PathValue("name"))
}

func listToolPolicies(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.Policies(r.Context(), r.URL.Query().Get("tenant"))
}

func getToolPolicy(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.Policy(r.Context(), r.PathValue("name"), r.URL.Query().Get("tenant"))
}

func putToolPolicy(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var p api.ToolPolicy
	if err := decode(w, r, s.cfg.MaxBodyBytes, &p); err != nil {
		return nil, err
	}
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.PutPolicy(syncCtx(r), r.PathValue("name"), p)
}

func deleteToolPolicy(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	return g.DeletePolicy(syncCtx(r), r.PathValue("name"), r.URL.Query().Get("tenant"))
}

// MCP: one MCP server for every caller (the tools it lists are computed per request from the
// caller's token), behind the SDK's streamable HTTP handler. The session is bound to the key
// that opened it (the SDK refuses another key's request with 403: session hijacking). The SDK's
// protection against DNS rebinding (a loopback address with a foreign Host) is off: every
// request needs the API key, which a page that rebinds a name cannot know, and behind a reverse
// proxy the Host is the proxy's.

// principalKey carries what the caller is, in the MCP token's Extra.
const (
	extraTenant = "tenant"
	extraKey    = "keyId"
	extraAdmin  = "admin"
	extraRemote = "remote"
)

// newMCP builds the /mcp handler over the gateway.
func (s *Server) newMCP() http.Handler {
	srv := mcpserve.New(s.cfg.Version, s.log.With("component", "mcp"), func(ctx context.Context, req mcp.Request) (mcpserve.Backend, error) {
		extra := req.GetExtra()
		if extra == nil || extra.TokenInfo == nil {
			return nil, errors.New("unauthenticated")
		}
		ti := extra.TokenInfo
		ten, _ := ti.Extra[extraTenant].(string)
		key, _ := ti.Extra[extraKey].(string)
		ctx = tenant.WithKey(tenant.With(ctx, ten), key)
		if admin, _ := ti.Extra[extraAdmin].(bool); admin {
			ctx = tenant.WithAdmin(ctx)
		}
		if remote, _ := ti.Extra[extraRemote].(string); remote != "" {
			ctx = tools.WithRemote(ctx, remote)
		}
		return gatewayBackend{s: s, agent: extra.Header.Get(agentHeader), sandbox: extra.Header.Get(sbxHeader), ctx: ctx}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: s.log.With("component", "mcp"), SessionTimeout: 30 * time.Minute, DisableLocalhostProtection: true,
		MaxRequestBodyBytes: s.cfg.MaxBodyBytes,
	})
	// The request was authenticated already (wrap): the token's info is the principal in its
	// context, whose key ID binds the session.
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: tenant.KeyFrom(ctx), Extra: map[string]any{
			extraTenant: tenant.From(ctx), extraKey: tenant.KeyFrom(ctx), extraAdmin: tenant.IsAdmin(ctx), extraRemote: r.RemoteAddr}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

func serveMCP(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	if _, err := s.gateway(); err != nil {
		return nil, err
	}
	s.mcpOnce.Do(func() { s.mcp = s.newMCP() })
	if r.Method == http.MethodGet {
		// A session's stream of server messages is idle, not work in flight: it ends when the
		// daemon begins to stop, rather than holding the stop for its grace.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-s.stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		r = r.WithContext(ctx)
	}
	s.mcp.ServeHTTP(w, r)
	return nil, written
}

// gatewayBackend serves one MCP request's caller from the gateway.
type gatewayBackend struct {
	s              *Server
	agent, sandbox string
	ctx            context.Context // the caller's identity (values only)
}

func (b gatewayBackend) List(ctx context.Context) ([]api.Tool, error) {
	return b.s.cfg.Tools.List(b.ctx, b.agent)
}

func (b gatewayBackend) Call(ctx context.Context, name string, args map[string]any) (api.ToolResult, error) {
	res, err := b.s.cfg.Tools.Call(b.ctx, name, api.ToolCallRequest{Arguments: args, AgentID: b.agent, SandboxID: b.sandbox})
	if err != nil {
		_, e := errorStatus(err)
		r := &mcpserve.Refusal{Code: e.Code, Message: e.Message, Field: e.Field, Rule: e.Rule}
		if fe, ok := errors.AsType[*errdefs.FieldError](err); ok && fe.RetryAfter > 0 {
			r.RetryAfterSeconds = int(math.Ceil(fe.RetryAfter.Seconds()))
		}
		return api.ToolResult{}, r
	}
	return res, nil
}
