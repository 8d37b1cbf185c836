package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// tool is a compiled tool: checked, its schema compiled, ready to call.
type tool struct {
	name, description string
	source, backend   string
	def               api.ToolDefinition // exec and http tools
	schema            *Schema
	rate              *Rate
	rateText          string
	timeout           time.Duration
	// tenants may call an operator's tool ("*" all); nil for tools that are not the operator's
	// (built-in, a tenant's own, an upstream server's).
	tenants []string
	// sandbox is where the tool runs (nil: the workspace, for built-ins).
	sandbox *api.ToolSandbox
	// builtin runs a built-in tool.
	builtin func(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error)
	// server and upstream name a tool of an upstream MCP server.
	server   *server
	upstream string
	// updatedAt and createdBy are a tenant's tool's.
	updatedAt time.Time
	createdBy string
}

// invocation is one call being run: who, what, with which arguments, and the call's record (the
// backend sets where it ran).
type invocation struct {
	caller    Caller
	tool      *tool
	args      map[string]any
	sandboxID string // the call's own sandbox (ToolCallRequest.SandboxID), if any
	rec       *record
}

// run calls the tool's backend.
func (t *tool) run(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error) {
	switch t.backend {
	case api.ToolBackendBuiltin:
		return t.builtin(ctx, g, inv)
	case api.ToolBackendExec:
		return g.runExec(ctx, inv)
	case api.ToolBackendHTTP:
		return g.runHTTP(ctx, inv)
	case api.ToolBackendMCP:
		return g.ups.call(ctx, inv)
	}
	return api.ToolResult{}, fmt.Errorf("tool %s: unknown backend %q", t.name, t.backend)
}

// view is the tool as the API lists it.
func (t *tool) view() api.Tool {
	v := api.Tool{Name: t.name, Description: t.description, InputSchema: t.schema.Doc(), Source: t.source, Backend: t.backend, RateLimit: t.rateText}
	if t.server != nil {
		v.Server = t.server.name
	}
	if t.source == api.ToolSourceAPI {
		d := t.def
		if d.HTTP != nil {
			h := *d.HTTP
			h.Headers = hideValues(h.Headers)
			d.HTTP = &h
		}
		d.Sandbox = hideCredentials(d.Sandbox)
		v.Definition = &d
		at := t.updatedAt
		v.UpdatedAt = &at
	}
	return v
}

// hideValues keeps a header map's names, never its values.
func hideValues(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = ""
	}
	return out
}

// hideCredentials drops the values of a tool sandbox spec's credentials, as a sandbox's answer
// does.
func hideCredentials(ts *api.ToolSandbox) *api.ToolSandbox {
	if ts == nil || ts.Spec == nil || len(ts.Spec.Network.Credentials) == 0 {
		return ts
	}
	c := *ts
	spec := *ts.Spec
	creds := make([]api.Credential, len(spec.Network.Credentials))
	for i, cr := range spec.Network.Credentials {
		cr.Value = ""
		creds[i] = cr
	}
	spec.Network.Credentials = creds
	c.Spec = &spec
	return &c
}

