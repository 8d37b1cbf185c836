package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tools"
)

// toolsAPI serves the API with a tool gateway over the fake level (an exec prints the sandbox's
// environment) and returns its URL and keys: two of tenant t1, one of t2, an admin key.
type toolsRig struct {
	url                  string
	k1, k2, other, admin string
	keyID2               string
}

func newToolsAPI(t testing.TB, cfg tools.Config) toolsRig {
	t.Helper()
	st, keys := openStore(t, "t1", "t1", "t2")
	admin, _, err := st.CreateAdminKey(context.Background(), "ops")
	if err != nil {
		t.Fatal(err)
	}
	who, err := st.Authenticate(context.Background(), keys[1])
	if err != nil {
		t.Fatal(err)
	}
	drivers := driver.NewRegistry()
	drivers.Register(drivertest.NewFake())
	log := slog.New(slog.DiscardHandler)
	m := manager.New(manager.Config{DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	g, err := tools.New(context.Background(), cfg, m, st, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(New(Config{Tools: g, Version: "test"}, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	return toolsRig{url: srv.URL, k1: keys[0], k2: keys[1], other: keys[2], admin: admin, keyID2: who.KeyID}
}

func (r toolsRig) client(t testing.TB, key string) *client.Client {
	c, err := client.New(r.url, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var echoTool = api.ToolDefinition{Name: "greet", InputSchema: map[string]any{"type": "object", "required": []any{"who"},
	"properties": map[string]any{"who": map[string]any{"type": "string", "pattern": "^[a-z]+$"}}},
	Exec: &api.ExecBackend{Command: api.Command{"/bin/sh", "-c", "env"}}, RateLimit: "2/1h"}

// TestToolRoutes: the refusals of a call are their statuses and codes (with field, rule and
// Retry-After), a tenant's tools are its own, and the rules of who may define what hold.
func TestToolRoutes(t *testing.T) {
	r := newToolsAPI(t, tools.Config{})
	ctx := context.Background()
	c1, c2, other, admin := r.client(t, r.k1), r.client(t, r.k2), r.client(t, r.other), r.client(t, r.admin)

	ts, err := c1.Tools(ctx, client.ToolsOptions{})
	if err != nil || len(ts) != 5 {
		t.Fatalf("a new tenant has the five built-in tools: %+v, %v", ts, err)
	}
	if _, err := c1.PutTool(ctx, echoTool); err != nil {
		t.Fatal(err)
	}
	res, err := c1.CallTool(ctx, "greet", api.ToolCallRequest{Arguments: map[string]any{"who": "ann"}})
	if err != nil || res.IsError || res.EventID == "" || res.SandboxID == "" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	refusal := func(err error, status int, code, field string) *client.Error {
		t.Helper()
		e, ok := errors.AsType[*client.Error](err)
		if !ok || e.StatusCode != status || e.Code != code || field != "" && e.Field != field {
			t.Fatalf("want %d %s naming %q, got %v (%+v)", status, code, field, err, e)
		}
		return e
	}
	e := refusal(callErr(c1.CallTool(ctx, "greet", api.ToolCallRequest{Arguments: map[string]any{"who": "Ann!"}})), 400, api.CodeInvalidArguments, "/who")
	if e.Rule != "pattern" {
		t.Errorf("rule %q, want pattern", e.Rule)
	}
	if _, err := c1.CallTool(ctx, "greet", api.ToolCallRequest{Arguments: map[string]any{"who": "bob"}}); err != nil {
		t.Fatal(err)
	}
	e = refusal(callErr(c1.CallTool(ctx, "greet", api.ToolCallRequest{Arguments: map[string]any{"who": "cy"}})), 429, api.CodeRateLimited, "")
	if e.RetryAfter < 1000 || !strings.Contains(e.Rule, "rateLimit 2/1h") {
		t.Errorf("rate limited: Retry-After %d s, rule %q; want about half an hour, the tool's limit", e.RetryAfter, e.Rule)
	}
	// Each caller has its bucket: the other key of t1 may call it.
	if _, err := c2.CallTool(ctx, "greet", api.ToolCallRequest{Arguments: map[string]any{"who": "di"}}); err != nil {
		t.Errorf("another key's budget is its own: %v", err)
	}
	// Another tenant sees none of t1's tools.
	_ = refusal(callErr(other.CallTool(ctx, "greet", api.ToolCallRequest{})), 403, api.CodeToolNotAllowed, "")
	if _, err := other.Tool(ctx, "greet"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another tenant's tool: want 404, got %v", err)
	}
	if _, err := other.DeleteTool(ctx, "greet"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleting another tenant's tool: want 404, got %v", err)
	}

	// What a tenant may not define: the daemon's own egress, a built-in's name, a shell
	// placeholder, a URL server.
	daemonHTTP := api.ToolDefinition{Name: "fetch", HTTP: &api.HTTPBackend{URL: "http://127.0.0.1:1/x", Egress: api.ToolEgressDaemon}}
	if _, err := c1.PutTool(ctx, daemonHTTP); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a tenant's daemon egress: want 403, got %v", err)
	}
	if _, err := c1.PutTool(ctx, api.ToolDefinition{Name: "run_code", Exec: echoTool.Exec}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("a built-in's name: want 409, got %v", err)
	}
	shell := api.ToolDefinition{Name: "sh", Exec: &api.ExecBackend{Command: api.Shell("echo {{x}}")}}
	if _, err := c1.PutTool(ctx, shell); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("a placeholder in a shell script: want 400, got %v", err)
	}
	hostArg := api.ToolDefinition{Name: "h", HTTP: &api.HTTPBackend{URL: "http://{{host}}/x"}}
	if _, err := c1.PutTool(ctx, hostArg); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("a placeholder in the URL's host: want 400, got %v", err)
	}
	if _, err := c1.PutToolServer(ctx, api.ToolServer{Name: "up", URL: "http://127.0.0.1:1/mcp"}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a tenant's URL server: want 403, got %v", err)
	}
	bigSchema := api.ToolDefinition{Name: "big", InputSchema: map[string]any{"type": "object", "description": strings.Repeat("x", 70<<10)}, Exec: echoTool.Exec}
	if _, err := c1.PutTool(ctx, bigSchema); !errors.Is(err, client.ErrPayloadTooLarge) && !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("a schema over the limit: want 413 (or 400: the body's own cap), got %v", err)
	}

	// Policies: k1 may not bind itself whatever the call; it may bind k2, which then cannot
	// undo it; an admin key binds anyone.
	self := api.ToolPolicy{Name: "self", Allow: []string{"read_file"}}
	if _, err := c1.PutToolPolicy(ctx, self); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a tenant-wide policy from a tenant key binds that key: want 403, got %v", err)
	}
	narrow := api.ToolPolicy{Name: "k2", KeyID: r.keyID2, Allow: []string{"read_*"}, ToolsOnly: true}
	if _, err := c1.PutToolPolicy(ctx, narrow); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.DeleteToolPolicy(ctx, "k2", client.PolicyOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("k2 removing the policy that binds it: want 403, got %v", err)
	}
	_ = refusal(callErr(c2.CallTool(ctx, "greet", api.ToolCallRequest{Arguments: map[string]any{"who": "ann"}})), 403, api.CodeToolNotAllowed, "")
	if ts, _ := c2.Tools(ctx, client.ToolsOptions{}); len(ts) != 1 || ts[0].Name != "read_file" {
		t.Errorf("k2 lists only what it may call: %+v", ts)
	}
	// toolsOnly: the rest of the API is closed to k2.
	if _, err := c2.List(ctx, client.ListOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a toolsOnly key listing sandboxes: want 403, got %v", err)
	}
	if _, err := c1.List(ctx, client.ListOptions{}); err != nil {
		t.Errorf("k1 is not bound: %v", err)
	}
	if _, err := other.PutToolPolicy(ctx, api.ToolPolicy{Name: "x", Tenant: "t1", KeyID: r.keyID2}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a policy of another tenant with a tenant key: want 403, got %v", err)
	}
	if _, err := other.PutToolPolicy(ctx, api.ToolPolicy{Name: "x", KeyID: r.keyID2}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("another tenant's key: want 400 (no such key of t2), got %v", err)
	}
	ops := api.ToolPolicy{Name: "ops", Tenant: "t1", Deny: []string{"run_code"}}
	if _, err := admin.PutToolPolicy(ctx, ops); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.DeleteToolPolicy(ctx, "ops", client.PolicyOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a tenant key removing an admin's policy: want 403, got %v", err)
	}
	_ = refusal(callErr(c1.CallTool(ctx, "run_code", api.ToolCallRequest{Arguments: map[string]any{"code": "1"}})), 403, api.CodeToolNotAllowed, "")
	if ps, err := other.ToolPolicies(ctx, client.PolicyOptions{}); err != nil || len(ps) != 0 {
		t.Errorf("t2 sees none of t1's policies: %+v, %v", ps, err)
	}
	if ps, err := admin.ToolPolicies(ctx, client.PolicyOptions{}); err != nil || len(ps) != 2 {
		t.Errorf("an admin key sees every tenant's: %+v, %v", ps, err)
	}
}

func callErr(_ api.ToolResult, err error) error { return err }

// bearer adds a key to every request of an MCP client.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// TestMCPEndpoint: the Go MCP SDK's client over /mcp lists exactly the tools the key may call,
// calls one, and gets refusals as tool errors; the session is bound to its key.
func TestMCPEndpoint(t *testing.T) {
	r := newToolsAPI(t, tools.Config{Policies: []api.ToolPolicy{{Name: "base", Tenant: "t1", Allow: []string{"greet", "list_files"}}}})
	ctx := context.Background()
	if _, err := r.client(t, r.k1).PutTool(ctx, echoTool); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: r.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{r.k1, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "greet,list_files" {
		t.Errorf("tools/list: %v, want exactly greet,list_files", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"who": "ann"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %+v, %v", res, err)
	}
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	for _, c := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"greet", map[string]any{"who": "NO"}, []string{api.CodeInvalidArguments, "field: /who", "rule: pattern"}},
		{"run_code", map[string]any{"code": "1"}, []string{api.CodeToolNotAllowed}},
		{"greet", map[string]any{"who": "bob"}, nil},
		{"greet", map[string]any{"who": "cy"}, []string{api.CodeRateLimited, "retry after"}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: a refusal is a tool error, not a protocol error: %v", c.name, err)
		}
		if c.want == nil {
			if res.IsError {
				t.Errorf("%s: %s", c.name, text(res))
			}
			continue
		}
		for _, w := range c.want {
			if !res.IsError || !strings.Contains(text(res), w) {
				t.Errorf("%s %v: want a tool error saying %q, got %q", c.name, c.args, w, text(res))
			}
		}
	}

	// Another key cannot use the session.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.other)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another key on the session: status %d, want 403", resp.StatusCode)
	}
	// Without a key: 401, like every route.
	req, _ = http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env api.Response[json.RawMessage]
	_ = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || env.Error == nil {
		t.Errorf("no key: status %d %+v, want 401", resp.StatusCode, env.Error)
	}
}
