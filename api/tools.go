package api

import "time"

// Tools (docs/tools.md): named operations an agent calls through airlock's gateway — POST
// /api/v1/tools/{name}/call or MCP at /mcp — each allowed per caller, its arguments validated
// against a JSON Schema, its calls rate-limited and recorded (tool.call events).

// Where a tool comes from (Tool.Source).
const (
	ToolSourceBuiltin = "builtin" // every tenant's: run_code, read_file, write_file, list_files, http_fetch
	ToolSourceConfig  = "config"  // the operator's (config tools.tools), granted to tenants
	ToolSourceAPI     = "api"     // the tenant's own (PUT /api/v1/tools/{name})
	ToolSourceMCP     = "mcp"     // a tool of an upstream MCP server (Tool.Server)
)

// How a tool runs (Tool.Backend).
const (
	ToolBackendBuiltin = "builtin"
	ToolBackendExec    = "exec"
	ToolBackendHTTP    = "http"
	ToolBackendMCP     = "mcp"
)

// Built-in tools.
const (
	ToolRunCode   = "run_code"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolListFiles = "list_files"
	ToolHTTPFetch = "http_fetch"
)

// EventToolCall is one call of a tool, allowed or refused. Data: tool, source, backend, keyId,
// agentId, decision (allow, deny), rule (what decided), code (a refusal's error code), field (an
// invalid argument's JSON pointer), argsDigest (sha256 of the arguments' canonical JSON),
// arguments (with the schema's x-airlock-sensitive fields redacted; at most 4 KiB, else only
// argsTruncated), durationMs, resultBytes, isError, error, remote.
const EventToolCall = "tool.call"

// Tool is a tool as the API lists it: what a caller may call, and how.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema (draft 2020-12) the call's arguments must match.
	InputSchema map[string]any `json:"inputSchema"`
	Source      string         `json:"source" enum:"builtin,config,api,mcp"`
	Backend     string         `json:"backend" enum:"builtin,exec,http,mcp"`
	// Server is the upstream MCP server of a tool of source mcp.
	Server string `json:"server,omitempty"`
	// RateLimit is each caller's budget for the tool ("10/60s"), when it has one.
	RateLimit string `json:"rateLimit,omitempty"`
	// Definition is the tool's definition, shown for the tenant's own tools (source api) only;
	// header values are never shown.
	Definition *ToolDefinition `json:"definition,omitempty"`
	UpdatedAt  *time.Time      `json:"updatedAt,omitempty"`
}

// ToolDefinition defines a tool: the body of PUT /api/v1/tools/{name}, and an entry of the
// configuration's tools.tools. Exactly one backend (exec, http) is set.
type ToolDefinition struct {
	// Name is 1-64 letters, digits, '_' or '-' (the names MCP clients accept); it may not
	// hold "__", which separates an upstream server's name from its tools'.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema (draft 2020-12) of the arguments, an object schema (default
	// {"type":"object"}). Besides the standard keywords (pattern, enum, format: email asserted,
	// ...) airlock knows x-airlock-path-prefix {allow, deny}, x-airlock-email-domains and
	// x-airlock-sensitive (docs/tools.md#argument-rules). $ref reaches only inside the schema.
	InputSchema map[string]any `json:"inputSchema,omitempty"`
	Exec        *ExecBackend   `json:"exec,omitempty"`
	HTTP        *HTTPBackend   `json:"http,omitempty"`
	// Sandbox is where an exec tool runs, and whose egress proxy and policy an http tool's
	// requests leave through.
	Sandbox *ToolSandbox `json:"sandbox,omitempty"`
	// RateLimit bounds each caller's calls: "N/DURATION", a token bucket of N refilled over
	// DURATION ("10/60s", "100/1h").
	RateLimit string `json:"rateLimit,omitempty"`
	// TimeoutSeconds bounds one call (default 60, at most 3600).
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
}

