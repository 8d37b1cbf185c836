package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/store"
)

const secret = "0123456789abcdef-test-secret"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock.db")
	st, err := store.Open(context.Background(), path, store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// outcomes counts what OnDelivery was told.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(s string) { o.mu.Lock(); o.n[s]++; o.mu.Unlock() }
func (o *outcomes) get(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[s]
}

// start starts a dispatcher over st with test timings (loopback allowed unless cfg says
// otherwise through private=false) and closes it at the end of the test.
func start(t *testing.T, st *store.Store, cfg Config) (*Dispatcher, *outcomes) {
	t.Helper()
	o := &outcomes{n: map[string]int{}}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = 20*time.Millisecond, 50*time.Millisecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	cfg.OnDelivery = o.add
	d := New(st, cfg, nil)
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d, o
}

// received is one request a receiver got, with the verdict of client.VerifyWebhook.
type received struct {
	header  http.Header
	body    []byte
	payload api.WebhookPayload
	verr    error
}

// receiver is a webhook receiver on 127.0.0.1 that verifies every request with secret and
// answers with respond (200 when nil); n counts requests from 1.
type receiver struct {
	url     string
	mu      sync.Mutex
	got     []received
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := received{header: r.Header.Clone(), body: body, verr: client.VerifyWebhook(secret, r.Header, body, time.Minute, time.Now())}
		if err := json.Unmarshal(body, &g.payload); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		rc.mu.Lock()
		rc.got = append(rc.got, g)
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hook"
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// eventually fails the test unless cond becomes true within d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var seq int64

// event returns a tenant's event of type typ.
func event(tenant, typ string) store.TenantEvent {
	seq++
	return store.TenantEvent{Tenant: tenant, Event: api.Event{ID: fmt.Sprintf("evt_%d", seq), Seq: seq, Type: typ,
		Time: time.Now().UTC(), SandboxID: "sbx_1", Data: map[string]any{"from": "ready", "to": "running"}}}
}

func create(t *testing.T, d *Dispatcher, tenant string, req api.WebhookRequest) api.Webhook {
	t.Helper()
	if req.Secret == "" {
		req.Secret = secret
	}
	w, err := d.Create(context.Background(), tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func deliveries(t *testing.T, d *Dispatcher, tenant, id string) []api.WebhookDelivery {
	t.Helper()
	dls, err := d.Deliveries(context.Background(), tenant, id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return dls
}

// TestSignedDelivery: the receiver verifies every delivery with client.VerifyWebhook, and gets
// exactly the events the webhook selects, of its own tenant; the headers, the payload, the log
// and the counters say the same; a changed body, an old timestamp and another secret are refused.
func TestSignedDelivery(t *testing.T) {
	st, _ := openStore(t)
	d, o := start(t, st, Config{AllowPrivateNetworks: true})
	rc := newReceiver(t, nil)
	w := create(t, d, "t1", api.WebhookRequest{URL: rc.url, Description: "ci"})
	if w.Secret != secret || !strings.HasPrefix(w.ID, "whk_") || strings.Join(w.Events, ",") != "sandbox.,limit." {
		t.Fatalf("created %+v", w)
	}
	status, limit := event("t1", api.EventSandboxStatus), event("t1", "limit.memory")
	d.Publish([]store.TenantEvent{status, event("t1", api.EventExecStarted), event("t2", api.EventSandboxStatus), limit})
	eventually(t, 5*time.Second, "two deliveries", func() bool { return len(deliveredOnly(deliveries(t, d, "t1", w.ID))) == 2 })

	got := rc.requests()
	if len(got) != 2 {
		t.Fatalf("receiver got %d requests, want 2 (exec.started is not selected, t2's event is not t1's)", len(got))
	}
	for i, want := range []store.TenantEvent{status, limit} {
		g := got[i]
		if g.verr != nil {
			t.Errorf("delivery %d: signature: %v", i, g.verr)
		}
		p := g.payload
		if p.WebhookID != w.ID || !strings.HasPrefix(p.DeliveryID, "dlv_") || p.Event.ID != want.ID || p.Event.Seq != want.Seq ||
			p.Event.Type != want.Type || p.Event.Data["to"] != "running" {
			t.Errorf("delivery %d: payload %+v, want event %+v", i, p, want.Event)
		}
		h := g.header
		if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "airlock-webhook/1" || h.Get(api.WebhookIDHeader) != w.ID ||
			h.Get(api.WebhookDeliveryHeader) != p.DeliveryID || h.Get(api.WebhookEventHeader) != want.Type ||
			!strings.HasPrefix(h.Get(api.WebhookSignatureHeader), "v1=") {
			t.Errorf("delivery %d: headers %v", i, h)
		}
		ts, err := strconv.ParseInt(h.Get(api.WebhookTimestampHeader), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Second {
			t.Errorf("delivery %d: timestamp %q", i, h.Get(api.WebhookTimestampHeader))
		}
	}

	// What a receiver must refuse.
	g := got[0]
	tampered := bytes.Replace(g.body, []byte(`"running"`), []byte(`"stopped"`), 1)
	ts, _ := strconv.ParseInt(g.header.Get(api.WebhookTimestampHeader), 10, 64)
	replayed := g.header.Clone()
	for _, c := range []struct {
		name   string
		secret string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"as sent", secret, g.header, g.body, time.Unix(ts, 0), nil},
		{"changed body", secret, g.header, tampered, time.Unix(ts, 0), client.ErrWebhookSignature},
		{"another secret", "another-secret-of-16+", g.header, g.body, time.Unix(ts, 0), client.ErrWebhookSignature},
		{"replayed ten minutes later", secret, g.header, g.body, time.Unix(ts, 0).Add(10 * time.Minute), client.ErrWebhookTimestamp},
		{"timestamp from the future", secret, g.header, g.body, time.Unix(ts, 0).Add(-10 * time.Minute), client.ErrWebhookTimestamp},
		{"timestamp changed to now", secret, func() http.Header {
			replayed.Set(api.WebhookTimestampHeader, strconv.FormatInt(ts+600, 10))
			return replayed
		}(), g.body, time.Unix(ts+600, 0), client.ErrWebhookSignature},
		{"no signature", secret, http.Header{api.WebhookTimestampHeader: {strconv.FormatInt(ts, 10)}}, g.body, time.Unix(ts, 0), client.ErrWebhookSignature},
	} {
		err := client.VerifyWebhook(c.secret, c.header, c.body, time.Minute, c.now)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: VerifyWebhook = %v, want %v", c.name, err, c.want)
		}
	}

	dls := deliveries(t, d, "t1", w.ID)
	for _, dl := range dls {
		if dl.Status != api.DeliveryDelivered || dl.Attempts != 1 || dl.ResponseStatus != 200 || dl.DeliveredAt == nil || dl.NextAttemptAt != nil {
			t.Errorf("logged %+v", dl)
		}
	}
	if dls[0].EventID != limit.ID || dls[1].EventID != status.ID {
		t.Errorf("log not newest first: %s, %s", dls[0].EventID, dls[1].EventID)
	}
	if h, err := d.Get(context.Background(), "t1", w.ID); err != nil || h.Delivered != 2 || h.Failed != 0 || h.Pending != 0 || h.Secret != "" {
		t.Errorf("webhook %+v, %v (the secret is never returned again)", h, err)
	}
	if o.get(OutcomeDelivered) != 2 {
		t.Errorf("OnDelivery delivered %d times, want 2", o.get(OutcomeDelivered))
	}
}

func deliveredOnly(dls []api.WebhookDelivery) []api.WebhookDelivery {
	var out []api.WebhookDelivery
	for _, dl := range dls {
		if dl.Status == api.DeliveryDelivered {
			out = append(out, dl)
		}
	}
	return out
}

// TestRetries: a receiver that fails three times (503, then a timeout, then 429) gets the
// delivery a fourth time and takes it; every attempt is signed afresh and carries the same
// delivery ID. One that always fails gets MaxAttempts attempts, then the delivery fails.
func TestRetries(t *testing.T) {
	st, _ := openStore(t)
	d, o := start(t, st, Config{AllowPrivateNetworks: true, MaxAttempts: 5, Timeout: 300 * time.Millisecond})
	flaky := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			<-r.Context().Done() // no answer within the timeout
		case 3:
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	down := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database is down", http.StatusInternalServerError)
	})
	wf := create(t, d, "t1", api.WebhookRequest{URL: flaky.url})
	wd := create(t, d, "t1", api.WebhookRequest{URL: down.url})
	d.Publish([]store.TenantEvent{event("t1", api.EventSandboxStatus)})

	eventually(t, 10*time.Second, "the flaky receiver's delivery", func() bool {
		return len(deliveredOnly(deliveries(t, d, "t1", wf.ID))) == 1
	})
	got := flaky.requests()
	if len(got) != 4 {
		t.Fatalf("flaky receiver got %d requests, want 4", len(got))
	}
	for i, g := range got {
		if g.verr != nil || g.header.Get(api.WebhookDeliveryHeader) != got[0].header.Get(api.WebhookDeliveryHeader) {
			t.Errorf("attempt %d: signature %v, delivery %s", i+1, g.verr, g.header.Get(api.WebhookDeliveryHeader))
		}
	}
	if dl := deliveries(t, d, "t1", wf.ID)[0]; dl.Attempts != 4 || dl.Error != "" || dl.ResponseStatus != 200 {
		t.Errorf("flaky delivery %+v", dl)
	}

	eventually(t, 10*time.Second, "the dead receiver's delivery to fail", func() bool {
		dls := deliveries(t, d, "t1", wd.ID)
		return len(dls) == 1 && dls[0].Status == api.DeliveryFailed
	})
	dl := deliveries(t, d, "t1", wd.ID)[0]
	if dl.Attempts != 5 || dl.ResponseStatus != 500 || !strings.Contains(dl.Error, "HTTP 500: database is down (gave up after 5 attempts)") {
		t.Errorf("failed delivery %+v", dl)
	}
	if n := len(down.requests()); n != 5 {
		t.Errorf("dead receiver got %d requests, want 5", n)
	}
	if h, _ := d.Get(context.Background(), "t1", wd.ID); h.Failed != 1 || h.Delivered != 0 || h.Pending != 0 {
		t.Errorf("dead receiver's webhook %+v", h)
	}
	if o.get(OutcomeRetried) != 3+4 || o.get(OutcomeDelivered) != 1 || o.get(OutcomeFailed) != 1 {
		t.Errorf("outcomes %v", o.n)
	}
}

// TestRefusalsAreNotRetried: a 4xx other than 408 and 429, and a redirect (not followed), fail
// at the first attempt.
func TestRefusalsAreNotRetried(t *testing.T) {
	st, _ := openStore(t)
	d, _ := start(t, st, Config{AllowPrivateNetworks: true})
	target := newReceiver(t, nil)
	for _, c := range []struct {
		name    string
		respond func(n int, w http.ResponseWriter, r *http.Request)
		status  int
		err     string
	}{
		{"400", func(n int, w http.ResponseWriter, r *http.Request) { http.Error(w, "bad\npayload", 400) }, 400, "HTTP 400: bad payload"},
		{"401", func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }, 401, "HTTP 401"},
		{"410", func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(410) }, 410, "HTTP 410"},
		{"redirect", func(n int, w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target.url, http.StatusFound) },
			302, "redirects are not followed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := newReceiver(t, c.respond)
			w := create(t, d, "t1", api.WebhookRequest{URL: rc.url})
			d.Publish([]store.TenantEvent{event("t1", "limit.pids")})
			eventually(t, 5*time.Second, "the delivery to fail", func() bool {
				dls := deliveries(t, d, "t1", w.ID)
				return len(dls) == 1 && dls[0].Status == api.DeliveryFailed
			})
			time.Sleep(100 * time.Millisecond) // several backoffs: no retry may come
			dl := deliveries(t, d, "t1", w.ID)[0]
			if dl.Attempts != 1 || dl.ResponseStatus != c.status || !strings.Contains(dl.Error, c.err) || len(rc.requests()) != 1 {
				t.Errorf("delivery %+v after %d requests", dl, len(rc.requests()))
			}
		})
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect was followed (%d requests)", n)
	}
}

