package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
)

// Upstream MCP servers: a stdio server runs as a long exec inside a sandbox of the tenant (its
// limits, filesystem and egress policy; by default one sandbox and one server per tenant and
// server), the gateway its MCP client over the exec's stdin and stdout; an HTTP server (the
// operator's only) is dialled by the daemon. Their tools are served as SERVER__TOOL, each
// validated against the schema the server gives, allowed, rate-limited and recorded like any
// other tool. A server unused for upstreamIdle is stopped, so that its sandbox can idle out.

// server is a compiled upstream server definition.
type server struct {
	name, description string
	source            string
	def               api.ToolServer
	transport         string
	rate              *Rate
	rateText          string
	timeout           time.Duration
	headers           map[string]string // the operator's, for a URL server
	tenants           []string          // the operator's: who may use it
	updatedAt         time.Time
}

func (s *server) view() api.ToolServerInfo {
	v := api.ToolServerInfo{Name: s.name, Description: s.description, Source: s.source, Transport: s.transport}
	if s.source == api.ToolSourceAPI {
		d := s.def
		d.Sandbox = hideCredentials(d.Sandbox)
		d.Env = hideValues(d.Env)
		v.Definition = &d
		at := s.updatedAt
		v.UpdatedAt = &at
	}
	return v
}

// compileServer checks a server definition of source (config or api).
func compileServer(d api.ToolServer, source string) (*server, error) {
	if !validToolName(d.Name) {
		return nil, errdefs.Invalid("name", "a server's name is 1-64 letters, digits, '_' or '-', without \"__\" (got %q)", d.Name)
	}
	s := &server{name: d.Name, description: d.Description, source: source, def: d, timeout: defaultTimeout}
	switch {
	case len(d.Command) > 0 && d.URL != "", len(d.Command) == 0 && d.URL == "":
		return nil, errdefs.Invalid("command", "a server has a command (stdio, run in a sandbox) or a url (the operator's), not both")
	case d.URL != "":
		if source != api.ToolSourceConfig {
			return nil, errdefs.Denied("url", api.CodeForbidden, "an MCP server the daemon dials is the operator's (config tools.servers); "+
				"a tenant's server runs in its sandbox: give a command")
		}
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errdefs.Invalid("url", "must be an http or https URL (got %q)", d.URL)
		}
		if d.Sandbox != nil {
			return nil, errdefs.Invalid("sandbox", "a URL server runs nowhere of the tenant's: no sandbox")
		}
		s.transport = api.TransportHTTP
	default:
		if d.Command[0] == "" {
			return nil, errdefs.Invalid("command", "is required")
		}
		if d.Workdir != "" && (!path.IsAbs(d.Workdir) || path.Clean(d.Workdir) != d.Workdir) {
			return nil, errdefs.Invalid("workdir", "must be an absolute, clean path inside the sandbox")
		}
		s.transport = api.TransportStdio
		if d.Sandbox != nil {
			if err := checkSandbox("sandbox", *d.Sandbox, true); err != nil {
				return nil, err
			}
			if d.Sandbox.Reuse == api.ReuseCall {
				return nil, errdefs.Invalid("sandbox.reuse", "a server lives across calls: tool (one per tenant) or caller")
			}
		}
	}
	for i, p := range d.Tools {
		if err := checkPattern(p); err != nil {
			return nil, errdefs.Invalid(fmt.Sprintf("tools[%d]", i), "%v", err)
		}
	}
	if d.RateLimit != "" {
		r, err := ParseRate(d.RateLimit)
		if err != nil {
			return nil, errdefs.Invalid("rateLimit", "%v", err)
		}
		s.rate, s.rateText = &r, d.RateLimit
	}
	if d.TimeoutSeconds < 0 || time.Duration(d.TimeoutSeconds*float64(time.Second)) > maxTimeout {
		return nil, errdefs.Invalid("timeoutSeconds", "must be between 0 and %d", int(maxTimeout.Seconds()))
	}
	if d.TimeoutSeconds > 0 {
		s.timeout = time.Duration(d.TimeoutSeconds * float64(time.Second))
	}
	return s, nil
}

// upstreamIdle is how long a server runs without a call before it is stopped.
const upstreamIdle = 10 * time.Minute

// retryAfterFailure is how long a server that failed to start is not started again.
const retryAfterFailure = 5 * time.Second