// validToolName: 1-64 of letters, digits, '_' and '-' (what MCP clients take), no "__".
func validToolName(n string) bool {
	if n == "" || len(n) > 64 || strings.Contains(n, "__") {
		return false
	}
	for _, c := range []byte(n) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// splitServerTool splits an upstream tool's name SERVER__TOOL.
func splitServerTool(name string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(name, "__")
	return server, tool, ok && server != "" && tool != ""
}

// maxTimeout bounds a tool's timeoutSeconds.
const maxTimeout = time.Hour

// compileTool checks a definition of source (config or api) and compiles it. Errors name the
// field.
func (g *Gateway) compileTool(d api.ToolDefinition, source string) (*tool, error) {
	if !validToolName(d.Name) {
		return nil, errdefs.Invalid("name", "a tool's name is 1-64 letters, digits, '_' or '-', without \"__\" (got %q)", d.Name)
	}
	if len(d.Description) > 4096 {
		return nil, errdefs.Invalid("description", "at most 4096 bytes")
	}
	schema, err := CompileSchema(d.InputSchema, g.cfg.Limits.MaxSchemaBytes)
	if err != nil {
		return nil, err
	}
	t := &tool{name: d.Name, description: d.Description, source: source, def: d, schema: schema, sandbox: d.Sandbox, timeout: defaultTimeout}
	if d.TimeoutSeconds < 0 || time.Duration(d.TimeoutSeconds*float64(time.Second)) > maxTimeout {
		return nil, errdefs.Invalid("timeoutSeconds", "must be between 0 and %d", int(maxTimeout.Seconds()))
	}
	if d.TimeoutSeconds > 0 {
		t.timeout = time.Duration(d.TimeoutSeconds * float64(time.Second))
	}
	if d.RateLimit != "" {
		r, err := ParseRate(d.RateLimit)
		if err != nil {
			return nil, errdefs.Invalid("rateLimit", "%v", err)
		}
		t.rate, t.rateText = &r, d.RateLimit
	}
	switch {
	case d.Exec != nil && d.HTTP != nil, d.Exec == nil && d.HTTP == nil:
		return nil, errdefs.Invalid("exec", "a tool has exactly one backend: exec or http")
	case d.Exec != nil:
		t.backend = api.ToolBackendExec
		if err := checkExec(*d.Exec); err != nil {
			return nil, err
		}
	default:
		t.backend = api.ToolBackendHTTP
		if err := checkHTTP(*d.HTTP, source); err != nil {
			return nil, err
		}
	}
	if d.Sandbox != nil {
		if err := checkSandbox("sandbox", *d.Sandbox, true); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkSandbox checks where a tool runs: one of sandboxId, pool and spec (none: the workspace,
// when empty is allowed).
func checkSandbox(field string, ts api.ToolSandbox, emptyOK bool) error {
	n := 0
	for _, set := range []bool{ts.SandboxID != "", ts.Pool != "", ts.Spec != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errdefs.Invalid(field, "name one of sandboxId, pool and spec")
	case n == 0 && !emptyOK:
		return errdefs.Invalid(field, "name one of sandboxId, pool and spec")
	case ts.Reuse != "" && ts.Reuse != api.ReuseCaller && ts.Reuse != api.ReuseTool && ts.Reuse != api.ReuseCall:
		return errdefs.Invalid(field+".reuse", "must be caller, tool or call (got %q)", ts.Reuse)
	case ts.Reuse != "" && ts.SandboxID != "":
		return errdefs.Invalid(field+".reuse", "applies to a pool or a spec, not to a sandbox named by sandboxId")
	case ts.Pool != "" && !api.ValidName(ts.Pool):
		return errdefs.Invalid(field+".pool", "%q is not a pool name", ts.Pool)
	}
	return nil
}

// placeholder matches a {{name}} placeholder of a template.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true}

// checkExec refuses a command that would put an argument through a shell: placeholders in a
// script given to a shell's -c (pass them as positional parameters instead).
func checkExec(e api.ExecBackend) error {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return errdefs.Invalid("exec.command", "is required: an argv array, or a string run by /bin/sh -c")
	}
	if shells[path.Base(e.Command[0])] {
		for i := 1; i < len(e.Command)-1; i++ {
			if e.Command[i] == "-c" && placeholder.MatchString(e.Command[i+1]) {
				return errdefs.Invalid("exec.command", "a placeholder in a shell script would let an argument run as shell code: "+
					`pass it as a positional parameter, e.g. ["sh", "-c", "echo \"$1\"", "sh", "{{text}}"]`)
			}
		}
	}
	for _, a := range e.Command {
		if strings.ContainsRune(a, 0) {
			return errdefs.Invalid("exec.command", "must not contain NUL bytes")
		}
	}
	if e.Stdin != "" && e.Stdin != api.ToolStdinJSON && e.Stdin != api.ToolStdinNone {
		return errdefs.Invalid("exec.stdin", "must be json or none (got %q)", e.Stdin)
	}
	if e.Output != "" && e.Output != api.ToolOutputText && e.Output != api.ToolOutputJSON {
		return errdefs.Invalid("exec.output", "must be text or json (got %q)", e.Output)
	}
	if e.Workdir != "" && (!path.IsAbs(e.Workdir) || path.Clean(e.Workdir) != e.Workdir) {
		return errdefs.Invalid("exec.workdir", "must be an absolute, clean path inside the sandbox")
	}
	return nil
}

// checkHTTP checks an http backend: the URL's scheme and host are the definition's (no
// placeholder in them), header values hold no line breaks, and only the operator's tools send
// from the daemon.
func checkHTTP(h api.HTTPBackend, source string) error {
	switch h.Method {
	case "", http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return errdefs.Invalid("http.method", "must be GET, POST, PUT, PATCH or DELETE (got %q)", h.Method)
	}
	u, err := url.Parse(placeholder.ReplaceAllString(h.URL, "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return errdefs.Invalid("http.url", "must be an http or https URL with a host and no user information (got %q)", h.URL)
	}
	if i := strings.Index(h.URL, "://"); i >= 0 {
		rest := h.URL[i+3:]
		host, _, _ := strings.Cut(rest, "/")
		host, _, _ = strings.Cut(host, "?")
		if placeholder.MatchString(host) || placeholder.MatchString(h.URL[:i]) {
			return errdefs.Invalid("http.url", "the scheme and host are the tool's own: placeholders go in the path and query only")
		}
	}
	for k, v := range h.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") || strings.ContainsAny(v, "\r\n\x00") {
			return errdefs.Invalid("http.headers", "invalid header %q", k)
		}
		if strings.EqualFold(k, "Host") {
			return errdefs.Invalid("http.headers", "the Host header is the URL's")
		}
	}
	switch h.Egress {
	case "", api.ToolEgressSandbox:
	case api.ToolEgressDaemon:
		if source != api.ToolSourceConfig {
			return errdefs.Denied("http.egress", api.CodeForbidden, "egress daemon (the daemon sends the request itself) is for the operator's tools only: "+
				"a tenant's requests leave through a sandbox's egress proxy and policy")
		}
	default:
		return errdefs.Invalid("http.egress", "must be sandbox or daemon (got %q)", h.Egress)
	}
	return nil
}