// TestHangingReceiver: a receiver that never answers stalls only its own webhook: Publish
// returns at once, another webhook of the same events gets each of them promptly, and the
// hanging attempt ends at the timeout and is retried.
func TestHangingReceiver(t *testing.T) {
	st, _ := openStore(t)
	d, _ := start(t, st, Config{AllowPrivateNetworks: true, Timeout: 1500 * time.Millisecond})
	release := make(chan struct{})
	hanging := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before the server closes (cleanups run last first)
	fast := newReceiver(t, nil)
	create(t, d, "t1", api.WebhookRequest{URL: hanging.url})
	wf := create(t, d, "t1", api.WebhookRequest{URL: fast.url})

	// Publish must take well under 10 ms; a blocked one would take the whole attempt timeout.
	// Two slow ones of 20 are forgiven to a loaded machine's scheduler, none past 500 ms.
	var slow []time.Duration
	for i := range 20 {
		ev := event("t1", api.EventSandboxStatus)
		t0 := time.Now()
		d.Publish([]store.TenantEvent{ev})
		if took := time.Since(t0); took > 10*time.Millisecond {
			slow = append(slow, took)
			if len(slow) > 2 || took > 500*time.Millisecond {
				t.Errorf("Publish took %v while a receiver hangs", slow)
			}
		}
		// The other webhook gets it well before the hanging attempt times out.
		eventually(t, time.Second, "the fast receiver's delivery", func() bool { return len(fast.requests()) == i+1 })
		if got := fast.requests()[i].payload.Event.ID; got != ev.ID {
			t.Fatalf("fast receiver got %s, want %s (in order)", got, ev.ID)
		}
	}
	if n := len(hanging.requests()); n != 1 {
		t.Errorf("hanging receiver got %d requests while its first hangs, want 1 (one at a time)", n)
	}
	if h, _ := d.Get(context.Background(), "t1", wf.ID); h.Delivered != 20 {
		t.Errorf("fast webhook %+v", h)
	}
	// The hanging attempt ends at the timeout and is retried.
	eventually(t, 5*time.Second, "a retry of the hanging delivery", func() bool { return len(hanging.requests()) >= 2 })

	// Close does not wait for the hanging receiver either.
	t0 := time.Now()
	if err := d.Close(context.Background()); err != nil || time.Since(t0) > time.Second {
		t.Errorf("Close: %v after %s", err, time.Since(t0))
	}
}

