package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlockrun/airlock/api"
)

// An http tool's request leaves through the egress proxy of a sandbox of the caller's tenant —
// the tool's own (by default one per tool, restricted to the URL's host) — so that the
// sandbox's policy decides where it may go (allowlist, DNS rebinding checks, blockLocalNetwork),
// its credentials are added by the proxy (for http:// URLs, sent on over HTTPS; the caller never
// sees them), and the connection is one of the sandbox's network events. Only the operator's
// tools may have the daemon send a request itself (egress daemon).

// runHTTP runs an http tool.
func (g *Gateway) runHTTP(ctx context.Context, inv *invocation) (api.ToolResult, error) {
	h := inv.tool.def.HTTP
	u, err := renderURL(h.URL, h.Query, inv.args)
	if err != nil {
		return api.ToolResult{}, err
	}
	method := h.Method
	if method == "" {
		method = http.MethodGet
	}
	var body []byte
	switch {
	case h.Body == "json" || h.Body == "" && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch):
		if body, err = json.Marshal(orEmpty(inv.args)); err != nil {
			return api.ToolResult{}, err
		}
	case h.Body == "none" || h.Body == "":
	default:
		body = []byte(fill(h.Body, inv.args, func(s string) string { return s }))
	}
	hdr := http.Header{}
	for k, v := range h.Headers {
		hdr.Set(k, fill(v, inv.args, stripBreaks))
	}
	if body != nil && hdr.Get("Content-Type") == "" {
		ct := "text/plain; charset=utf-8"
		if h.Body == "json" || h.Body == "" {
			ct = "application/json"
		}
		hdr.Set("Content-Type", ct)
	}
	proxy := ""
	if h.Egress != api.ToolEgressDaemon {
		ts := inv.tool.sandbox
		if ts == nil {
			ts = egressSandboxFor(u)
		}
		var release func()
		proxy, release, err = g.egressOf(ctx, inv, ts, "tool:"+inv.tool.name)
		if err != nil {
			return api.ToolResult{}, err
		}
		defer release()
	}
	return g.send(ctx, proxy, method, u, hdr, body)
}

// egressSandboxFor is an http tool's default sandbox: one per tool, whose policy reaches only the
// URL's host.
func egressSandboxFor(u *url.URL) *api.ToolSandbox {
	domain := u.Hostname()
	if p := u.Port(); p != "" && p != "80" && p != "443" {
		domain += ":" + p
	}
	return &api.ToolSandbox{Reuse: api.ReuseTool, Spec: &api.Spec{
		Resources: api.Resources{MemoryMB: 64, DiskMB: 64},
		Network:   api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{domain}},
		Timeout:   api.Timeout{IdleTimeoutSeconds: 600},
	}}
}

// egressOf resolves the sandbox a request leaves through and returns its proxy, with a release
// to call once the request is done.
func (g *Gateway) egressOf(ctx context.Context, inv *invocation, ts *api.ToolSandbox, scope string) (string, func(), error) {
	p, err := g.sandboxFor(ctx, inv, ts, scope)
	if err != nil {
		return "", nil, err
	}
	inv.rec.sandboxID = p.id
	proxy, done, err := g.m.EgressProxy(ctx, p.id)
	if err != nil {
		p.release()
		return "", nil, err
	}
	return proxy, func() { done(); p.release() }, nil
}

func stripBreaks(s string) string {
	return strings.NewReplacer("\r", "", "\n", "", "\x00", "").Replace(s)
}

// renderURL fills the URL's placeholders (path-escaped in the path, query-escaped in the query)
// and adds query's parameters.
func renderURL(raw string, query map[string]string, args map[string]any) (*url.URL, error) {
	base, q, _ := strings.Cut(raw, "?")
	i := strings.Index(base, "://")
	head, rest := base[:i+3], base[i+3:]
	host, p, hasPath := strings.Cut(rest, "/")
	s := head + host
	if hasPath {
		s += "/" + fill(p, args, url.PathEscape)
	}
	if q != "" {
		s += "?" + fill(q, args, url.QueryEscape)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("the tool's URL with these arguments: %w", err)
	}
	if len(query) > 0 {
		v := u.Query()
		for k, t := range query {
			v.Set(k, fill(t, args, func(s string) string { return s }))
		}
		u.RawQuery = v.Encode()
	}
	return u, nil
}