// connectTimeout bounds starting a server and its MCP handshake.
const connectTimeout = 2 * time.Minute

// upstreams are the running servers, by tenant, server and (reuse caller) caller.
type upstreams struct {
	g *Gateway

	mu    sync.Mutex // guards conns
	conns map[string]*upConn
}

// upConn is one server as its tenant sees it: connected, or being connected (mu held), or dead.
type upConn struct {
	ten, server string
	mu          sync.Mutex // held while connecting
	s           *server
	session     *mcp.ClientSession
	tools       map[string]*tool // by the upstream's name
	sandboxID   string
	stopExec    context.CancelFunc
	ended       chan struct{} // closed when the server's exec ended (stdio)
	closed      chan struct{} // closed by close: the idle watcher of the connection returns
	stderr      *tailBuffer
	// failedAt and failure are the last connect's failure: for a while after it, uses get it
	// again rather than starting the server again.
	failedAt time.Time
	failure  error

	usedMu sync.Mutex // guards used
	used   time.Time
}

func newUpstreams(g *Gateway) *upstreams { return &upstreams{g: g, conns: map[string]*upConn{}} }

func (u *upstreams) key(c Caller, s *server) string {
	k := c.Tenant + "\x00" + s.source + "\x00" + s.name
	if s.def.Sandbox != nil && s.def.Sandbox.Reuse == api.ReuseCaller {
		k += "\x00" + c.key()
	}
	return k
}

// live is what a use of a connection needs, read under its lock: it may be reconnected (its
// fields replaced) while the use goes on.
type live struct {
	uc        *upConn
	session   *mcp.ClientSession
	tools     map[string]*tool
	sandboxID string
	stderr    *tailBuffer
}

// conn returns the live connection to s for c, connecting (starting the server) if needed.
func (u *upstreams) conn(ctx context.Context, c Caller, s *server) (live, error) {
	k := u.key(c, s)
	u.mu.Lock()
	uc := u.conns[k]
	if uc == nil || uc.s != s {
		uc = &upConn{ten: c.Tenant, server: s.name, s: s}
		u.conns[k] = uc
	}
	u.mu.Unlock()
	uc.mu.Lock()
	defer uc.mu.Unlock()
	if uc.session != nil && !uc.dead() {
		uc.touch()
		return live{uc, uc.session, uc.tools, uc.sandboxID, uc.stderr}, nil
	}
	uc.close()
	if uc.failure != nil && time.Since(uc.failedAt) < retryAfterFailure {
		return live{}, uc.failure
	}
	if err := u.connect(ctx, c, uc); err != nil {
		uc.close()
		uc.failure, uc.failedAt = err, time.Now()
		return live{}, err
	}
	uc.failure = nil
	uc.touch()
	uc.closed = make(chan struct{})
	go u.idle(uc, uc.closed)
	return live{uc, uc.session, uc.tools, uc.sandboxID, uc.stderr}, nil
}

func (uc *upConn) touch() {
	uc.usedMu.Lock()
	uc.used = time.Now()
	uc.usedMu.Unlock()
}

func (uc *upConn) dead() bool {
	if uc.ended == nil {
		return false
	}
	select {
	case <-uc.ended:
		return true
	default:
		return false
	}
}

// close stops the server and the session. Under uc.mu.
func (uc *upConn) close() {
	if uc.closed != nil {
		close(uc.closed)
		uc.closed = nil
	}
	if uc.session != nil {
		_ = uc.session.Close() // the server may be gone already
		uc.session = nil
	}
	if uc.stopExec != nil {
		uc.stopExec()
		uc.stopExec = nil
	}
}

// idle stops uc once unused for upstreamIdle; it returns when closed is.
func (u *upstreams) idle(uc *upConn, closed <-chan struct{}) {
	t := time.NewTicker(upstreamIdle / 10)
	defer t.Stop()
	for {
		select {
		case <-closed:
			return
		case <-t.C:
		}
		uc.mu.Lock()
		if uc.session == nil {
			uc.mu.Unlock()
			return
		}
		uc.usedMu.Lock()
		idle := time.Since(uc.used) > upstreamIdle
		uc.usedMu.Unlock()
		if idle || uc.dead() {
			uc.close()
			uc.mu.Unlock()
			return
		}
		uc.mu.Unlock()
	}
}