// TestDurable: deliveries a stopped dispatcher left pending — published and recorded at Close,
// or abandoned in flight — are sent, in order, by a new dispatcher on the same store.
func TestDurable(t *testing.T) {
	st, _ := openStore(t)
	var up sync.Once
	upCh := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-upCh:
		case <-r.Context().Done():
			w.WriteHeader(503)
		}
	})
	t.Cleanup(func() { up.Do(func() { close(upCh) }) })

	d1 := New(st, Config{AllowPrivateNetworks: true, BackoffBase: time.Hour}, nil)
	if err := d1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := create(t, d1, "t1", api.WebhookRequest{URL: rc.url})
	var evs []store.TenantEvent
	for range 5 {
		evs = append(evs, event("t1", api.EventSandboxStatus))
	}
	d1.Publish(evs[:3])
	eventually(t, 5*time.Second, "the first attempt", func() bool { return len(rc.requests()) == 1 })
	d1.Publish(evs[3:])
	if err := d1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	dls := deliveries(t, d1, "t1", w.ID)
	if len(dls) != 5 {
		t.Fatalf("after Close: %d deliveries logged, want 5", len(dls))
	}
	for _, dl := range dls {
		if dl.Status != api.DeliveryPending || dl.Attempts != 0 {
			t.Errorf("after Close: %+v (the abandoned attempt does not count)", dl)
		}
	}

	up.Do(func() { close(upCh) })
	d2, _ := start(t, st, Config{AllowPrivateNetworks: true})
	eventually(t, 5*time.Second, "the pending deliveries", func() bool { return len(deliveredOnly(deliveries(t, d2, "t1", w.ID))) == 5 })
	got := rc.requests()[1:] // the first is the abandoned attempt
	if len(got) != 5 {
		t.Fatalf("receiver got %d deliveries after the restart, want 5", len(got))
	}
	for i, g := range got {
		if g.verr != nil || g.payload.Event.ID != evs[i].ID {
			t.Errorf("delivery %d after the restart: %s (%v), want %s", i, g.payload.Event.ID, g.verr, evs[i].ID)
		}
	}
	if got[0].payload.DeliveryID != rc.requests()[0].payload.DeliveryID {
		t.Errorf("the abandoned delivery came back as %s, not %s", got[0].payload.DeliveryID, rc.requests()[0].payload.DeliveryID)
	}
}

