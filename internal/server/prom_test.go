package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/manager"
	airmetrics "github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// TestPromMetrics wires the metrics as the daemon does (the manager times creates and execs, the
// sandbox and pool gauges come from it) over the fake level with a warm pool of one, makes a
// sandbox from the pool and one cold, runs two execs, and scrapes GET /metrics without a key: the
// text exposition, outside the JSON envelope, says so. Without metrics, /metrics answers 503.
func TestPromMetrics(t *testing.T) {
	ctx := context.Background()
	st, keys := openStore(t, "t1")
	key := keys[0]
	drivers := driver.NewRegistry()
	drivers.Register(drivertest.NewFake())
	log := slog.New(slog.DiscardHandler)
	mx := airmetrics.New()
	m := manager.New(manager.Config{Metrics: mx, DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	mx.SetSandboxSource(m.SandboxCounts)
	mx.SetPoolSource(m.Pools)
	if err := m.StartPools(ctx, []api.Pool{{Name: "warm", Spec: api.Spec{Resources: api.Resources{MemoryMB: 128}}, Size: 1}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{Metrics: mx.Handler()}, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, _ := m.Pool("warm"); p.Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill")
		}
	}

	create := func(body string) string {
		t.Helper()
		status, env := call(t, "POST", srv.URL+"/api/v1/sandboxes?wait=true", key, body)
		var sb api.Sandbox
		if status != http.StatusCreated || json.Unmarshal(env.Data, &sb) != nil {
			t.Fatalf("create %s: %d %+v", body, status, env.Error)
		}
		return sb.ID
	}
	claimed := create(`{"resources":{"memoryMb":128}}`)
	create(`{"resources":{"memoryMb":256}}`) // another shape: cold, stays ready
	for range 2 {
		if status, env := call(t, "POST", srv.URL+"/api/v1/sandboxes/"+claimed+"/exec", key, `{"command":"env"}`); status != http.StatusOK {
			t.Fatalf("exec: %d %+v", status, env.Error)
		}
	}
	// The control: a route that needs a key refuses a request without one.
	if status, _ := call(t, "GET", srv.URL+"/api/v1/capabilities", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("capabilities without a key: %d, want 401", status)
	}

	fams := metricstest.Scrape(t, srv.URL+"/metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"airlock_sandboxes", map[string]string{"status": "running", "level": "process"}, 1},
		{"airlock_sandboxes", map[string]string{"status": "ready", "level": "process"}, 1},
		{"airlock_sandboxes", map[string]string{"status": "paused", "level": "process"}, 0},
		{"airlock_pool_claims_total", map[string]string{"pool": "warm", "result": "hit"}, 1},
		{"airlock_pool_claims_total", map[string]string{"pool": "warm", "result": "miss"}, 0},
	} {
		if got := fams.Value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   uint64
	}{
		{"airlock_sandbox_create_seconds", map[string]string{"level": "process", "source": "pool"}, 1},
		{"airlock_sandbox_create_seconds", map[string]string{"level": "process", "source": "cold"}, 1},
		{"airlock_exec_seconds", map[string]string{"level": "process"}, 2},
	} {
		h := fams.Histogram(c.name, c.labels)
		if h == nil {
			t.Errorf("%s%v: no histogram", c.name, c.labels)
			continue
		}
		if got := h.GetSampleCount(); got != c.want {
			t.Errorf("%s%v count = %d, want %d", c.name, c.labels, got, c.want)
		}
	}
	if fams["airlock_pool_sandboxes"] == nil {
		t.Error("airlock_pool_sandboxes missing")
	}

	// A daemon without metrics answers 503, in the envelope.
	none := httptest.NewServer(New(Config{}, m, st, drivers, Images{}, log))
	t.Cleanup(none.Close)
	if status, env := call(t, "GET", none.URL+"/metrics", "", ""); status != http.StatusServiceUnavailable || env.OK || env.Error == nil {
		t.Errorf("/metrics without metrics: %d %+v, want 503", status, env.Error)
	}
}