// ExecBackend runs a command in the tool's sandbox, under its limits and egress policy. Exit 0:
// the result is stdout; otherwise the result is an error (isError) with stderr and the status.
type ExecBackend struct {
	// Command is an argv array whose elements may hold {{name}} placeholders, each replaced by
	// the top-level argument name (a string as it is, anything else as JSON; never through a
	// shell), or a string run by /bin/sh -c, which takes no placeholders.
	Command Command `json:"command" openapi:"required"`
	// Stdin is what the command reads: "json" (default), the arguments as one JSON object, or
	// "none".
	Stdin   string            `json:"stdin,omitempty" enum:"json,none"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	// Output is "text" (default), or "json": stdout is also parsed into the result's
	// structuredContent.
	Output string `json:"output,omitempty" enum:"text,json"`
}

// HTTPBackend sends an HTTP request. Its host is the definition's; arguments fill only {{name}}
// placeholders of the path, the query and header values, escaped. The answer's body is the
// result (isError for a status of 400 or more).
type HTTPBackend struct {
	// Method is GET (default), POST, PUT, PATCH or DELETE.
	Method string `json:"method,omitempty" enum:"GET,POST,PUT,PATCH,DELETE"`
	URL    string `json:"url" openapi:"required"`
	// Query adds query parameters (values are templates).
	Query map[string]string `json:"query,omitempty"`
	// Headers adds request headers (values are templates, never shown back).
	Headers map[string]string `json:"headers,omitempty"`
	// Body is "json" (the default for POST, PUT and PATCH): the arguments as a JSON object;
	// "none" (the default otherwise); or a template sent as text.
	Body string `json:"body,omitempty"`
	// Egress is "sandbox" (default): the request leaves through the egress proxy of the tool's
	// sandbox, under its policy (allowlist, DNS rebinding checks, credentials added for http://
	// URLs, events); or "daemon": the daemon sends it itself, which only the operator's tools may.
	Egress string `json:"egress,omitempty" enum:"sandbox,daemon"`
}

// How a tool's sandbox is reused (ToolSandbox.Reuse).
const (
	ReuseCaller = "caller" // one per caller (API key and agent), kept while in use
	ReuseTool   = "tool"   // one per tool (or server) and tenant, shared by its callers
	ReuseCall   = "call"   // a fresh one per call, terminated after it
)

// ToolSandbox says where a tool runs. It is always a sandbox of the caller's tenant, made under
// that tenant's grants and quotas. One of SandboxID, Pool and Spec; none means the daemon's
// tools workspace (config tools.workspace).
type ToolSandbox struct {
	// SandboxID is a live sandbox of the tenant: its ID, or its name (the newest live one).
	SandboxID string `json:"sandboxId,omitempty"`
	// Pool makes the sandbox with the spec of this warm pool, so that it is claimed from it.
	Pool string `json:"pool,omitempty"`
	// Spec makes the sandbox from this spec, as POST /api/v1/sandboxes would.
	Spec *Spec `json:"spec,omitempty"`
	// Reuse applies to Pool and Spec: caller (default), tool or call.
	Reuse string `json:"reuse,omitempty" enum:"caller,tool,call"`
}

// ToolCallRequest is the body of POST /api/v1/tools/{name}/call.
type ToolCallRequest struct {
	Arguments map[string]any `json:"arguments,omitempty"`
	// SandboxID runs a built-in or exec tool in this live sandbox of the caller's instead of the
	// tool's own.
	SandboxID string `json:"sandboxId,omitempty"`
	// AgentID names the agent the caller acts for; policies may be scoped to it.
	AgentID string `json:"agentId,omitempty"`
}

// ToolResult is a call's result, as MCP's CallToolResult: content, and whether the tool failed
// (a failure of the tool is a result, not an HTTP error; refusals are errors).
type ToolResult struct {
	Content []ToolContent `json:"content"`
	IsError bool          `json:"isError"`
	// StructuredContent is the result as a JSON object, where the tool gives one.
	StructuredContent map[string]any `json:"structuredContent,omitempty"`
	// EventID is the call's tool.call event.
	EventID string `json:"eventId,omitempty"`
	// SandboxID is the sandbox the call ran in, if any.
	SandboxID  string `json:"sandboxId,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

// ToolContent is one item of a result: text, an image or audio (Data, base64, with MimeType),
// or a resource (URI, with Text when it has some).
type ToolContent struct {
	Type     string `json:"type" enum:"text,image,audio,resource"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// ToolServer is an upstream MCP server whose tools airlock serves as NAME__TOOL, each validated,
// allowed, rate-limited and recorded like any tool: the body of PUT /api/v1/tool-servers/{name}
// and an entry of the configuration's tools.servers. Exactly one of Command and URL.
type ToolServer struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Command starts a stdio MCP server inside the server's sandbox (its limits, filesystem and
	// egress policy): an argv array or a string run by /bin/sh -c.
	Command Command           `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	// URL is an MCP server over streamable HTTP that the daemon itself dials: the operator's
	// servers only.
	URL string `json:"url,omitempty"`
	// Sandbox is where Command runs; its reuse is tool (default: one server per tenant) or
	// caller.
	Sandbox *ToolSandbox `json:"sandbox,omitempty"`
	// Tools, when set, are patterns of the server's tool names to serve; the others are hidden.
	Tools []string `json:"tools,omitempty"`
	// RateLimit bounds each caller's calls of each of the server's tools ("10/60s").
	RateLimit      string  `json:"rateLimit,omitempty"`
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
}

// ToolServerInfo is an upstream MCP server as the API shows it.
type ToolServerInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source" enum:"config,api"`
	Transport   string `json:"transport" enum:"stdio,http"`
	// Definition is shown for the tenant's own servers only.
	Definition *ToolServer `json:"definition,omitempty"`
	UpdatedAt  *time.Time  `json:"updatedAt,omitempty"`
}