// connect starts s for c and connects to it. Under uc.mu.
func (u *upstreams) connect(ctx context.Context, c Caller, uc *upConn) error {
	s := uc.s
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var tr mcp.Transport
	if s.transport == api.TransportHTTP {
		tr = &mcp.StreamableClientTransport{Endpoint: s.def.URL, HTTPClient: &http.Client{Transport: headerTransport{h: s.headers}}, DisableStandaloneSSE: true}
	} else {
		ts := s.def.Sandbox
		if ts == nil || ts.SandboxID == "" && ts.Pool == "" && ts.Spec == nil {
			w := *u.g.cfg.Workspace
			if ts != nil && ts.Reuse != "" {
				w.Reuse = ts.Reuse
			} else if w.SandboxID == "" {
				w.Reuse = api.ReuseTool
			}
			ts = &w
		} else if ts.Reuse == "" && ts.SandboxID == "" {
			t := *ts
			t.Reuse = api.ReuseTool
			ts = &t
		}
		p, err := u.g.placeFor(ctx, c, *ts, "server:"+s.name)
		if err != nil {
			return err
		}
		uc.sandboxID = p.id
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		uc.stderr = &tailBuffer{max: 4 << 10}
		// The server outlives this call: its exec's context is the tenant's, without the call's
		// cancellation; closing the connection cancels it.
		execCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		uc.stopExec, uc.ended = stop, make(chan struct{})
		no := false
		req := api.ExecRequest{Command: s.def.Command, Env: s.def.Env, Workdir: s.def.Workdir, CaptureOutput: &no}
		ended := uc.ended
		go func() {
			defer close(ended)
			res, err := u.g.m.Exec(execCtx, p.id, req, manager.Stream{Stdin: inR, Stdout: outW, Stderr: uc.stderr})
			if err == nil {
				err = fmt.Errorf("exit status %d", res.ExitCode)
			}
			outW.CloseWithError(fmt.Errorf("the server's process ended: %w", err))
			inR.Close()
		}()
		tr = &mcp.IOTransport{Reader: outR, Writer: inW}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "airlock", Version: "tools-gateway"}, nil)
	session, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return failed(uc.server, uc.stderr, "connect", err)
	}
	uc.session = session
	list, err := session.ListTools(ctx, nil)
	if err != nil {
		return failed(uc.server, uc.stderr, "list its tools", err)
	}
	uc.tools = map[string]*tool{}
	for _, mt := range list.Tools {
		if len(s.def.Tools) > 0 {
			if _, ok := matchAny(s.def.Tools, mt.Name); !ok {
				continue
			}
		}
		t, err := u.compile(s, mt)
		if err != nil {
			u.g.log.Warn("an upstream tool is not served", "server", s.name, "tool", mt.Name, "err", err)
			continue
		}
		uc.tools[mt.Name] = t
	}
	return nil
}

// failed explains a server that could not be started or spoken to, with the end of its stderr.
func failed(server string, stderr *tailBuffer, what string, err error) error {
	msg := fmt.Sprintf("tool server %s: %s: %v", server, what, err)
	if stderr != nil {
		if tail := strings.TrimSpace(stderr.String()); tail != "" {
			msg += "; its stderr ends: " + tail
		}
	}
	return errdefs.New(errdefs.ErrServiceUnavailable, "%s", msg)
}

// compile makes one of the server's tools a gateway tool.
func (u *upstreams) compile(s *server, mt *mcp.Tool) (*tool, error) {
	name := s.name + "__" + mt.Name
	if !validToolName(strings.Replace(name, "__", "_", 1)) || len(name) > 64 {
		return nil, fmt.Errorf("the name %q is not one MCP clients take (1-64 letters, digits, '_', '-')", name)
	}
	raw, _ := mt.InputSchema.(map[string]any)
	schema, err := CompileSchema(withoutMetaSchema(raw), u.g.cfg.Limits.MaxSchemaBytes)
	if err != nil {
		return nil, err
	}
	return &tool{name: name, description: mt.Description, source: api.ToolSourceMCP, backend: api.ToolBackendMCP, schema: schema,
		rate: s.rate, rateText: s.rateText, timeout: s.timeout, server: s, upstream: mt.Name}, nil
}

