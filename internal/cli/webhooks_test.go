package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
)

func TestParseWebhookAdd(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want api.WebhookRequest
		json bool
		code int
		msg  string // in stderr, for a refusal
	}{
		{name: "URL only", args: []string{"https://hooks.example.com/a"}, want: api.WebhookRequest{URL: "https://hooks.example.com/a"}, code: -1},
		{name: "every flag, anywhere", args: []string{"--event", "limit.", "https://h.example.com", "--event", "exec.exited,sandbox.status", "--secret", "s3cr3t-s3cr3t-s3cr3t",
			"--description", "ci alerts", "--json"},
			want: api.WebhookRequest{URL: "https://h.example.com", Events: []string{"limit.", "exec.exited", "sandbox.status"}, Secret: "s3cr3t-s3cr3t-s3cr3t", Description: "ci alerts"},
			json: true, code: -1},
		{name: "no URL", args: []string{"--event", "limit."}, code: 2, msg: "want one URL"},
		{name: "two URLs", args: []string{"https://a.example.com", "https://b.example.com"}, code: 2, msg: "want one URL"},
		{name: "unknown flag", args: []string{"https://a.example.com", "--events", "x"}, code: 2, msg: "flag provided but not defined: --events"},
		{name: "help", args: []string{"--help"}, code: 0, msg: "usage: airlock webhooks add"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, stderr := newTestRemote("webhooks add")
			r.fs.Usage = func() { stderr.WriteString("usage: airlock webhooks add URL ...\n") }
			req, asJSON, code := parseWebhookAdd(r, c.args)
			if code != c.code || !strings.Contains(stderr.String(), c.msg) {
				t.Fatalf("code %d, stderr %q; want %d, %q", code, stderr, c.code, c.msg)
			}
			if code >= 0 {
				return
			}
			if !reflect.DeepEqual(req, c.want) || asJSON != c.json {
				t.Errorf("request %+v json=%v\nwant %+v json=%v", req, asJSON, c.want, c.json)
			}
		})
	}
}

