package tools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a gateway over a real manager and store with the fake level: tools run in records of
// sandboxes (the fake's exec prints the sandbox's environment), enough for everything the gateway
// decides itself.
type rig struct {
	g   *Gateway
	m   *manager.Manager
	st  *store.Store
	ctx context.Context // tenant t1, key k1
}

func newRig(t testing.TB, cfg Config) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "airlock.db"), store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, k, err := st.CreateKey(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	drivers := driver.NewRegistry()
	drivers.Register(drivertest.NewFake())
	log := slog.New(slog.DiscardHandler)
	m := manager.New(manager.Config{DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	g, err := New(ctx, cfg, m, st, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return &rig{g: g, m: m, st: st, ctx: tenant.WithKey(tenant.With(ctx, "t1"), k.ID)}
}

// events returns the tenant's tool.call events, oldest first.
func (r *rig) events(t *testing.T) []api.Event {
	t.Helper()
	page, err := r.m.Events(r.ctx, store.EventFilter{TypePrefix: "tool.", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Events
}

func def(name, schema string, rate string) ConfigTool {
	var raw map[string]any
	if schema != "" {
		raw = mustRaw(schema)
	}
	return ConfigTool{Tenants: []string{"*"}, ToolDefinition: api.ToolDefinition{Name: name, InputSchema: raw, RateLimit: rate,
		Exec: &api.ExecBackend{Command: api.Command{"/bin/sh", "-c", "env"}}}}
}

// TestSeed001 is seed 001's three examples: a tool off the allowlist is refused; send_email to
// another domain or to a malformed address is refused naming /to, to a@company.com it runs;
// delete_file of /system/x is refused; the 11th call within the window is a 429 and succeeds
// again after it. Every call is a tool.call event with the decision and the rule.
func TestSeed001(t *testing.T) {
	r := newRig(t, Config{
		Tools: []ConfigTool{def("send_email", sendEmailSchema, ""), def("delete_file", deleteFileSchema, ""),
			def("search_web", "", "10/2s"), def("shutdown_server", "", "")},
		Policies: []api.ToolPolicy{{Name: "agents", Tenant: "*", Allow: []string{"send_email", "delete_file", "search_web", "run_code"}}},
	})
	call := func(name string, args map[string]any) (api.ToolResult, error) {
		return r.g.Call(r.ctx, name, api.ToolCallRequest{Arguments: args})
	}
	for _, c := range []struct {
		name        string
		tool        string
		args        map[string]any
		code, field string // "" code: runs
	}{
		{"a tool not on the allowlist", "shutdown_server", nil, api.CodeToolNotAllowed, ""},
		{"a tool that does not exist", "rm_rf", nil, api.CodeToolNotAllowed, ""},
		{"send_email to another domain", "send_email", map[string]any{"to": "bob@example.org", "subject": "hi"}, api.CodeInvalidArguments, "/to"},
		{"send_email to a malformed address", "send_email", map[string]any{"to": "bob(at)company.com", "subject": "hi"}, api.CodeInvalidArguments, "/to"},
		{"send_email to company.com", "send_email", map[string]any{"to": "a@company.com", "subject": "hi", "body": "the secret plan"}, "", ""},
		{"delete_file under /system", "delete_file", map[string]any{"path": "/system/x"}, api.CodeInvalidArguments, "/path"},
		{"delete_file in the workspace", "delete_file", map[string]any{"path": "/workspace/tmp.txt"}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := call(c.tool, c.args)
			if c.code == "" {
				if err != nil || res.IsError || res.EventID == "" || res.SandboxID == "" {
					t.Fatalf("want a result, got %+v, %v", res, err)
				}
				return
			}
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok || fe.Code != c.code || c.field != "" && fe.Field != c.field {
				t.Fatalf("want %s naming %q, got %v", c.code, c.field, err)
			}
		})
	}

	// Rate limit: 10 calls in the window, the 11th refused with a Retry-After, then a call
	// succeeds once the window has passed.
	for i := range 10 {
		if _, err := call("search_web", nil); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := call("search_web", nil)
	fe, ok := errors.AsType[*errdefs.FieldError](err)
	if !ok || fe.Code != api.CodeRateLimited || !errors.Is(err, errdefs.ErrQuota) || fe.RetryAfter <= 0 || fe.RetryAfter > 2*time.Second {
		t.Fatalf("11th call: want rate_limited with a Retry-After within the window, got %v (%+v)", err, fe)
	}
	time.Sleep(2 * time.Second)
	if _, err := call("search_web", nil); err != nil {
		t.Fatalf("after the window: %v", err)
	}

	// Every call above is an event: allowed ones with the rule that allowed them, refusals with
	// the code, the field, the rule; the sensitive body redacted.
	evs := r.events(t)
	if len(evs) != 7+12 {
		t.Fatalf("%d tool.call events, want 19", len(evs))
	}
	byTool := map[string][]api.Event{}
	for _, e := range evs {
		byTool[e.Data["tool"].(string)] = append(byTool[e.Data["tool"].(string)], e)
	}
	want := func(e api.Event, decision, code, field, rule string) {
		t.Helper()
		d := e.Data
		if d["decision"] != decision || code != "" && d["code"] != code || field != "" && d["field"] != field || !strings.Contains(d["rule"].(string), rule) {
			t.Errorf("event %s: %v; want decision %s code %q field %q rule %q", e.Message, d, decision, code, field, rule)
		}
		if !strings.HasPrefix(d["argsDigest"].(string), "sha256:") || d["keyId"] == "" {
			t.Errorf("event %s: no digest or key: %v", e.Message, d)
		}
	}
	want(byTool["shutdown_server"][0], "deny", api.CodeToolNotAllowed, "", "policy agents: not in allow")
	want(byTool["rm_rf"][0], "deny", api.CodeToolNotAllowed, "", "not_granted")
	want(byTool["send_email"][0], "deny", api.CodeInvalidArguments, "/to", KeywordEmailDomains)
	want(byTool["send_email"][1], "deny", api.CodeInvalidArguments, "/to", "format")
	want(byTool["send_email"][2], "allow", "", "", "policy agents: allow send_email")
	want(byTool["delete_file"][0], "deny", api.CodeInvalidArguments, "/path", KeywordPathPrefix)
	want(byTool["search_web"][10], "deny", api.CodeRateLimited, "", "tool search_web: rateLimit 10/2s")
	sent := byTool["send_email"][2]
	if args := sent.Data["arguments"].(map[string]any); args["body"] != Redacted || args["to"] != "a@company.com" {
		t.Errorf("allowed send_email's recorded arguments %v: want the body redacted, the rest as sent", args)
	}
	if sent.SandboxID == "" || sent.Data["resultBytes"] == nil {
		t.Errorf("an allowed call's event names its sandbox and result size: %+v", sent)
	}
}

func mustRaw(js string) map[string]any {
	var raw map[string]any
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		panic(err)
	}
	return raw
}