// withoutMetaSchema drops a $schema naming a draft the library cannot load offline (servers
// often name draft-07's http URL; the keywords they use read the same in 2020-12).
func withoutMetaSchema(raw map[string]any) map[string]any {
	if raw == nil {
		return nil
	}
	if _, ok := raw["$schema"]; !ok {
		return raw
	}
	c := make(map[string]any, len(raw))
	for k, v := range raw {
		if k != "$schema" {
			c[k] = v
		}
	}
	return c
}

// tools lists s's tools for c, starting it if needed.
func (u *upstreams) tools(ctx context.Context, c Caller, s *server) ([]*tool, error) {
	lv, err := u.conn(ctx, c, s)
	if err != nil {
		return nil, err
	}
	out := make([]*tool, 0, len(lv.tools))
	for _, t := range lv.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// tool returns s's tool name for c, or nil.
func (u *upstreams) tool(ctx context.Context, c Caller, s *server, name string) (*tool, error) {
	lv, err := u.conn(ctx, c, s)
	if err != nil {
		return nil, err
	}
	return lv.tools[name], nil
}

// call calls an upstream tool.
func (u *upstreams) call(ctx context.Context, inv *invocation) (api.ToolResult, error) {
	lv, err := u.conn(ctx, inv.caller, inv.tool.server)
	if err != nil {
		return api.ToolResult{}, err
	}
	inv.rec.sandboxID = lv.sandboxID
	res, err := lv.session.CallTool(ctx, &mcp.CallToolParams{Name: inv.tool.upstream, Arguments: orEmpty(inv.args)})
	if err != nil {
		if lv.uc.dead() || errors.Is(err, mcp.ErrConnectionClosed) {
			return api.ToolResult{}, failed(lv.uc.server, lv.stderr, "call "+inv.tool.upstream, err)
		}
		return errorResult("tool server %s: %v", lv.uc.server, err), nil // the server's answer: the model's to read
	}
	return fromMCP(res), nil
}

// fromMCP is an MCP result as the API's.
func fromMCP(res *mcp.CallToolResult) api.ToolResult {
	out := api.ToolResult{IsError: res.IsError, Content: []api.ToolContent{}}
	for _, c := range res.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			out.Content = append(out.Content, api.ToolContent{Type: api.ContentText, Text: x.Text})
		case *mcp.ImageContent:
			out.Content = append(out.Content, api.ToolContent{Type: api.ContentImage, Data: base64.StdEncoding.EncodeToString(x.Data), MimeType: x.MIMEType})
		case *mcp.AudioContent:
			out.Content = append(out.Content, api.ToolContent{Type: api.ContentAudio, Data: base64.StdEncoding.EncodeToString(x.Data), MimeType: x.MIMEType})
		case *mcp.ResourceLink:
			out.Content = append(out.Content, api.ToolContent{Type: api.ContentResource, URI: x.URI, MimeType: x.MIMEType, Text: x.Description})
		case *mcp.EmbeddedResource:
			if r := x.Resource; r != nil {
				ct := api.ToolContent{Type: api.ContentResource, URI: r.URI, MimeType: r.MIMEType, Text: r.Text}
				if len(r.Blob) > 0 {
					ct.Data = base64.StdEncoding.EncodeToString(r.Blob)
				}
				out.Content = append(out.Content, ct)
			}
		}
	}
	if m, ok := res.StructuredContent.(map[string]any); ok {
		out.StructuredContent = m
	}
	return out
}

// stop stops every connection of tenant ten to s (its definition changed or was removed).
func (u *upstreams) stop(ten string, s *server) {
	u.mu.Lock()
	var stop []*upConn
	for k, uc := range u.conns {
		if uc.ten == ten && uc.s == s {
			stop = append(stop, uc)
			delete(u.conns, k)
		}
	}
	u.mu.Unlock()
	for _, uc := range stop {
		uc.mu.Lock()
		uc.close()
		uc.mu.Unlock()
	}
}

// closeAll stops every server.
func (u *upstreams) closeAll() {
	u.mu.Lock()
	all := u.conns
	u.conns = map[string]*upConn{}
	u.mu.Unlock()
	for _, uc := range all {
		uc.mu.Lock()
		uc.close()
		uc.mu.Unlock()
	}
}

// headerTransport adds the operator's headers to a URL server's requests.
type headerTransport struct{ h map[string]string }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// tailBuffer keeps the last max bytes written (a server's stderr, for error messages).
type tailBuffer struct {
	max int

	mu  sync.Mutex // guards buf
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
