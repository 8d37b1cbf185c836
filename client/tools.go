package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/airlockrun/airlock/api"
)

// The tool gateway (docs/tools.md): the tools this key may call, calls of them, and what a tenant
// defines — its own tools, upstream MCP servers and policies. A refused call is an *Error whose
// Code says why: api.CodeToolNotAllowed (403, Rule names the policy), api.CodeInvalidArguments
// (400, Field is the argument's JSON pointer and Rule the schema keyword) or api.CodeRateLimited
// (429, RetryAfter says when). A tool that ran and failed is a result with IsError.

func toolPath(name string) string   { return "/api/v1/tools/" + url.PathEscape(name) }
func serverPath(name string) string { return "/api/v1/tool-servers/" + url.PathEscape(name) }
func policyPath(name string) string { return "/api/v1/tool-policies/" + url.PathEscape(name) }

// ToolsOptions filter Tools.
type ToolsOptions struct {
	// AgentID lists what the key may call when acting for this agent.
	AgentID string
}

// Tools lists the tools this key may call, by name.
func (c *Client) Tools(ctx context.Context, o ToolsOptions) ([]api.Tool, error) {
	q := url.Values{}
	if o.AgentID != "" {
		q.Set("agentId", o.AgentID)
	}
	return callFor[[]api.Tool](ctx, c, request{method: http.MethodGet, path: "/api/v1/tools", query: q})
}

// Tool returns one tool this key may call; any other name is ErrNotFound.
func (c *Client) Tool(ctx context.Context, name string) (api.Tool, error) {
	return callFor[api.Tool](ctx, c, request{method: http.MethodGet, path: toolPath(name)})
}

// PutTool makes or replaces one of the tenant's tools (d.Name).
func (c *Client) PutTool(ctx context.Context, d api.ToolDefinition) (api.Tool, error) {
	return callFor[api.Tool](ctx, c, request{method: http.MethodPut, path: toolPath(d.Name), json: d})
}

// DeleteTool removes one of the tenant's tools and returns it as it was.
func (c *Client) DeleteTool(ctx context.Context, name string) (api.Tool, error) {
	return callFor[api.Tool](ctx, c, request{method: http.MethodDelete, path: toolPath(name)})
}

// CallTool calls tool name with req's arguments.
func (c *Client) CallTool(ctx context.Context, name string, req api.ToolCallRequest) (api.ToolResult, error) {
	return callFor[api.ToolResult](ctx, c, request{method: http.MethodPost, path: toolPath(name) + "/call", json: req})
}

// ToolServers lists the upstream MCP servers the tenant may use.
func (c *Client) ToolServers(ctx context.Context) ([]api.ToolServerInfo, error) {
	return callFor[[]api.ToolServerInfo](ctx, c, request{method: http.MethodGet, path: "/api/v1/tool-servers"})
}

// ToolServer returns one upstream MCP server.
func (c *Client) ToolServer(ctx context.Context, name string) (api.ToolServerInfo, error) {
	return callFor[api.ToolServerInfo](ctx, c, request{method: http.MethodGet, path: serverPath(name)})
}

// PutToolServer makes or replaces one of the tenant's upstream MCP servers (d.Name): a command
// run in a sandbox of the tenant.
func (c *Client) PutToolServer(ctx context.Context, d api.ToolServer) (api.ToolServerInfo, error) {
	return callFor[api.ToolServerInfo](ctx, c, request{method: http.MethodPut, path: serverPath(d.Name), json: d})
}

// DeleteToolServer removes one of the tenant's upstream MCP servers, stopping it.
func (c *Client) DeleteToolServer(ctx context.Context, name string) (api.ToolServerInfo, error) {
	return callFor[api.ToolServerInfo](ctx, c, request{method: http.MethodDelete, path: serverPath(name)})
}

// PolicyOptions name the tenant of a policy request: an admin key's choice (default: the key's
// own tenant).
type PolicyOptions struct {
	Tenant string
}

func (o PolicyOptions) query() url.Values {
	q := url.Values{}
	if o.Tenant != "" {
		q.Set("tenant", o.Tenant)
	}
	return q
}

// ToolPolicies lists the tool policies that may bind the tenant (an admin key without a tenant:
// every tenant's).
func (c *Client) ToolPolicies(ctx context.Context, o PolicyOptions) ([]api.ToolPolicy, error) {
	return callFor[[]api.ToolPolicy](ctx, c, request{method: http.MethodGet, path: "/api/v1/tool-policies", query: o.query()})
}

// ToolPolicy returns one tool policy.
func (c *Client) ToolPolicy(ctx context.Context, name string, o PolicyOptions) (api.ToolPolicy, error) {
	return callFor[api.ToolPolicy](ctx, c, request{method: http.MethodGet, path: policyPath(name), query: o.query()})
}

// PutToolPolicy makes or replaces tool policy p.Name (of p.Tenant, for an admin key). A tenant
// key cannot change a policy an admin key made, nor one that binds the key itself whatever the
// call (ErrPermissionDenied).
func (c *Client) PutToolPolicy(ctx context.Context, p api.ToolPolicy) (api.ToolPolicy, error) {
	return callFor[api.ToolPolicy](ctx, c, request{method: http.MethodPut, path: policyPath(p.Name), json: p})
}

// DeleteToolPolicy removes a tool policy and returns it as it was.
func (c *Client) DeleteToolPolicy(ctx context.Context, name string, o PolicyOptions) (api.ToolPolicy, error) {
	return callFor[api.ToolPolicy](ctx, c, request{method: http.MethodDelete, path: policyPath(name), query: o.query()})
}

// MCPURL is the daemon's MCP endpoint (streamable HTTP), for an MCP client: send this client's
// key as Authorization: Bearer KEY.
func (c *Client) MCPURL() string { return c.url("/mcp", nil) }
