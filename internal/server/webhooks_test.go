package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/webhook"
)

// webhookAPI serves the API over a fresh store, with a webhook dispatcher (loopback allowed)
// when hooks is set, and returns its URL and keys of tenants t1 and t2.
func webhookAPI(t *testing.T, hooks bool) (url, key1, key2 string) {
	t.Helper()
	ctx := context.Background()
	st, keys := openStore(t, "t1", "t2")
	key1, key2 = keys[0], keys[1]
	log := slog.New(slog.DiscardHandler)
	var cfg Config
	if hooks {
		d := webhook.New(st, webhook.Config{AllowPrivateNetworks: true}, log)
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(context.Background()) })
		cfg.Webhooks = d
	}
	drivers := driver.NewRegistry()
	m := manager.New(manager.Config{DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	srv := httptest.NewServer(New(cfg, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	return srv.URL, key1, key2
}

// TestWebhookAPI drives the webhook routes: strict decoding and each field's refusal, create
// (201, the generated secret shown once), list, get, the test delivery (verified by the
// receiver), the delivery log, another tenant's view (404 everywhere), delete, the quota.
func TestWebhookAPI(t *testing.T) {
	url, key, key2 := webhookAPI(t, true)
	var (
		mu       sync.Mutex
		secret   string
		verified []error
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		verified = append(verified, client.VerifyWebhook(secret, r.Header, body, time.Minute, time.Now()))
		mu.Unlock()
	}))
	defer receiver.Close()
	var id string
	hook := func(check func(api.Webhook) bool) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var w api.Webhook
			if err := json.Unmarshal(data, &w); err != nil || !check(w) {
				t.Errorf("webhook %s (%v)", data, err)
			}
		}
	}
	other := func(method, path string, status int) apiStep {
		return apiStep{name: "t2: " + method + " " + path, check: func(t *testing.T, _ []byte) {
			if got, env := call(t, method, url+strings.ReplaceAll(path, "{id}", id), key2, ""); got != status {
				t.Errorf("t2: %s %s: %d %+v, want %d", method, path, got, env.Error, status)
			}
		}}
	}
	body := `{"url":"` + receiver.URL + `/in","description":"ci"}`
	runSteps(t, url, key, []apiStep{
		{name: "no body", method: "POST", path: "/api/v1/webhooks", status: 400, code: api.CodeInvalidArgument, field: "body"},
		{name: "unknown field", method: "POST", path: "/api/v1/webhooks", body: `{"url":"https://example.com","event":["x"]}`,
			status: 400, code: api.CodeInvalidArgument, field: "event"},
		{name: "case-mismatched key", method: "POST", path: "/api/v1/webhooks", body: `{"URL":"https://example.com"}`,
			status: 400, code: api.CodeInvalidArgument, field: "URL"},
		{name: "no url", method: "POST", path: "/api/v1/webhooks", body: `{}`, status: 400, code: api.CodeInvalidArgument, field: "url", msg: "required"},
		{name: "ftp", method: "POST", path: "/api/v1/webhooks", body: `{"url":"ftp://example.com/x"}`, status: 400, code: api.CodeInvalidArgument, field: "url"},
		{name: "metadata", method: "POST", path: "/api/v1/webhooks", body: `{"url":"http://169.254.169.254/latest"}`,
			status: 400, code: api.CodeInvalidArgument, field: "url", msg: "cloud metadata"},
		{name: "bad selector", method: "POST", path: "/api/v1/webhooks", body: `{"url":"https://example.com","events":["limit.","Exec"]}`,
			status: 400, code: api.CodeInvalidArgument, field: "events[1]"},
		{name: "short secret", method: "POST", path: "/api/v1/webhooks", body: `{"url":"https://example.com","secret":"abc"}`,
			status: 400, code: api.CodeInvalidArgument, field: "secret", msg: "16"},
		{name: "long description", method: "POST", path: "/api/v1/webhooks", body: `{"url":"https://example.com","description":"` + strings.Repeat("x", 257) + `"}`,
			status: 400, code: api.CodeInvalidArgument, field: "description"},
		{name: "create", method: "POST", path: "/api/v1/webhooks", body: body, status: 201, check: hook(func(w api.Webhook) bool {
			b, err := hex.DecodeString(w.Secret)
			id, secret = w.ID, w.Secret
			return strings.HasPrefix(w.ID, "whk_") && err == nil && len(b) == 32 && w.Description == "ci" &&
				strings.Join(w.Events, ",") == "sandbox.,limit." && w.URL == receiver.URL+"/in"
		})},
		{name: "list", method: "GET", path: "/api/v1/webhooks", status: 200, check: func(t *testing.T, data []byte) {
			var ws []api.Webhook
			if err := json.Unmarshal(data, &ws); err != nil || len(ws) != 1 || ws[0].ID != id || ws[0].Secret != "" || strings.Contains(string(data), secret) {
				t.Errorf("list %s (the secret is shown only once)", data)
			}
		}},
		{name: "get", method: "GET", path: "/api/v1/webhooks/{id}", status: 200, check: hook(func(w api.Webhook) bool {
			return w.ID == id && w.Secret == "" && w.Delivered == 0
		})},
		{name: "get unknown", method: "GET", path: "/api/v1/webhooks/whk_nope", status: 404, code: api.CodeNotFound},
		{name: "test", method: "POST", path: "/api/v1/webhooks/{id}/test", status: 200, check: func(t *testing.T, data []byte) {
			var d api.WebhookDelivery
			if err := json.Unmarshal(data, &d); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if d.Status != api.DeliveryDelivered || d.EventType != api.EventWebhookTest || d.WebhookID != id || len(verified) != 1 || verified[0] != nil {
				t.Errorf("test delivery %s, receiver's verdicts %v", data, verified)
			}
		}},
		{name: "counted", method: "GET", path: "/api/v1/webhooks/{id}", status: 200, check: hook(func(w api.Webhook) bool { return w.Delivered == 1 })},
		{name: "deliveries", method: "GET", path: "/api/v1/webhooks/{id}/deliveries?limit=10", status: 200, check: func(t *testing.T, data []byte) {
			var ds []api.WebhookDelivery
			if err := json.Unmarshal(data, &ds); err != nil || len(ds) != 1 || ds[0].EventType != api.EventWebhookTest || ds[0].Attempts != 1 || ds[0].ResponseStatus != 200 {
				t.Errorf("deliveries %s", data)
			}
		}},
		{name: "bad limit", method: "GET", path: "/api/v1/webhooks/{id}/deliveries?limit=x", status: 400, code: api.CodeInvalidArgument, field: "limit"},
		{name: "limit too large", method: "GET", path: "/api/v1/webhooks/{id}/deliveries?limit=5000", status: 400, code: api.CodeInvalidArgument, field: "limit"},
		other("GET", "/api/v1/webhooks/{id}", 404),
		other("GET", "/api/v1/webhooks/{id}/deliveries", 404),
		other("POST", "/api/v1/webhooks/{id}/test", 404),
		other("DELETE", "/api/v1/webhooks/{id}", 404),
		{name: "t2's list is empty", check: func(t *testing.T, _ []byte) {
			if _, env := call(t, "GET", url+"/api/v1/webhooks", key2, ""); string(env.Data) != "[]" {
				t.Errorf("t2's list: %s", env.Data)
			}
		}},
		{name: "still there after t2's delete", method: "GET", path: "/api/v1/webhooks/{id}", status: 200, check: hook(func(w api.Webhook) bool { return w.ID == id })},
		{name: "delete", method: "DELETE", path: "/api/v1/webhooks/{id}", status: 200, check: hook(func(w api.Webhook) bool { return w.ID == id && w.Delivered == 1 })},
		{name: "gone", method: "GET", path: "/api/v1/webhooks/{id}", status: 404, code: api.CodeNotFound},
		{name: "its log gone", method: "GET", path: "/api/v1/webhooks/{id}/deliveries", status: 404, code: api.CodeNotFound},
		{name: "fill the quota", check: func(t *testing.T, _ []byte) {
			for i := range webhook.MaxWebhooksPerTenant {
				if st, env := call(t, "POST", url+"/api/v1/webhooks", key, `{"url":"https://example.com/`+fmt.Sprint(i)+`"}`); st != 201 {
					t.Fatalf("webhook %d: %d %+v", i, st, env.Error)
				}
			}
		}},
		{name: "over the quota", method: "POST", path: "/api/v1/webhooks", body: body, status: 429, code: api.CodeQuotaExceeded, msg: "at most 20 webhooks"},
		{name: "capabilities", method: "GET", path: "/api/v1/capabilities", status: 200, check: func(t *testing.T, data []byte) {
			var c api.Capabilities
			if err := json.Unmarshal(data, &c); err != nil || !c.Features["webhooks"] {
				t.Errorf("capabilities %s: webhooks should be true", data)
			}
		}},
	}, func(s string) string { return strings.ReplaceAll(s, "{id}", id) })
}

