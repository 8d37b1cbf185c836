package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
	"github.com/airlockrun/airlock/internal/testutil"
)

// The tool gateway (docs/tools.md) end to end: seed 001's three examples against the built
// binary, an exec tool confined by its sandbox and an http tool through a sandbox's egress proxy
// (in the network world), and MCP clients nobody here wrote — the official TypeScript SDK over
// streamable HTTP and over stdio (airlock mcp) — with an upstream MCP server from npm running
// inside a sandbox behind the gateway. Every call is checked in the audit log and the metrics.

// seed001Config is the operator's tools of seed 001: send_email only to company.com, delete_file
// never under /system, search_web at most 10 calls per window (2 s here), and a policy whose
// allowlist leaves shutdown_server out.
const seed001Config = `{` + processDefault + `, "webhooks": {"allowPrivateNetworks": true, "timeoutSeconds": 5},
 "tools": {
  "tools": [
   {"name": "send_email", "tenants": ["*"], "description": "send an email",
    "inputSchema": {"type": "object", "required": ["to", "subject"], "additionalProperties": false, "properties": {
      "to": {"type": "string", "format": "email", "x-airlock-email-domains": ["company.com"]},
      "subject": {"type": "string"}, "body": {"type": "string", "x-airlock-sensitive": true}}},
    "exec": {"command": ["python3", "-c", "import json, sys; a = json.load(sys.stdin); print('sent to ' + a['to'])"]}},
   {"name": "delete_file", "tenants": ["*"],
    "inputSchema": {"type": "object", "required": ["path"], "properties": {
      "path": {"type": "string", "x-airlock-path-prefix": {"allow": ["/workspace", "/tmp"], "deny": ["/system"]}}}},
    "exec": {"command": ["rm", "-f", "--", "{{path}}"], "stdin": "none"}},
   {"name": "search_web", "tenants": ["*"], "rateLimit": "10/2s", "exec": {"command": ["echo", "results"], "stdin": "none"}},
   {"name": "shutdown_server", "tenants": ["*"], "exec": {"command": ["true"]}}
  ],
  "policies": [{"name": "agents", "tenant": "t1", "allow": ["send_email", "delete_file", "search_web", "run_code", "write_file", "list_files"]}]
 }}`

// toolCall calls tool name over plain HTTP and returns the status, the Retry-After header, the
// error (if refused) and the result.
func toolCall(t *testing.T, base, key, name string, args map[string]any) (int, string, *api.Error, api.ToolResult) {
	t.Helper()
	b, _ := json.Marshal(api.ToolCallRequest{Arguments: args})
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/tools/"+name+"/call", strings.NewReader(string(b)))
	req.Close = true
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env api.Response[api.ToolResult]
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("call %s: %d %s", name, resp.StatusCode, body)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), env.Error, env.Data
}