// ExecBackend.Stdin and .Output, HTTPBackend.Egress, ToolContent.Type and
// ToolServerInfo.Transport values.
const (
	ToolStdinJSON     = "json"
	ToolStdinNone     = "none"
	ToolOutputText    = "text"
	ToolOutputJSON    = "json"
	ToolEgressSandbox = "sandbox"
	ToolEgressDaemon  = "daemon"
	ContentText       = "text"
	ContentImage      = "image"
	ContentAudio      = "audio"
	ContentResource   = "resource"
	TransportStdio    = "stdio"
	TransportHTTP     = "http"
)

// Where a policy comes from (ToolPolicy.Source).
const (
	PolicySourceConfig = "config" // the operator's configuration file
	PolicySourceAdmin  = "admin"  // made with an admin key
	PolicySourceTenant = "tenant" // made with one of the tenant's keys
)

// ToolPolicy narrows which tools a tenant's callers may call and how often: the body of PUT
// /api/v1/tool-policies/{name}. It applies to a call of Tenant when KeyID, AgentID and SandboxID
// (those set) are the call's. A call is allowed when every policy that applies allows it: its
// name matches one of Allow's patterns (when Allow is set) and none of Deny's; "*" in a pattern
// is any run of characters.
type ToolPolicy struct {
	Name string `json:"name"`
	// Tenant is the tenant bound: a tenant key's own (the default); an admin key names any.
	Tenant string `json:"tenant,omitempty"`
	// KeyID binds one API key of the tenant (key_...); empty binds them all.
	KeyID string `json:"keyId,omitempty"`
	// AgentID binds calls made for this agent (a call's agentId; over MCP the Airlock-Agent-Id
	// header).
	AgentID string `json:"agentId,omitempty"`
	// SandboxID binds calls that run in this sandbox.
	SandboxID  string          `json:"sandboxId,omitempty"`
	Allow      []string        `json:"allow,omitempty"`
	Deny       []string        `json:"deny,omitempty"`
	RateLimits []ToolRateLimit `json:"rateLimits,omitempty"`
	// ToolsOnly limits the keys the policy binds (it names no agentId or sandboxId) to the tool
	// routes — listing, inspecting and calling tools, and /mcp — so that a key given to an agent
	// reaches sandboxes only through its tools: every other route answers 403.
	ToolsOnly bool `json:"toolsOnly,omitempty"`
	// Source says who made the policy; a tenant key changes only its tenant's own, and never
	// one that binds itself whatever the call (no agentId or sandboxId).
	Source    string     `json:"source,omitempty" enum:"config,admin,tenant"`
	CreatedBy string     `json:"createdBy,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// ToolRateLimit bounds the calls of the tools matching a pattern, per caller (API key, and
// agent when the policy is scoped to one).
type ToolRateLimit struct {
	// Tools is a pattern of tool names ("send_*", "*").
	Tools string `json:"tools" openapi:"required"`
	// Limit is "N/DURATION": a token bucket of N refilled over DURATION.
	Limit string `json:"limit" openapi:"required"`
	// Each gives every matching tool a bucket of its own; by default they share one.
	Each bool `json:"each,omitempty"`
}