// TestWebhookAPIWithoutDispatcher: every webhook route answers 503 on a daemon without one, and
// the capabilities say so.
func TestWebhookAPIWithoutDispatcher(t *testing.T) {
	url, key, _ := webhookAPI(t, false)
	var steps []apiStep
	for _, rt := range routes() {
		if !strings.HasPrefix(rt.path, "/api/v1/webhooks") {
			continue
		}
		path := strings.ReplaceAll(rt.path, "{webhookId}", "whk_x")
		body := ""
		if rt.doc.body != nil {
			body = `{"url":"https://example.com"}`
		}
		steps = append(steps, apiStep{name: rt.method + " " + rt.path, method: rt.method, path: path, body: body, status: 503, code: api.CodeUnavailable, msg: "webhooks are unavailable"})
	}
	if len(steps) != 6 {
		t.Fatalf("%d webhook routes, want 6", len(steps))
	}
	steps = append(steps, apiStep{name: "capabilities", method: "GET", path: "/api/v1/capabilities", status: 200, check: func(t *testing.T, data []byte) {
		var c api.Capabilities
		if err := json.Unmarshal(data, &c); err != nil || c.Features["webhooks"] {
			t.Errorf("capabilities %s: webhooks should be false", data)
		}
	}})
	runSteps(t, url, key, steps, func(s string) string { return s })
}