// TestToolsSeed001: seed 001's whitelist, parameter validation and rate limit through the
// daemon, the CLI and the audit log (events, replay, webhooks) and the metrics.
func TestToolsSeed001(t *testing.T) {
	testutil.RequiresRoot(t, "tools run in sandboxes")
	check := leakCheck(t)
	defer check()
	rc := newHookReceiver(t)
	rc.expect("/tools", "e2e-webhook-secret-0123456789")
	d, c, key := newDaemonConfig(t, seed001Config)
	defer func() {
		if err := d.stop(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := c.CreateWebhook(bg(), api.WebhookRequest{URL: rc.srv.URL + "/tools", Secret: "e2e-webhook-secret-0123456789", Events: []string{"tool."}}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, tool  string
		args        map[string]any
		status      int
		code, field string
		rule        string
		out         string
	}{
		{"not on the allowlist", "shutdown_server", nil, 403, api.CodeToolNotAllowed, "", "policy agents: not in allow", ""},
		{"to another domain", "send_email", map[string]any{"to": "bob@example.org", "subject": "hi"}, 400, api.CodeInvalidArguments, "/to", "x-airlock-email-domains", ""},
		{"to a malformed address", "send_email", map[string]any{"to": "bob.company.com", "subject": "hi"}, 400, api.CodeInvalidArguments, "/to", "format", ""},
		{"to company.com", "send_email", map[string]any{"to": "a@company.com", "subject": "hi", "body": "the plan"}, 200, "", "", "", "sent to a@company.com"},
		{"delete under /system", "delete_file", map[string]any{"path": "/system/x"}, 400, api.CodeInvalidArguments, "/path", "x-airlock-path-prefix", ""},
		{"delete via ..", "delete_file", map[string]any{"path": "/workspace/../system/x"}, 400, api.CodeInvalidArguments, "/path", "x-airlock-path-prefix", ""},
		{"delete in the workspace", "delete_file", map[string]any{"path": "/workspace/old.txt"}, 200, "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, e, res := toolCall(t, d.url, key, tc.tool, tc.args)
			if status != tc.status {
				t.Fatalf("status %d (%+v), want %d", status, e, tc.status)
			}
			if tc.code != "" {
				if e.Code != tc.code || e.Field != tc.field || !strings.Contains(e.Rule, tc.rule) {
					t.Errorf("refusal %+v, want code %s field %q rule %q", e, tc.code, tc.field, tc.rule)
				}
				return
			}
			if res.IsError || !strings.Contains(res.Content[0].Text, tc.out) || res.SandboxID == "" {
				t.Errorf("result %+v, want %q", res, tc.out)
			}
		})
	}

	// The 11th call within the window is refused with a Retry-After; after the window it runs.
	for i := range 10 {
		if status, _, e, _ := toolCall(t, d.url, key, "search_web", nil); status != 200 {
			t.Fatalf("search_web call %d: %d %+v", i+1, status, e)
		}
	}
	status, retry, e, _ := toolCall(t, d.url, key, "search_web", nil)
	if n, _ := strconv.Atoi(retry); status != 429 || e.Code != api.CodeRateLimited || n < 1 || n > 2 {
		t.Fatalf("11th search_web: %d Retry-After %q %+v, want 429 rate_limited within the window", status, retry, e)
	}
	time.Sleep(2 * time.Second)
	if status, _, e, _ := toolCall(t, d.url, key, "search_web", nil); status != 200 {
		t.Fatalf("search_web after the window: %d %+v", status, e)
	}

	// The CLI: a refusal is exit 1 naming the field and the rule; a result prints its text.
	r := d.cli(t, key, nil, "tools", "call", "send_email", "--arg", "to=x@evil.test", "--arg", "subject=s")
	if r.code != 1 || !strings.Contains(r.stderr, "/to") || !strings.Contains(r.stderr, "x-airlock-email-domains") {
		t.Errorf("airlock tools call (refused): %+v", r)
	}
	r = d.cli(t, key, nil, "tools", "call", "run_code", "--arg", "code=print(6*7)")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "42" {
		t.Errorf("airlock tools call run_code: %+v", r)
	}
	r = d.cli(t, key, nil, "tools", "ls")
	if r.code != 0 || strings.Contains(r.stdout, "shutdown_server") || !strings.Contains(r.stdout, "send_email") || strings.Contains(r.stdout, "http_fetch") {
		t.Errorf("airlock tools ls lists what the key may call: %+v", r)
	}

	// Every call is a tool.call event: 7 + 12 + the CLI's 2.
	var evs []api.Event
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := c.TenantEvents(bg(), client.EventOptions{Type: "tool.", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		evs = p.Events
		if len(evs) >= 21 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	count := map[string]int{}
	var sent api.Event
	for _, e := range evs {
		count[fmt.Sprint(e.Data["tool"], " ", e.Data["decision"], " ", e.Data["code"])]++
		if e.Data["tool"] == "send_email" && e.Data["decision"] == "allow" {
			sent = e
		}
	}
	for k, want := range map[string]int{
		"shutdown_server deny tool_not_allowed": 1, "send_email deny invalid_arguments": 3, "send_email allow <nil>": 1,
		"delete_file deny invalid_arguments": 2, "delete_file allow <nil>": 1, "search_web allow <nil>": 11,
		"search_web deny rate_limited": 1, "run_code allow <nil>": 1,
	} {
		if count[k] != want {
			t.Errorf("tool.call events %q: %d, want %d (all: %v)", k, count[k], want, count)
		}
	}
	if args, _ := sent.Data["arguments"].(map[string]any); args["body"] != "[redacted]" || sent.SandboxID == "" {
		t.Errorf("send_email's event: %+v, want the body redacted and the sandbox named", sent)
	}
	// The allowed call is in its sandbox's replay.
	rp, err := c.Replay(bg(), sent.SandboxID)
	if err != nil || !slices.ContainsFunc(rp.Entries, func(e api.ReplayEntry) bool { return e.Type == api.EventToolCall && e.Event.ID == sent.ID }) {
		t.Errorf("the replay of %s has no tool.call %s: %v", sent.SandboxID, sent.ID, err)
	}
	// And the webhook got them, signed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, bad := rc.payloads("/tools")
		if len(bad) > 0 {
			t.Fatalf("deliveries that do not verify: %v", bad)
		}
		if len(got) >= len(evs) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the webhook got %d tool.call events of %d", len(got), len(evs))
			break
		}
	}
	fams := metricstest.Scrape(t, d.url+"/metrics")
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"airlock_tool_calls_total", map[string]string{"tool": "search_web", "decision": "allow"}, 11},
		{"airlock_tool_calls_total", map[string]string{"tool": "search_web", "decision": "deny"}, 1},
		{"airlock_tool_denials_total", map[string]string{"tool": "search_web", "code": "rate_limited"}, 1},
		{"airlock_tool_denials_total", map[string]string{"tool": "send_email", "code": "invalid_arguments"}, 3},
		{"airlock_tool_denials_total", map[string]string{"tool": "shutdown_server", "code": "tool_not_allowed"}, 1},
	} {
		if got := fams.Value(w.name, w.labels); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
	if h := fams.Histogram("airlock_tool_call_seconds", map[string]string{"tool": "send_email", "decision": "allow"}); h == nil || h.GetSampleCount() != 1 {
		t.Errorf("airlock_tool_call_seconds{send_email, allow}: %v", h)
	}
	terminateToolSandboxes(t, c)
}

