package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// hookReceiver is a webhook receiver on loopback that verifies every delivery with the secret
// of its path.
type hookReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	secrets map[string]string // by path
	got     map[string][]api.WebhookPayload
	bad     []error // deliveries whose signature or timestamp did not verify
	refuse  bool    // answer 503 to every delivery
	refused int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{secrets: map[string]string{}, got: map[string][]api.WebhookPayload{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.refuse {
			rc.refused++
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if err := client.VerifyWebhook(rc.secrets[r.URL.Path], r.Header, body, time.Minute, time.Now()); err != nil {
			rc.bad = append(rc.bad, err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p api.WebhookPayload
		if err := json.Unmarshal(body, &p); err != nil || p.Event.Type != r.Header.Get(api.WebhookEventHeader) {
			rc.bad = append(rc.bad, errors.New("payload does not match its headers: "+string(body)))
		}
		rc.got[r.URL.Path] = append(rc.got[r.URL.Path], p)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// setRefuse makes the receiver answer 503 (true) or take deliveries; it returns how many it
// refused so far.
func (rc *hookReceiver) setRefuse(refuse bool) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.refuse = refuse
	return rc.refused
}

// expect sets the secret deliveries to path are signed with.
func (rc *hookReceiver) expect(path, secret string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets[path] = secret
}

// payloads returns what path got, and every delivery that did not verify.
func (rc *hookReceiver) payloads(path string) ([]api.WebhookPayload, []error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]api.WebhookPayload(nil), rc.got[path]...), append([]error(nil), rc.bad...)
}

// TestWebhooks registers webhooks on a receiver on loopback (the daemon allows private
// networks), runs a sandbox through its life with an exec that hits its timeout, and checks
// that the receiver got the lifecycle and limit events, each signed and verified, in order; the
// test call; the delivery log; the CLI; another tenant's view.
func TestWebhooks(t *testing.T) {
	check := leakCheck(t)
	const secret = "e2e-webhook-secret-0123456789"
	rc := newHookReceiver(t)
	rc.expect("/airlock", secret)
	d, c, key := newDaemonConfig(t, `{`+processDefault+`, "webhooks":{"allowPrivateNetworks":true,"timeoutSeconds":5}}`)
	ctx := bg()

	w, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: rc.srv.URL + "/airlock", Secret: secret, Description: "e2e"})
	if err != nil || w.Secret != secret || strings.Join(w.Events, ",") != "sandbox.,limit." {
		t.Fatalf("create webhook: %+v, %v", w, err)
	}
	// One through the CLI, of exec.exited only, with a generated secret it prints once.
	r := d.cli(t, key, nil, "webhooks", "add", rc.srv.URL+"/cli", "--event", "exec.exited", "--description", "from the CLI")
	_, cliSecret, _ := strings.Cut(r.stdout, "secret: ")
	cliSecret = strings.TrimSpace(cliSecret)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "id:     whk_") || len(cliSecret) != 64 {
		t.Fatalf("airlock webhooks add: %+v", r)
	}
	rc.expect("/cli", cliSecret)

	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("sleep 5"), Timeout: 1})
	if err != nil || !res.TimedOut {
		t.Fatalf("exec past its timeout: %+v, %v", res, err)
	}
	if _, err := c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}

	// The lifecycle and the limit, in the order they happened.
	var got []api.WebhookPayload
	deadline := time.Now().Add(20 * time.Second)
	for {
		var bad []error
		got, bad = rc.payloads("/airlock")
		if len(bad) > 0 {
			t.Fatalf("deliveries that do not verify: %v", bad)
		}
		if hasStatus(got, sb.ID, api.StatusTerminated) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var seq int64
	var statuses []string
	var limits int
	for _, p := range got {
		e := p.Event
		if p.WebhookID != w.ID || e.SandboxID != sb.ID || !strings.HasPrefix(p.DeliveryID, "dlv_") {
			t.Errorf("delivery %+v: not of this webhook and sandbox", p)
		}
		if !strings.HasPrefix(e.Type, "sandbox.") && !strings.HasPrefix(e.Type, "limit.") {
			t.Errorf("event %s delivered to a webhook of sandbox. and limit.", e.Type)
		}
		if e.Seq <= seq {
			t.Errorf("event %s (seq %d) after seq %d: out of order", e.Type, e.Seq, seq)
		}
		seq = e.Seq
		switch {
		case e.Type == api.EventSandboxStatus:
			to, _ := e.Data["to"].(string)
			statuses = append(statuses, to)
		case e.Type == "limit.timeout" && e.ExecutionID == res.ExecutionID:
			limits++
		}
	}
	if s := " " + strings.Join(statuses, " "); !strings.Contains(s, " ready running") || !strings.HasSuffix(s, " terminated") || limits != 1 {
		t.Fatalf("receiver got statuses %q and %d limit.timeout events of the exec; all: %+v", s, limits, got)
	}

	// The test call, and the log with everything in it.
	tr, err := c.TestWebhook(ctx, w.ID)
	if err != nil || tr.Status != api.DeliveryDelivered || tr.ResponseStatus != http.StatusNoContent || tr.EventType != api.EventWebhookTest {
		t.Fatalf("test delivery: %+v, %v", tr, err)
	}
	if got, _ := rc.payloads("/airlock"); got[len(got)-1].Event.Type != api.EventWebhookTest {
		t.Errorf("the receiver did not get the test event last: %+v", got[len(got)-1])
	}
	dls, err := c.WebhookDeliveries(ctx, w.ID, 0)
	if err != nil || len(dls) != len(got)+1 || dls[0].ID != tr.ID {
		t.Fatalf("deliveries: %d (want %d, the test first), %v", len(dls), len(got)+1, err)
	}
	for _, dl := range dls {
		if dl.Status != api.DeliveryDelivered || dl.Attempts != 1 || dl.DeliveredAt == nil {
			t.Errorf("delivery %+v", dl)
		}
	}
	if h, err := c.Webhook(ctx, w.ID); err != nil || h.Delivered != int64(len(dls)) || h.Pending != 0 || h.Secret != "" {
		t.Errorf("webhook %+v, %v", h, err)
	}

	// The CLI's webhook got the exec's end only, signed with the secret the CLI printed.
	var cliGot []api.WebhookPayload
	for deadline := time.Now().Add(10 * time.Second); len(cliGot) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cliGot, _ = rc.payloads("/cli")
	}
	if got, bad := rc.payloads("/cli"); len(bad) > 0 || len(got) != 1 || got[0].Event.Type != api.EventExecExited || got[0].Event.ExecutionID != res.ExecutionID {
		t.Errorf("the CLI's webhook got %+v (%v), want the exec's exec.exited", got, bad)
	}
	r = d.cli(t, key, nil, "webhooks", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, w.ID) || !strings.Contains(r.stdout, "exec.exited") {
		t.Errorf("airlock webhooks ls: %+v", r)
	}
	r = d.cli(t, key, nil, "webhooks", "deliveries", w.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "limit.timeout") || !strings.Contains(r.stdout, "webhook.test") {
		t.Errorf("airlock webhooks deliveries: %+v", r)
	}
	if r = d.cli(t, key, nil, "webhooks", "test", w.ID); r.code != 0 || !strings.Contains(r.stdout, "delivered (HTTP 204") {
		t.Errorf("airlock webhooks test: %+v", r)
	}

	// Another tenant sees none of it.
	c2 := d.client(newKey(t, d.dataDir, "t2"))
	if _, err := c2.Webhook(ctx, w.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("t2 reads t1's webhook: %v", err)
	}
	if ws, err := c2.Webhooks(ctx); err != nil || len(ws) != 0 {
		t.Errorf("t2's webhooks: %+v, %v", ws, err)
	}
	if _, err := c.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	check()
}

