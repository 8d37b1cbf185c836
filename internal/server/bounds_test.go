package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/manager"
	airmetrics "github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// boundsAPI serves the API over a real manager and store (the fake level), counting refusals in
// mx, with the server's read and write timeouts (0: none) as the daemon sets them, and returns
// its URL, a key of tenant t1, the manager and the store.
func boundsAPI(t *testing.T, mx *airmetrics.Metrics, timeout time.Duration) (string, string, *manager.Manager, *store.Store) {
	t.Helper()
	st, keys := openStore(t, "t1")
	drivers := driver.NewRegistry()
	drivers.Register(drivertest.NewFake())
	log := slog.New(slog.DiscardHandler)
	m := manager.New(manager.Config{Metrics: mx, DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	srv := httptest.NewUnstartedServer(New(Config{Metrics: mx.Handler(), Unauthenticated: mx.Unauthenticated,
		ReadTimeout: timeout, WriteTimeout: timeout}, m, st, drivers, Images{}, log))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, keys[0], m, st
}

// adminKey creates an admin key of tenant in st.
func adminKey(t *testing.T, st *store.Store, tenant string) string {
	t.Helper()
	key, _, err := st.CreateAdminKey(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// openStore opens a store in a temporary directory, closed when t ends, with a key for each
// tenant, returned in order.
func openStore(t testing.TB, tenants ...string) (*store.Store, []string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "airlock.db"), store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := make([]string, len(tenants))
	for i, ten := range tenants {
		if keys[i], _, err = st.CreateKey(ctx, ten); err != nil {
			t.Fatal(err)
		}
	}
	return st, keys
}

// send makes one request with the given headers and returns its status.
func send(t *testing.T, method, url string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestUnauthenticatedIsNotStored: requests without a valid key are refused with 401, counted by
// reason and never stored, however large what they carry; a key holder's refusal still is.
func TestUnauthenticatedIsNotStored(t *testing.T) {
	mx := airmetrics.New()
	url, key, m, st := boundsAPI(t, mx, 0)
	big := strings.Repeat("A", 200<<10)
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		reason             string
	}{
		{"no key", "POST", "/api/v1/sandboxes", nil, "missing"},
		{"empty bearer", "DELETE", "/api/v1/sandboxes/sbx_1", map[string]string{"Authorization": "Bearer "}, "missing"},
		{"basic auth", "POST", "/api/v1/sandboxes/sbx_1/exec", map[string]string{"Authorization": "Basic dTpw"}, "missing"},
		{"unknown key", "POST", "/api/v1/sandboxes", map[string]string{"Authorization": "Bearer alk_nope"}, "invalid"},
		{"huge user agent", "PUT", "/api/v1/sandboxes/sbx_" + strings.Repeat("x", 4000) + "/network",
			map[string]string{"Authorization": "Bearer alk_nope", "User-Agent": big}, "invalid"},
		{"huge key", "POST", "/api/v1/webhooks", map[string]string{"Authorization": "Bearer " + big}, "invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if status := send(t, c.method, url+c.path, c.header); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
		})
	}
	// A key holder's refused change is recorded; it is also the barrier: once it is in the store,
	// anything recorded before it is too.
	if status := send(t, "POST", url+"/api/v1/sandboxes/sbx_nope/pause", map[string]string{"Authorization": "Bearer " + key}); status != http.StatusNotFound {
		t.Fatalf("pause of an unknown sandbox: %d, want 404", status)
	}
	recorded(t, m)
	rows, err := st.EventRows(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Tenant != "t1" || rows[0].Type != api.EventAPIRequest {
		t.Errorf("stored events: %+v, want only the key holder's api.request", rows)
	}
	fams := metricstest.Scrape(t, url+"/metrics")
	for reason, want := range map[string]float64{"missing": 3, "invalid": 3} {
		if got := fams.Value("airlock_api_unauthenticated_total", map[string]string{"reason": reason}); got != want {
			t.Errorf("airlock_api_unauthenticated_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestRecordedRequestIsCapped: a key holder's call is recorded, but what the client chose (path,
// user agent) is capped, with a mark that it was cut.
func TestRecordedRequestIsCapped(t *testing.T) {
	url, key, m, _ := boundsAPI(t, nil, 0)
	id := "sbx_" + strings.Repeat("y", 8000)
	ua := strings.Repeat("Mozilla/5.0 ", 20000)
	if status := send(t, "POST", url+"/api/v1/sandboxes/"+id+"/pause", map[string]string{"Authorization": "Bearer " + key, "User-Agent": ua}); status != http.StatusNotFound {
		t.Fatalf("status %d, want 404", status)
	}
	e := recorded(t, m)
	for _, c := range []struct {
		field  string
		prefix string
		max    int
	}{
		{"path", "/api/v1/sandboxes/sbx_yyy", 1 << 10},
		{"userAgent", "Mozilla/5.0 Mozilla", 256},
	} {
		got, _ := e.Data[c.field].(string)
		if !strings.HasPrefix(got, c.prefix) || len(got) > c.max+32 || !strings.Contains(got, "…[+") {
			t.Errorf("%s: %d bytes %.60q, want at most %d and cut", c.field, len(got), got, c.max)
		}
	}
	if len(e.Message) > 2<<10 {
		t.Errorf("message of %d bytes", len(e.Message))
	}
}

// recorded waits (up to 5 s) for tenant t1's one api.request event and returns it: a call is
// recorded just after its answer is sent.
func recorded(t *testing.T, m *manager.Manager) api.Event {
	t.Helper()
	ctx := tenant.With(context.Background(), "t1")
	for range 500 {
		page, err := m.Events(ctx, store.EventFilter{TypePrefix: api.EventAPIRequest})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 0 {
			return page.Events[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the call was not recorded within 5 s")
	return api.Event{}
}

// TestTimeoutsOfKeyHolders: with the server's read and write timeouts far shorter than the
// work, a key holder's long exec still gets its answer and a followed event stream still gets
// events after them; what stays bounded is progress: a key holder's body that stalls is cut.
func TestTimeoutsOfKeyHolders(t *testing.T) {
	const timeout = 300 * time.Millisecond
	url, key, _, _ := boundsAPI(t, nil, timeout)
	auth := map[string]string{"Authorization": "Bearer " + key}
	status, env := call(t, "POST", url+"/api/v1/sandboxes?wait=true", key, `{}`)
	var sb api.Sandbox
	if status != http.StatusCreated || json.Unmarshal(env.Data, &sb) != nil {
		t.Fatalf("create: %d %+v", status, env.Error)
	}

	// A followed stream outlives both timeouts: an event written after them arrives.
	req, _ := http.NewRequest("GET", url+"/api/v1/events?follow=true&type=exec.exited", nil)
	req.Header.Set("Authorization", auth["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: event") {
				got <- sc.Text()
				return
			}
		}
		got <- "end of stream: " + fmt.Sprint(sc.Err())
	}()

	// An exec longer than the write timeout gets its answer.
	if status, env := call(t, "POST", url+"/api/v1/sandboxes/"+sb.ID+"/exec", key, `{"command":"sleep 1s"}`); status != http.StatusOK {
		t.Errorf("exec of 1 s under a %v write timeout: %d %+v", timeout, status, env.Error)
	}
	select {
	case line := <-got:
		if line != "event: event" {
			t.Errorf("followed events: %s, want the exec's event", line)
		}
	case <-time.After(10 * time.Second):
		t.Error("no event on the followed stream within 10 s")
	}

	// A key holder's JSON body that stalls is cut after the read timeout, with a clear error.
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"comm", sb.ID, key)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // fails only on a closed conn, which the read says
	t0 := time.Now()
	answer, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	answer.Body.Close()
	if took := time.Since(t0); answer.StatusCode != http.StatusBadRequest || took > 5*time.Second {
		t.Errorf("stalled body: %s after %v, want 400 after about %v", answer.Status, took, timeout)
	}
}