// terminateToolSandboxes ends the sandboxes the gateway made for the tenant of c.
func terminateToolSandboxes(t *testing.T, c *client.Client) {
	t.Helper()
	list, err := c.List(bg(), client.ListOptions{Status: []string{api.StatusReady, api.StatusRunning, api.StatusPaused}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		if sb.Metadata["airlock.tools.for"] != "" {
			terminate(bg(), t, c, sb.ID)
		}
	}
}

// TestToolsNetwork: tools that reach the network do it as a sandbox of the tenant. An exec tool
// whose command tries a host off its allowlist and the daemon host's files is refused by its
// sandbox, and the attempt is recorded; an http tool's request leaves through its sandbox's
// egress proxy, which adds the operator's credential the caller never sees; http_fetch to a host
// off the policy is refused by the proxy. The world's servers see only what was allowed.
func TestToolsNetwork(t *testing.T) {
	w := newWorld(t)
	hostSecret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostSecret, []byte("the daemon host's secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := w.c
	defer terminateToolSandboxes(t, c)

	peek := `import os, socket, urllib.request
for url in ("http://evil.test/", "http://203.0.113.11/"):
    try:
        urllib.request.urlopen(url, timeout=5).read()
        print("reached", url)
    except Exception as e:
        print("refused", url, type(e).__name__)
for path in (os.environ["HOST_FILE"], "` + w.dataDir + `/airlock.db", "/proc/1/root/etc/shadow"):
    try:
        open(path).read()
        print("read", path)
    except OSError as e:
        print("unreadable", path, type(e).__name__)
print(urllib.request.urlopen("http://allowed.test/ok", timeout=5).read().decode().strip())
`
	if _, err := c.PutTool(bg(), api.ToolDefinition{Name: "peek", Exec: &api.ExecBackend{Command: api.Command{"python3", "-c", peek}, Stdin: api.ToolStdinNone,
		Env: map[string]string{"HOST_FILE": hostSecret}},
		Sandbox: &api.ToolSandbox{Spec: &api.Spec{Resources: api.Resources{MemoryMB: 256, DiskMB: 256},
			Network: api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"allowed.test"}}}}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(bg(), "peek", api.ToolCallRequest{})
	if err != nil || res.IsError {
		t.Fatalf("peek: %+v, %v", res, err)
	}
	out := res.Content[0].Text
	mustContain(t, "peek's output", out, "refused http://evil.test/", "refused http://203.0.113.11/", "unreadable "+hostSecret,
		"unreadable "+w.dataDir+"/airlock.db", "server=allowed host=allowed.test")
	if strings.Contains(out, "reached") || strings.Contains(out, "read /") {
		t.Errorf("the tool's sandbox let it out:\n%s", out)
	}
	w.noHits(t, srvEvil, srvEvilTLS)
	w.waitEvent(t, res.SandboxID, "", evMatch{Type: api.EventNetworkConnect, Name: "evil.test", Decision: "deny", Rule: "not_in_allowlist"})
	w.waitEvent(t, res.SandboxID, "", evMatch{Type: api.EventNetworkConnect, Name: ipEvil, Decision: "deny", Rule: "ip_literal"})

	// An http tool: the operator's secret is added by the sandbox's proxy (over HTTPS to the
	// host), the caller never sees it.
	credsTool := api.ToolDefinition{Name: "creds_api", HTTP: &api.HTTPBackend{URL: "http://api.creds.test/v1/{{item}}", Query: map[string]string{"q": "{{q}}"}},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"item": map[string]any{"type": "string"}, "q": map[string]any{"type": "string"}}},
		Sandbox: &api.ToolSandbox{Spec: &api.Spec{Resources: api.Resources{MemoryMB: 64, DiskMB: 64}, Network: api.Network{EgressPolicy: api.EgressRestricted,
			AllowedDomains: []string{"api.creds.test"}, Credentials: []api.Credential{{Host: "api.creds.test", Header: "Authorization", Secret: "apikey"}}}}}}
	tl, err := c.PutTool(bg(), credsTool)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(tl); strings.Contains(string(b), w.secret) {
		t.Errorf("the tool's answer shows the secret: %s", b)
	}
	res, err = c.CallTool(bg(), "creds_api", api.ToolCallRequest{Arguments: map[string]any{"item": "a b/c", "q": "x&y"}})
	if err != nil || res.IsError {
		t.Fatalf("creds_api: %+v, %v", res, err)
	}
	mustContain(t, "creds_api's answer", res.Content[0].Text, "host=api.creds.test", "tls=yes", "auth=yes")
	if b, _ := json.Marshal(res); strings.Contains(string(b), w.secret) {
		t.Errorf("the result shows the secret: %s", b)
	}
	hits := w.hitsOf(srvAllowedTLS)
	if len(hits) == 0 || !hits[len(hits)-1].AuthOK || hits[len(hits)-1].Path != "/v1/a b/c" {
		t.Errorf("the world's server saw %+v; want the last request with the credential, the argument escaped in one path segment", hits)
	}
	w.waitEvent(t, res.SandboxID, "", evMatch{Type: api.EventNetworkConnect, Name: "api.creds.test", Decision: "allow", Rule: "credentials"})

	// http_fetch with a URL off the policy of the sandbox it leaves through.
	sbx := w.sandbox(t, restricted("allowed.test"))
	res, err = c.CallTool(bg(), api.ToolHTTPFetch, api.ToolCallRequest{Arguments: map[string]any{"url": "http://evil.test/steal"}, SandboxID: sbx})
	if err != nil || !res.IsError || res.SandboxID != sbx {
		t.Fatalf("http_fetch off the policy: %+v, %v; want a failed result from %s", res, err, sbx)
	}
	res, err = c.CallTool(bg(), api.ToolHTTPFetch, api.ToolCallRequest{Arguments: map[string]any{"url": "http://allowed.test/fetched"}, SandboxID: sbx})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "server=allowed") {
		t.Fatalf("http_fetch on the policy: %+v, %v", res, err)
	}
	w.noHits(t, srvEvil, srvEvilTLS)
	w.waitEvent(t, sbx, "", evMatch{Type: api.EventNetworkConnect, Name: "evil.test", Decision: "deny"})
	// The default workspace has no network: http_fetch there is refused, saying why.
	if _, err := c.CallTool(bg(), api.ToolHTTPFetch, api.ToolCallRequest{Arguments: map[string]any{"url": "http://allowed.test/"}}); !isStatus(err, http.StatusConflict) {
		t.Errorf("http_fetch in a workspace without a network: want 409, got %v", err)
	}
}