func hasStatus(ps []api.WebhookPayload, id, status string) bool {
	for _, p := range ps {
		if p.Event.SandboxID == id && p.Event.Type == api.EventSandboxStatus && p.Event.Data["to"] == status {
			return true
		}
	}
	return false
}

// TestWebhooksSurviveRestart: deliveries pending when the daemon stops — one being retried, and
// the events of the stop itself (its sandboxes end) — are delivered by the restarted daemon.
func TestWebhooksSurviveRestart(t *testing.T) {
	const secret = "e2e-webhook-secret-restart"
	rc := newHookReceiver(t)
	rc.expect("/hook", secret)
	rc.setRefuse(true)
	dir := filepath.Join(t.TempDir(), "data")
	key := newKey(t, dir, "t1")
	cfg := filepath.Join(t.TempDir(), "airlock.json")
	if err := os.WriteFile(cfg, []byte(`{`+processDefault+`, "webhooks":{"allowPrivateNetworks":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir, "--config", cfg)
	c := d.client(key)
	ctx := bg()
	w, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: rc.srv.URL + "/hook", Secret: secret, Events: []string{"sandbox.status"}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); rc.setRefuse(true) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 10 s")
		}
	}
	dls, err := c.WebhookDeliveries(ctx, w.ID, 0)
	if err != nil || len(dls) == 0 || dls[len(dls)-1].Status != api.DeliveryPending || dls[len(dls)-1].ResponseStatus != 503 {
		t.Fatalf("deliveries while the receiver refuses: %+v, %v", dls, err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	rc.setRefuse(false)
	d2 := startDaemon(t, dir, "--config", cfg)
	c2 := d2.client(key)
	var got []api.WebhookPayload
	for deadline := time.Now().Add(20 * time.Second); !hasStatus(got, sb.ID, api.StatusTerminated); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the receiver got %+v", got)
		}
		var bad []error
		if got, bad = rc.payloads("/hook"); len(bad) > 0 {
			t.Fatalf("deliveries that do not verify: %v", bad)
		}
	}
	if got[0].Event.Data["to"] != api.StatusProvisioning {
		t.Errorf("first delivery after the restart: %+v, want the create's first event", got[0].Event)
	}
	dls, err = c2.WebhookDeliveries(ctx, w.ID, 0)
	if err != nil || len(dls) < len(got) {
		t.Fatalf("deliveries after the restart: %d, %v", len(dls), err)
	}
	first := dls[len(dls)-1]
	if first.Status != api.DeliveryDelivered || first.Attempts < 2 {
		t.Errorf("the delivery retried across the restart: %+v", first)
	}
}