// TestAddressPolicy: without AllowPrivateNetworks, loopback and private URLs are refused when
// registered (400 naming url and the configuration key) and, for a webhook registered when they
// were allowed, when dialled (the delivery fails, not retried, the receiver never reached).
// Metadata addresses are refused always.
func TestAddressPolicy(t *testing.T) {
	st, _ := openStore(t)
	open := New(st, Config{AllowPrivateNetworks: true}, nil)
	strict := New(st, Config{}, nil)
	for _, c := range []struct {
		url        string
		open, deny string // "" = accepted
	}{
		{"https://hooks.example.com/x", "", ""},
		{"http://93.184.215.14:8080/x", "", ""},
		{"http://127.0.0.1:9/x", "", "loopback address, which webhooks reach only when the daemon's webhooks.allowPrivateNetworks is set"},
		{"http://[::1]:9/x", "", "loopback"},
		{"http://localhost:9/x", "", "loopback"},
		{"http://api.localhost/x", "", "loopback"},
		{"http://10.1.2.3/x", "", "private"},
		{"http://192.168.1.1/x", "", "private"},
		{"http://[fd12::1]/x", "", "private"},
		{"http://100.64.1.1/x", "", "CGNAT"},
		{"http://169.254.1.1/x", "", "link-local"},
		{"http://[::ffff:127.0.0.1]/x", "", "loopback"},
		{"http://0.0.0.0:9/x", "", "0.0.0.0 is an unspecified address"},
		{"http://169.254.169.254/latest/meta-data", "cloud metadata", "cloud metadata"},
		{"http://[fd00:ec2::254]/", "cloud metadata", "cloud metadata"},
		{"http://100.100.100.200/", "cloud metadata", "cloud metadata"},
		{"http://[::ffff:169.254.169.254]/", "cloud metadata", "cloud metadata"},
	} {
		for _, x := range []struct {
			d    *Dispatcher
			want string
		}{{open, c.open}, {strict, c.deny}} {
			err := x.d.checkURL(c.url)
			fe, _ := errors.AsType[*errdefs.FieldError](err)
			if x.want == "" && err != nil || x.want != "" && (fe == nil || fe.Field != "url" || !strings.Contains(fe.Message, x.want)) {
				t.Errorf("%s (private allowed: %v): %v, want %q", c.url, x.d.cfg.AllowPrivateNetworks, err, x.want)
			}
		}
	}

	// At the dial: registered while allowed, delivered by a daemon that no longer allows it.
	rc := newReceiver(t, nil)
	d1, _ := start(t, st, Config{AllowPrivateNetworks: true})
	w := create(t, d1, "t1", api.WebhookRequest{URL: rc.url})
	d1.Close(context.Background())
	d2, _ := start(t, st, Config{})
	d2.Publish([]store.TenantEvent{event("t1", api.EventSandboxStatus)})
	eventually(t, 5*time.Second, "the delivery to fail", func() bool {
		dls := deliveries(t, d2, "t1", w.ID)
		return len(dls) == 1 && dls[0].Status == api.DeliveryFailed
	})
	dl := deliveries(t, d2, "t1", w.ID)[0]
	if dl.Attempts != 1 || !strings.Contains(dl.Error, "127.0.0.1 is a loopback address") || !strings.Contains(dl.Error, allowPrivateKey) {
		t.Errorf("delivery %+v", dl)
	}
	if tr, err := d2.Test(context.Background(), "t1", w.ID); err != nil || tr.Status != api.DeliveryFailed || !strings.Contains(tr.Error, "loopback") {
		t.Errorf("test delivery %+v, %v", tr, err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver on loopback got %d requests", n)
	}
}

// TestTestDelivery: Test sends a signed webhook.test event once, whatever the webhook selects,
// answers with the delivery and logs it; a refusal is a failed delivery, not retried.
func TestTestDelivery(t *testing.T) {
	st, _ := openStore(t)
	d, _ := start(t, st, Config{AllowPrivateNetworks: true})
	ok := newReceiver(t, nil)
	w := create(t, d, "t1", api.WebhookRequest{URL: ok.url, Events: []string{"exec.exited"}})
	dl, err := d.Test(context.Background(), "t1", w.ID)
	if err != nil || dl.Status != api.DeliveryDelivered || dl.Attempts != 1 || dl.ResponseStatus != 200 || dl.EventType != api.EventWebhookTest {
		t.Fatalf("test delivery %+v, %v", dl, err)
	}
	g := ok.requests()
	if len(g) != 1 || g[0].verr != nil || g[0].payload.Event.Type != api.EventWebhookTest || g[0].payload.DeliveryID != dl.ID {
		t.Fatalf("receiver got %+v", g)
	}
	if logged := deliveries(t, d, "t1", w.ID); len(logged) != 1 || logged[0].ID != dl.ID {
		t.Errorf("log %+v", logged)
	}

	bad := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", 503) })
	wb := create(t, d, "t1", api.WebhookRequest{URL: bad.url})
	dl, err = d.Test(context.Background(), "t1", wb.ID)
	if err != nil || dl.Status != api.DeliveryFailed || dl.Attempts != 1 || dl.ResponseStatus != 503 || dl.Error != "HTTP 503: nope" {
		t.Fatalf("failed test delivery %+v, %v", dl, err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(bad.requests()); n != 1 {
		t.Errorf("a test delivery was retried: %d requests", n)
	}
	if h, _ := d.Get(context.Background(), "t1", wb.ID); h.Failed != 1 || h.Pending != 0 {
		t.Errorf("webhook %+v", h)
	}
}

// TestTenancyAndLifecycle: another tenant's webhook is not found by any method; the quota; a
// deleted webhook's log goes and its events stop.
func TestTenancyAndLifecycle(t *testing.T) {
	st, _ := openStore(t)
	d, _ := start(t, st, Config{AllowPrivateNetworks: true, MaxWebhooksPerTenant: 3})
	rc := newReceiver(t, nil)
	w := create(t, d, "t1", api.WebhookRequest{URL: rc.url, Events: []string{"*"}})
	ctx := context.Background()
	for name, err := range map[string]error{
		"get":        second(d.Get(ctx, "t2", w.ID)),
		"delete":     second(d.Delete(ctx, "t2", w.ID)),
		"deliveries": second(d.Deliveries(ctx, "t2", w.ID, 0)),
		"test":       second(d.Test(ctx, "t2", w.ID)),
		"unknown":    second(d.Get(ctx, "t1", "whk_nope")),
	} {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	if ws, err := d.List(ctx, "t2"); err != nil || len(ws) != 0 {
		t.Errorf("t2's list: %+v, %v", ws, err)
	}
	create(t, d, "t1", api.WebhookRequest{URL: rc.url})
	create(t, d, "t1", api.WebhookRequest{URL: rc.url})
	if _, err := d.Create(ctx, "t1", api.WebhookRequest{URL: rc.url}); !errors.Is(err, errdefs.ErrQuota) || !strings.Contains(err.Error(), "at most 3 webhooks") {
		t.Errorf("fourth webhook: %v", err)
	}
	create(t, d, "t2", api.WebhookRequest{URL: rc.url}) // the quota is per tenant

	d.Publish([]store.TenantEvent{event("t1", "api.request")})
	eventually(t, 5*time.Second, "the * webhook's delivery", func() bool { return len(deliveredOnly(deliveries(t, d, "t1", w.ID))) == 1 })
	if _, err := d.Delete(ctx, "t1", w.ID); err != nil {
		t.Fatal(err)
	}
	n := len(rc.requests())
	d.Publish([]store.TenantEvent{event("t1", "api.request"), event("t1", api.EventSandboxStatus)})
	eventually(t, 5*time.Second, "the other webhooks' deliveries", func() bool { return len(rc.requests()) == n+2 })
	for _, g := range rc.requests()[n:] {
		if g.payload.WebhookID == w.ID || g.payload.Event.Type != api.EventSandboxStatus {
			t.Errorf("after the delete: %+v", g.payload)
		}
	}
	if got, err := st.WebhookDeliveries(ctx, w.ID, 100); err != nil || len(got) != 0 {
		t.Errorf("the deleted webhook's log: %d rows, %v", len(got), err)
	}
	if ws, _ := d.List(ctx, "t1"); len(ws) != 2 {
		t.Errorf("t1 has %d webhooks after the delete, want 2", len(ws))
	}
}

func second[T any](_ T, err error) error { return err }

// TestOverflow: a full queue drops (the first QueueSize are recorded as dropped, the rest only
// counted); a full backlog records new deliveries as dropped; nothing blocks.
func TestOverflow(t *testing.T) {
	st, _ := openStore(t)
	d, o := start(t, st, Config{AllowPrivateNetworks: true, QueueSize: 2, MaxPending: 3, Timeout: 5 * time.Second})
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	w := create(t, d, "t1", api.WebhookRequest{URL: rc.url})
	var evs []store.TenantEvent
	for range 10 {
		evs = append(evs, event("t1", api.EventSandboxStatus))
	}
	d.Publish(evs) // 2 queued, 2 in the overflow (recorded dropped), 6 lost
	eventually(t, 5*time.Second, "the first attempt", func() bool { return len(rc.requests()) == 1 })
	eventually(t, 5*time.Second, "the drops", func() bool { return o.get(OutcomeDropped) == 8 })
	h, _ := d.Get(context.Background(), "t1", w.ID)
	if h.Dropped != 2 || h.Pending != 2 {
		t.Errorf("after the overflow: %+v", h)
	}
	// Backlog: 2 pending, MaxPending 3: one more fits, the next are dropped.
	for range 3 {
		d.Publish([]store.TenantEvent{event("t1", api.EventSandboxStatus)})
		time.Sleep(20 * time.Millisecond) // let each be recorded
	}
	eventually(t, 5*time.Second, "the backlog drops", func() bool { h, _ = d.Get(context.Background(), "t1", w.ID); return h.Dropped == 4 })
	if h.Pending != 3 {
		t.Errorf("after the backlog: %+v", h)
	}
	var backlog int
	for _, dl := range deliveries(t, d, "t1", w.ID) {
		if dl.Status == api.DeliveryDropped && strings.Contains(dl.Error, "backlog was full (3 deliveries pending)") {
			backlog++
		}
	}
	if backlog != 2 {
		t.Errorf("%d deliveries dropped for the backlog, want 2", backlog)
	}
}

// TestLogIsBounded: a webhook keeps its LogSize newest finished deliveries; its counters keep
// counting.
func TestLogIsBounded(t *testing.T) {
	st, _ := openStore(t)
	d, _ := start(t, st, Config{AllowPrivateNetworks: true, LogSize: 5})
	rc := newReceiver(t, nil)
	w := create(t, d, "t1", api.WebhookRequest{URL: rc.url})
	for i := range 12 {
		d.Publish([]store.TenantEvent{event("t1", api.EventSandboxStatus)})
		eventually(t, 5*time.Second, "a delivery", func() bool {
			h, _ := d.Get(context.Background(), "t1", w.ID)
			return h.Delivered == int64(i+1)
		})
	}
	if n := len(deliveries(t, d, "t1", w.ID)); n != 5 {
		t.Errorf("%d deliveries logged, want LogSize 5", n)
	}
}

// TestValidation: a registration's fields, each refused with its name.
func TestValidation(t *testing.T) {
	d := New(nil, Config{AllowPrivateNetworks: true}, nil)
	ok := api.WebhookRequest{URL: "https://hooks.example.com/airlock"}
	for _, c := range []struct {
		name   string
		change func(r *api.WebhookRequest)
		field  string // "" = valid
		events []string
	}{
		{"defaults", func(r *api.WebhookRequest) {}, "", DefaultEvents},
		{"selectors normalized", func(r *api.WebhookRequest) { r.Events = []string{"sandbox.*", "exec.exited", "sandbox.", "limit."} }, "",
			[]string{"sandbox.", "exec.exited", "limit."}},
		{"all", func(r *api.WebhookRequest) { r.Events = []string{"*"} }, "", []string{"*"}},
		{"no URL", func(r *api.WebhookRequest) { r.URL = "" }, "url", nil},
		{"relative URL", func(r *api.WebhookRequest) { r.URL = "/hooks" }, "url", nil},
		{"ftp", func(r *api.WebhookRequest) { r.URL = "ftp://example.com/x" }, "url", nil},
		{"no host", func(r *api.WebhookRequest) { r.URL = "http:///x" }, "url", nil},
		{"opaque", func(r *api.WebhookRequest) { r.URL = "http:example.com" }, "url", nil},
		{"user info", func(r *api.WebhookRequest) { r.URL = "https://user:pw@example.com/x" }, "url", nil},
		{"bad port", func(r *api.WebhookRequest) { r.URL = "https://example.com:99999/x" }, "url", nil},
		{"not a URL", func(r *api.WebhookRequest) { r.URL = "http://exa mple.com/%zz" }, "url", nil},
		{"long URL", func(r *api.WebhookRequest) { r.URL = "https://example.com/" + strings.Repeat("a", MaxURLLen) }, "url", nil},
		{"empty selector", func(r *api.WebhookRequest) { r.Events = []string{"sandbox.", ""} }, "events[1]", nil},
		{"upper case", func(r *api.WebhookRequest) { r.Events = []string{"Sandbox.status"} }, "events[0]", nil},
		{"digit", func(r *api.WebhookRequest) { r.Events = []string{"limit.memory2"} }, "events[0]", nil},
		{"star inside", func(r *api.WebhookRequest) { r.Events = []string{"sand*.status"} }, "events[0]", nil},
		{"star without dot", func(r *api.WebhookRequest) { r.Events = []string{"sandbox*"} }, "events[0]", nil},
		{"dot first", func(r *api.WebhookRequest) { r.Events = []string{".status"} }, "events[0]", nil},
		{"double dot", func(r *api.WebhookRequest) { r.Events = []string{"sandbox..x"} }, "events[0]", nil},
		{"too many", func(r *api.WebhookRequest) { r.Events = make([]string, MaxSelectors+1) }, "events", nil},
		{"short secret", func(r *api.WebhookRequest) { r.Secret = "short" }, "secret", nil},
		{"long secret", func(r *api.WebhookRequest) { r.Secret = strings.Repeat("s", MaxSecretLen+1) }, "secret", nil},
		{"long description", func(r *api.WebhookRequest) { r.Description = strings.Repeat("é", MaxDescriptionLen+1) }, "description", nil},
		{"description of 256 runes", func(r *api.WebhookRequest) { r.Description = strings.Repeat("é", MaxDescriptionLen) }, "", DefaultEvents},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ok
			c.change(&r)
			got, err := d.checkRequest(r)
			if c.field == "" {
				if err != nil || strings.Join(got.Events, " ") != strings.Join(c.events, " ") {
					t.Errorf("got %+v, %v; want events %v", got.Events, err, c.events)
				}
				return
			}
			fe, isField := errors.AsType[*errdefs.FieldError](err)
			if !isField || fe.Field != c.field || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("got %v, want a 400 on %s", err, c.field)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		sel  []string
		typ  string
		want bool
	}{
		{DefaultEvents, "sandbox.status", true},
		{DefaultEvents, "sandbox.claimed", true},
		{DefaultEvents, "limit.timeout", true},
		{DefaultEvents, "exec.exited", false},
		{DefaultEvents, "network.dns", false},
		{DefaultEvents, "sandboxes.x", false},
		{[]string{"exec.exited"}, "exec.exited", true},
		{[]string{"exec.exited"}, "exec.exited.more", false},
		{[]string{"exec."}, "exec.files", true},
		{[]string{"*"}, "audit.pruned", true},
	} {
		if got := matches(c.sel, c.typ); got != c.want {
			t.Errorf("matches(%v, %s) = %v", c.sel, c.typ, got)
		}
	}
}

func TestBackoff(t *testing.T) {
	d := New(nil, Config{BackoffBase: time.Second, BackoffMax: time.Minute}, nil)
	for _, c := range []struct {
		attempts   int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 750 * time.Millisecond, 1250 * time.Millisecond},
		{2, 0, 2250 * time.Millisecond, 3750 * time.Millisecond},
		{3, 0, 6750 * time.Millisecond, 11250 * time.Millisecond},
		{10, 0, 45 * time.Second, 75 * time.Second},
		{1, 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{1, time.Hour, time.Minute, time.Minute},
	} {
		for range 20 {
			if b := d.backoff(c.attempts, c.retryAfter); b < c.lo || b > c.hi {
				t.Errorf("backoff(%d, %s) = %s, want in [%s, %s]", c.attempts, c.retryAfter, b, c.lo, c.hi)
			}
		}
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{"": 0, "7": 7 * time.Second, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second} {
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", h, got, want)
		}
	}
}