// mcpModules installs test/e2e/testdata/mcp's npm packages (pinned by its package-lock.json):
// the official TypeScript MCP SDK and the filesystem server. It skips without npm.
var mcpOnce struct {
	sync.Once
	dir string
	err error
}

func mcpModules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("SKIP: the MCP tests need node and npm (the official TypeScript SDK): %v", err)
	}
	mcpOnce.Do(func() {
		dir, err := filepath.Abs("testdata/mcp")
		if err != nil {
			mcpOnce.err = err
			return
		}
		mcpOnce.dir = dir
		if _, err := os.Stat(filepath.Join(dir, "node_modules/.package-lock.json")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			mcpOnce.err = fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
		}
	})
	if mcpOnce.err != nil {
		t.Fatal(mcpOnce.err)
	}
	return mcpOnce.dir
}

// mcpRun is what client.mjs printed.
type mcpRun struct {
	Server struct{ Name, Version string }
	Tools  []string
	Calls  []struct {
		Name              string
		IsError           bool
		Text              string
		StructuredContent map[string]any
		Error             string
	}
}

// runMCPClient runs client.mjs with args and the plan.
func runMCPClient(t *testing.T, dir string, env []string, plan any, args ...string) mcpRun {
	t.Helper()
	p, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(bg(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append(append([]string{"client.mjs"}, args...), string(p))...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs %s: %v\nstderr:\n%s", args[0], err, stderr.String())
	}
	var r mcpRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client.mjs printed %q: %v", out, err)
	}
	return r
}