// send sends one request, through proxy (a sandbox's egress proxy) or, when proxy is "", from
// the daemon itself, and makes its answer a result.
func (g *Gateway) send(ctx context.Context, proxy, method string, u *url.URL, hdr http.Header, body []byte) (api.ToolResult, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return api.ToolResult{}, err
	}
	req.Header = hdr
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "airlock-tools")
	}
	resp, err := g.clients.get(proxy).Do(req)
	if err != nil {
		return errorResult("the request failed: %v", err), nil
	}
	defer resp.Body.Close()
	limit := g.cfg.Limits.MaxResultBytes
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return errorResult("reading the answer failed: %v", err), nil
	}
	cut := len(b) > limit
	if cut {
		b = b[:limit]
	}
	return httpResult(resp, b, cut), nil
}

// httpResult is an HTTP answer as a tool's result: its body as text (or base64 data for a binary
// one), an error for a status of 400 or more; structuredContent has the status, the content type
// and a JSON object body.
func httpResult(resp *http.Response, body []byte, cut bool) api.ToolResult {
	ct := resp.Header.Get("Content-Type")
	sc := map[string]any{"status": resp.StatusCode, "contentType": ct}
	if cut {
		sc["truncated"] = true
	}
	var obj map[string]any
	if mt, _, _ := mime.ParseMediaType(ct); strings.HasSuffix(mt, "json") && json.Unmarshal(body, &obj) == nil {
		sc["json"] = obj
	}
	res := api.ToolResult{IsError: resp.StatusCode >= 400, StructuredContent: sc}
	switch {
	case utf8.Valid(body):
		text := string(body)
		if res.IsError {
			text = fmt.Sprintf("HTTP %s\n%s", resp.Status, text)
		}
		res.Content = []api.ToolContent{{Type: api.ContentText, Text: text}}
	default:
		mt, _, _ := mime.ParseMediaType(ct)
		kind := api.ContentResource
		switch {
		case strings.HasPrefix(mt, "image/"):
			kind = api.ContentImage
		case strings.HasPrefix(mt, "audio/"):
			kind = api.ContentAudio
		}
		res.Content = []api.ToolContent{{Type: kind, Data: base64.StdEncoding.EncodeToString(body), MimeType: mt, URI: resp.Request.URL.String()}}
	}
	return res
}

// httpClients keeps one client per egress proxy (and one for the daemon's own requests), so that
// connections are reused across calls.
type httpClients struct {
	mu     sync.Mutex // guards byProxy
	byProx map[string]*http.Client
}

// maxClients bounds the clients kept; past it the idle ones are closed and forgotten.
const maxClients = 256

func newHTTPClients() *httpClients { return &httpClients{byProx: map[string]*http.Client{}} }

func (h *httpClients) get(proxy string) *http.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.byProx[proxy]; c != nil {
		return c
	}
	if len(h.byProx) >= maxClients {
		h.closeLocked()
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		ForceAttemptHTTP2:     proxy == "",
	}
	if proxy != "" {
		pu, err := url.Parse(proxy)
		if err == nil {
			tr.Proxy = http.ProxyURL(pu)
		}
	}
	c := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		// Through a proxy every hop is checked by the sandbox's policy; the daemon's own
		// requests (the operator's tools) follow a redirect only on the tool's own host, so that
		// an answer cannot steer the daemon elsewhere.
		if len(via) >= 5 || proxy == "" && req.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	h.byProx[proxy] = c
	return c
}

func (h *httpClients) closeLocked() {
	for k, c := range h.byProx {
		c.CloseIdleConnections()
		delete(h.byProx, k)
	}
}

func (h *httpClients) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeLocked()
}