func TestWebhookTables(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	writeWebhookTable(&b, []api.Webhook{
		{ID: "whk_1", URL: "https://h.example.com/a", Events: []string{"sandbox.", "limit."}, CreatedAt: now.Add(-3 * time.Hour), Delivered: 12, Failed: 1, Pending: 2},
		{ID: "whk_2", URL: "http://127.0.0.1:9000/", Events: []string{"*"}, CreatedAt: now.Add(-time.Minute), Dropped: 4},
	}, now)
	want := "" +
		"WEBHOOK   URL                       EVENTS            DELIVERED   FAILED   DROPPED   PENDING   CREATED\n" +
		"whk_1     https://h.example.com/a   sandbox.,limit.   12          1        0         2         3h\n" +
		"whk_2     http://127.0.0.1:9000/    *                 0           0        4         0         1m\n"
	if b.String() != want {
		t.Errorf("webhooks:\n%s\nwant:\n%s", b.String(), want)
	}

	next := now.Add(30 * time.Second)
	b.Reset()
	writeDeliveryTable(&b, []api.WebhookDelivery{
		{ID: "dlv_2", EventType: "limit.timeout", Status: api.DeliveryPending, Attempts: 2, ResponseStatus: 503, DurationMs: 12,
			Error: "HTTP 503", CreatedAt: now.Add(-10 * time.Second), NextAttemptAt: &next},
		{ID: "dlv_1", EventType: "sandbox.status", Status: api.DeliveryDelivered, Attempts: 1, ResponseStatus: 200, DurationMs: 3, CreatedAt: now.Add(-2 * time.Minute)},
		{ID: "dlv_0", EventType: "sandbox.status", Status: api.DeliveryDropped, CreatedAt: now.Add(-3 * time.Minute), Error: "dropped: queue full"},
	}, now)
	want = "" +
		"DELIVERY   EVENT            STATUS                   ATTEMPTS   HTTP   TOOK   CREATED   ERROR\n" +
		"dlv_2      limit.timeout    pending (retry in 30s)   2          503    12ms   10s       HTTP 503\n" +
		"dlv_1      sandbox.status   delivered                1          200    3ms    2m        -\n" +
		"dlv_0      sandbox.status   dropped                  0          -      -      3m        dropped: queue full\n"
	if b.String() != want {
		t.Errorf("deliveries:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestWebhooksVerbs runs the verbs against a fake daemon: the secret printed once, the test
// call's exit status, the daemon's fields told as flags.
func TestWebhooksVerbs(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		mu.Unlock()
		ok := func(v any) { _ = json.NewEncoder(w).Encode(api.Response[any]{OK: true, Data: v}) }
		switch r.Method + " " + r.URL.Path {
		case "POST /api/v1/webhooks":
			var req api.WebhookRequest
			if err := json.Unmarshal(body, &req); err != nil {
				t.Errorf("webhook request %s: %v", body, err)
			}
			if len(req.Events) > 0 && req.Events[0] == "Bad" {
				w.WriteHeader(400)
				_ = json.NewEncoder(w).Encode(api.Response[any]{Error: &api.Error{Code: api.CodeInvalidArgument, Field: "events[0]", Message: `"Bad": lowercase only`}})
				return
			}
			w.WriteHeader(201)
			ok(api.Webhook{ID: "whk_1", URL: req.URL, Events: []string{"sandbox.", "limit."}, Secret: "abcdef0123456789"})
		case "GET /api/v1/webhooks":
			ok([]api.Webhook{{ID: "whk_1", URL: "https://h.example.com", Events: []string{"*"}}})
		case "POST /api/v1/webhooks/whk_1/test":
			ok(api.WebhookDelivery{ID: "dlv_1", EventType: api.EventWebhookTest, Status: api.DeliveryDelivered, Attempts: 1, ResponseStatus: 204, DurationMs: 5})
		case "POST /api/v1/webhooks/whk_2/test":
			ok(api.WebhookDelivery{ID: "dlv_2", EventType: api.EventWebhookTest, Status: api.DeliveryFailed, Attempts: 1, ResponseStatus: 500, DurationMs: 5, Error: "HTTP 500: boom"})
		case "GET /api/v1/webhooks/whk_1/deliveries":
			ok([]api.WebhookDelivery{{ID: "dlv_1", EventType: "sandbox.status", Status: api.DeliveryDelivered}})
		case "DELETE /api/v1/webhooks/whk_1":
			ok(api.Webhook{ID: "whk_1"})
		default:
			w.WriteHeader(404)
			_ = json.NewEncoder(w).Encode(api.Response[any]{Error: &api.Error{Code: api.CodeNotFound, Message: "webhook whk_9: not found"}})
		}
	}))
	defer srv.Close()
	t.Setenv("AIRLOCK_HOST", srv.URL)
	for _, c := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // substrings
		sent           string // a substring of the request the daemon got
	}{
		{"add", []string{"webhooks", "add", "https://h.example.com/x", "--event", "limit."}, 0, "id:     whk_1\nsecret: abcdef0123456789\n", "shown only now",
			`POST /api/v1/webhooks {"url":"https://h.example.com/x","events":["limit."]}`},
		{"add --json", []string{"webhooks", "add", "--json", "https://h.example.com/x"}, 0, `"secret": "abcdef0123456789"`, "", ""},
		{"add refused names the flag", []string{"webhooks", "add", "https://h.example.com/x", "--event", "Bad"}, 1, "", `airlock: --event: "Bad": lowercase only`, ""},
		{"ls (the default)", []string{"webhooks"}, 0, "whk_1     https://h.example.com   *", "", "GET /api/v1/webhooks "},
		{"ls --json", []string{"webhooks", "ls", "--json"}, 0, `"id": "whk_1"`, "", ""},
		{"test delivered", []string{"webhooks", "test", "whk_1"}, 0, "dlv_1 webhook.test: delivered (HTTP 204, 5ms)\n", "", ""},
		{"test failed exits 1", []string{"webhooks", "test", "whk_2"}, 1, "dlv_2 webhook.test: failed (HTTP 500, 5ms): HTTP 500: boom\n", "", ""},
		{"deliveries", []string{"webhooks", "deliveries", "--limit", "5", "whk_1"}, 0, "dlv_1      sandbox.status", "", "GET /api/v1/webhooks/whk_1/deliveries?limit=5"},
		{"rm", []string{"webhooks", "rm", "whk_1"}, 0, "whk_1\n", "", "DELETE /api/v1/webhooks/whk_1"},
		{"inspect unknown", []string{"webhooks", "inspect", "whk_9"}, 1, "", "not found", ""},
		{"unknown subcommand", []string{"webhooks", "edit"}, 2, "", `unknown subcommand "edit"`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			code, out, errOut := airlockCLI(t, "", c.args...)
			if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, c.code, c.stdout, c.stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if c.sent != "" && !strings.Contains(strings.Join(seen, "\n"), c.sent) {
				t.Errorf("the daemon got %q, want %q", seen, c.sent)
			}
		})
	}
}