// TestToolsMCP: the official TypeScript SDK's client, over streamable HTTP at /mcp and over stdio
// through `airlock mcp`, lists exactly the tools its key may call, runs print(6*7) with run_code,
// gets a validation error and a rate-limit refusal as tool errors, and uses the tools of an
// upstream filesystem server (npm's @modelcontextprotocol/server-filesystem) that runs inside a
// sandbox of the tenant, whose view of files is the sandbox's.
func TestToolsMCP(t *testing.T) {
	testutil.RequiresRoot(t, "tools run in sandboxes")
	dir := mcpModules(t)
	check := leakCheck(t)
	defer check()
	hostFile := filepath.Join(t.TempDir(), "host-only.txt")
	if err := os.WriteFile(hostFile, []byte("not for sandboxes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"defaults": map[string]any{"isolation": "process"},
		"volumes":  map[string]any{"mcp": map[string]any{"hostPath": filepath.Join(dir, "node_modules"), "readOnly": true, "tenants": []string{"*"}}},
		"tools": map[string]any{
			"tools": []any{map[string]any{"name": "notify", "tenants": []string{"*"}, "rateLimit": "1/1h",
				"inputSchema": map[string]any{"type": "object", "required": []string{"to"}, "properties": map[string]any{
					"to": map[string]any{"type": "string", "format": "email", "x-airlock-email-domains": []string{"company.com"}}}},
				"exec": map[string]any{"command": []string{"echo", "notified"}, "stdin": "none"}}},
			"servers": []any{map[string]any{"name": "fs", "tenants": []string{"*"},
				"command": []string{"node", "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/"},
				"sandbox": map[string]any{"spec": map[string]any{"resources": map[string]any{"memoryMb": 512, "diskMb": 256},
					"volumes": []any{map[string]any{"name": "mcp", "path": "/opt/mcp/node_modules"}}}}}},
			"policies": []any{map[string]any{"name": "agents", "tenant": "t1",
				"allow": []string{"run_code", "notify", "fs__list_directory", "fs__read_text_file", "fs__write_file"}}},
		},
	}
	b, _ := json.Marshal(cfg)
	d, c, key := newDaemonConfig(t, string(b))
	defer func() {
		if err := d.stop(); err != nil {
			t.Error(err)
		}
	}()
	key2 := newKey(t, d.dataDir, "t1") // stdio's own budget of notify
	plan := []map[string]any{
		{"name": "run_code", "arguments": map[string]any{"code": "print(6*7)"}},
		{"name": "notify", "arguments": map[string]any{"to": "bob@example.org"}},
		{"name": "notify", "arguments": map[string]any{"to": "a@company.com"}},
		{"name": "notify", "arguments": map[string]any{"to": "b@company.com"}},
		{"name": "read_file", "arguments": map[string]any{"path": "/etc/hostname"}},
		{"name": "fs__write_file", "arguments": map[string]any{"path": "/workspace/note.txt", "content": "written through the gateway"}},
		{"name": "fs__read_text_file", "arguments": map[string]any{"path": "/workspace/note.txt"}},
		{"name": "fs__read_text_file", "arguments": map[string]any{"path": hostFile}},
		{"name": "fs__list_directory", "arguments": map[string]any{"path": "/"}},
	}
	want := []string{"fs__list_directory", "fs__read_text_file", "fs__write_file", "notify", "run_code"}
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			var r mcpRun
			if transport == "http" {
				r = runMCPClient(t, dir, nil, plan, "http", d.url+"/mcp", key)
			} else {
				r = runMCPClient(t, dir, []string{"AIRLOCK_HOST=" + d.url, "AIRLOCK_TOKEN=" + key2}, plan, "stdio", airlockBin)
			}
			if r.Server.Name != "airlock" || !slices.Equal(r.Tools, want) {
				t.Errorf("server %+v lists %v, want exactly %v", r.Server, r.Tools, want)
			}
			if len(r.Calls) != len(plan) {
				t.Fatalf("calls: %+v", r.Calls)
			}
			expect := func(i int, isError bool, subs ...string) {
				t.Helper()
				cl := r.Calls[i]
				if cl.Error != "" || cl.IsError != isError {
					t.Errorf("call %d %s: %+v, want isError %v", i, cl.Name, cl, isError)
				}
				mustContain(t, fmt.Sprintf("call %d %s", i, cl.Name), cl.Text, subs...)
			}
			expect(0, false, "42")
			expect(1, true, api.CodeInvalidArguments, "field: /to", "rule: x-airlock-email-domains")
			expect(2, false, "notified")
			expect(3, true, api.CodeRateLimited, "retry after")
			expect(4, true, api.CodeToolNotAllowed)
			expect(5, false)
			expect(6, false, "written through the gateway")
			expect(7, true, "ENOENT")
			expect(8, false, "[DIR] workspace", "[DIR] opt")
			if strings.Contains(r.Calls[8].Text, "data") && strings.Contains(r.Calls[8].Text, "root") {
				t.Errorf("the server lists the host's root: %s", r.Calls[8].Text)
			}
		})
	}

	// Recorded: every call of both clients, the upstream's with its server and sandbox.
	p, err := c.TenantEvents(bg(), client.EventOptions{Type: "tool.", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	var upstream api.Event
	for _, e := range p.Events {
		count[fmt.Sprint(e.Data["tool"], " ", e.Data["decision"], " ", e.Data["code"])]++
		if e.Data["tool"] == "fs__write_file" {
			upstream = e
		}
	}
	for k, n := range map[string]int{"run_code allow <nil>": 2, "notify deny invalid_arguments": 2, "notify allow <nil>": 2, "notify deny rate_limited": 2,
		"read_file deny tool_not_allowed": 2, "fs__write_file allow <nil>": 2, "fs__read_text_file allow <nil>": 4, "fs__list_directory allow <nil>": 2} {
		if count[k] != n {
			t.Errorf("tool.call events %q: %d, want %d (all: %v)", k, count[k], n, count)
		}
	}
	if upstream.Data["server"] != "fs" || upstream.Data["source"] != api.ToolSourceMCP || upstream.SandboxID == "" {
		t.Errorf("an upstream tool's event: %+v", upstream)
	}
	fams := metricstest.Scrape(t, d.url+"/metrics")
	if got := fams.Value("airlock_tool_calls_total", map[string]string{"tool": "fs__write_file", "decision": "allow"}); got != 2 {
		t.Errorf("airlock_tool_calls_total{fs__write_file, allow} = %v, want 2", got)
	}
	if got := fams.Value("airlock_tool_denials_total", map[string]string{"tool": "notify", "code": "rate_limited"}); got != 2 {
		t.Errorf("airlock_tool_denials_total{notify, rate_limited} = %v, want 2", got)
	}
	terminateToolSandboxes(t, c)
}