// TestWebhookOpenAPI: the webhook routes are in the document with their bodies, answers and
// the documented {webhookId}.
func TestWebhookOpenAPI(t *testing.T) {
	raw, err := json.Marshal(buildOpenAPI("test"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters  []struct{ Name, In, Description string }
			RequestBody map[string]any             `json:"requestBody"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path, status, data string
		body                       bool
	}{
		{"post", "/api/v1/webhooks", "201", "Webhook", true},
		{"get", "/api/v1/webhooks", "200", "Webhook", false},
		{"get", "/api/v1/webhooks/{webhookId}", "200", "Webhook", false},
		{"delete", "/api/v1/webhooks/{webhookId}", "200", "Webhook", false},
		{"get", "/api/v1/webhooks/{webhookId}/deliveries", "200", "WebhookDelivery", false},
		{"post", "/api/v1/webhooks/{webhookId}/test", "200", "WebhookDelivery", false},
	} {
		op, ok := doc.Paths[c.path][c.method]
		if !ok {
			t.Errorf("%s %s is not in the document", c.method, c.path)
			continue
		}
		if resp := op.Responses[c.status]; !strings.Contains(string(resp), `"#/components/schemas/`+c.data+`"`) {
			t.Errorf("%s %s: no %s answer of %s: %s", c.method, c.path, c.status, c.data, resp)
		}
		if (op.RequestBody != nil) != c.body {
			t.Errorf("%s %s: request body %v, want one: %v", c.method, c.path, op.RequestBody, c.body)
		}
		if strings.Contains(c.path, "{webhookId}") && !slices.ContainsFunc(op.Parameters, func(p struct{ Name, In, Description string }) bool {
			return p.Name == "webhookId" && p.In == "path" && strings.Contains(p.Description, "whk_")
		}) {
			t.Errorf("%s %s: {webhookId} undocumented: %+v", c.method, c.path, op.Parameters)
		}
	}
	for _, name := range []string{"WebhookRequest", "Webhook", "WebhookDelivery"} {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schema %s missing", name)
		}
	}
}
