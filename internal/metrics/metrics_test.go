package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
)

// scrape serves h on loopback and scrapes it.
func scrape(t *testing.T, h http.Handler) metricstest.Families {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	return metricstest.Scrape(t, srv.URL+"/metrics")
}

func TestCounters(t *testing.T) {
	m := New()
	m.Observe(api.Event{Type: "limit.memory"})
	m.Observe(api.Event{Type: "limit.memory"})
	m.Observe(api.Event{Type: "limit.pids"})
	m.Observe(api.Event{Type: api.EventNetworkDNS, Data: map[string]any{"decision": "deny"}})
	m.Observe(api.Event{Type: api.EventNetworkConnect, Data: map[string]any{"decision": "allow"}})
	m.Observe(api.Event{Type: api.EventNetworkConnect, Data: map[string]any{"decision": "allow"}})
	m.Observe(api.Event{Type: api.EventNetworkPolicy})                                           // network, not egress
	m.Observe(api.Event{Type: api.EventNetworkConnect, Data: map[string]any{"decision": "odd"}}) // not a decision
	m.Observe(api.Event{Type: api.EventExecStarted})
	m.Observe(api.Event{Type: ""}) // nothing
	m.WebhookDelivery(WebhookDelivered)
	m.WebhookDelivery(WebhookDelivered)
	m.WebhookDelivery(WebhookRetried)
	m.AuditWritten(7)
	m.AuditWritten(3)
	m.AuditDropped(2)
	m.AuditDropped(0)
	m.AuditWritten(-1)
	m.Unauthenticated(UnauthenticatedMissing)
	m.Unauthenticated(UnauthenticatedMissing)
	m.Unauthenticated(UnauthenticatedInvalid)
	m.ConnectionRefused(RefusedClient)

	fams := scrape(t, m.Handler())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"airlock_limit_hits_total", map[string]string{"type": "limit.memory"}, 2},
		{"airlock_limit_hits_total", map[string]string{"type": "limit.pids"}, 1},
		{"airlock_egress_total", map[string]string{"kind": "dns", "decision": "deny"}, 1},
		{"airlock_egress_total", map[string]string{"kind": "dns", "decision": "allow"}, 0},
		{"airlock_egress_total", map[string]string{"kind": "connect", "decision": "allow"}, 2},
		{"airlock_egress_total", map[string]string{"kind": "connect", "decision": "deny"}, 0},
		{"airlock_events_total", map[string]string{"type_group": "limit"}, 3},
		{"airlock_events_total", map[string]string{"type_group": "network"}, 5},
		{"airlock_events_total", map[string]string{"type_group": "exec"}, 1},
		{"airlock_webhook_deliveries_total", map[string]string{"outcome": "delivered"}, 2},
		{"airlock_webhook_deliveries_total", map[string]string{"outcome": "retried"}, 1},
		{"airlock_webhook_deliveries_total", map[string]string{"outcome": "failed"}, 0},
		{"airlock_webhook_deliveries_total", map[string]string{"outcome": "dropped"}, 0},
		{"airlock_audit_events_written_total", nil, 10},
		{"airlock_audit_events_dropped_total", nil, 2},
		{"airlock_api_unauthenticated_total", map[string]string{"reason": "missing"}, 2},
		{"airlock_api_unauthenticated_total", map[string]string{"reason": "invalid"}, 1},
		{"airlock_api_connections_refused_total", map[string]string{"reason": "client"}, 1},
		{"airlock_api_connections_refused_total", map[string]string{"reason": "total"}, 0},
	}
	for _, tt := range tests {
		if got := fams.Value(tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if n := len(fams["airlock_egress_total"].GetMetric()); n != 4 {
		t.Errorf("airlock_egress_total has %d series, want 4 (dns|connect × allow|deny)", n)
	}
	if n := len(fams["airlock_limit_hits_total"].GetMetric()); n != 2 {
		t.Errorf("airlock_limit_hits_total has %d series, want 2", n)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("%s missing: the Go and process collectors are not registered", name)
		}
	}
}

func TestHistograms(t *testing.T) {
	m := New()
	m.ObserveCreate("process", SourceCold, time.Now().Add(-200*time.Millisecond), nil)
	m.ObserveCreate("process", SourceCold, time.Now(), nil)
	m.ObserveCreate("process", SourcePool, time.Now(), nil)
	m.ObserveCreate("container", SourceSnapshot, time.Now(), nil)
	m.ObserveCreate("container", SourceCold, time.Now(), errors.New("setup failed"))
	m.ObserveExec("process", time.Now().Add(-3*time.Second))
	m.ObserveExec("process", time.Now())
	m.ObserveExec("process", time.Now().Add(-9*time.Minute))

	fams := scrape(t, m.Handler())
	hist := func(name string, labels map[string]string) *dto.Histogram {
		t.Helper()
		h := fams.Histogram(name, labels)
		if h == nil {
			t.Fatalf("%s%v: no histogram", name, labels)
		}
		return h
	}
	counts := []struct {
		labels map[string]string
		want   uint64
	}{
		{map[string]string{"level": "process", "source": "cold"}, 2},
		{map[string]string{"level": "process", "source": "pool"}, 1},
		{map[string]string{"level": "container", "source": "snapshot"}, 1},
	}
	for _, c := range counts {
		if got := hist("airlock_sandbox_create_seconds", c.labels).GetSampleCount(); got != c.want {
			t.Errorf("create%v count = %d, want %d", c.labels, got, c.want)
		}
	}
	if fams.Series("airlock_sandbox_create_seconds", map[string]string{"level": "container", "source": "cold"}) != nil {
		t.Error("a failed create was observed as a duration")
	}
	if got := fams.Value("airlock_sandbox_create_errors_total", map[string]string{"level": "container"}); got != 1 {
		t.Errorf("create errors = %v, want 1", got)
	}
	if h := hist("airlock_sandbox_create_seconds", map[string]string{"level": "process", "source": "cold"}); h.GetSampleSum() < 0.2 {
		t.Errorf("create sum = %v, want ≥ 0.2 s", h.GetSampleSum())
	}

	e := hist("airlock_exec_seconds", map[string]string{"level": "process"})
	if e.GetSampleCount() != 3 {
		t.Errorf("exec count = %d, want 3", e.GetSampleCount())
	}
	if s := e.GetSampleSum(); s < 543 || s > 600 {
		t.Errorf("exec sum = %v, want about 543 s", s)
	}
	// Buckets from 1 ms to 10 min: the fast exec is in the first, the 9-minute one in the last.
	b := e.GetBucket()
	if b[len(b)-1].GetUpperBound() > 600 { // the parser keeps +Inf
		b = b[:len(b)-1]
	}
	if first, last := b[0], b[len(b)-1]; first.GetUpperBound() != 0.001 || last.GetUpperBound() != 600 {
		t.Errorf("exec buckets %v..%v, want 0.001..600", first.GetUpperBound(), last.GetUpperBound())
	}
	want := map[float64]uint64{600: 3, 300: 2, 5: 2, 2.5: 1} // 9 min, 3 s, and the fast one
	for _, bk := range b {
		if w, ok := want[bk.GetUpperBound()]; ok && bk.GetCumulativeCount() != w {
			t.Errorf("exec bucket le=%v: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), w)
		}
	}
}

func TestSources(t *testing.T) {
	m := New()
	fams := scrape(t, m.Handler())
	if fams["airlock_sandboxes"] != nil || fams["airlock_pool_sandboxes"] != nil || fams["airlock_api_connections"] != nil {
		t.Fatal("state series without a source")
	}

	counts := []SandboxCount{
		{Status: "ready", Level: "process", N: 2},
		{Status: "running", Level: "process", N: 1},
		{Status: "ready", Level: "container", N: 0},
		{Status: "ready", Level: "process", N: 1}, // a duplicate row adds up, not a broken scrape
	}
	calls := 0
	m.SetSandboxSource(func() []SandboxCount { calls++; return counts })
	pools := []api.PoolStatus{
		{Pool: api.Pool{Name: "py"}, Ready: 3, Warming: 1, Claims: 5, Misses: 2},
		{Pool: api.Pool{Name: "sh"}, Ready: 0, Warming: 2},
	}
	m.SetPoolSource(func() []api.PoolStatus { return pools })
	m.SetConnectionSource(func() int { return 7 })

	fams = scrape(t, m.Handler())
	if calls != 1 {
		t.Errorf("sandbox source called %d times per scrape, want 1", calls)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"airlock_sandboxes", map[string]string{"status": "ready", "level": "process"}, 3},
		{"airlock_sandboxes", map[string]string{"status": "running", "level": "process"}, 1},
		{"airlock_sandboxes", map[string]string{"status": "ready", "level": "container"}, 0},
		{"airlock_pool_sandboxes", map[string]string{"pool": "py", "state": "ready"}, 3},
		{"airlock_pool_sandboxes", map[string]string{"pool": "py", "state": "warming"}, 1},
		{"airlock_pool_sandboxes", map[string]string{"pool": "sh", "state": "warming"}, 2},
		{"airlock_pool_claims_total", map[string]string{"pool": "py", "result": "hit"}, 5},
		{"airlock_pool_claims_total", map[string]string{"pool": "py", "result": "miss"}, 2},
		{"airlock_pool_claims_total", map[string]string{"pool": "sh", "result": "hit"}, 0},
		{"airlock_api_connections", nil, 7},
	}
	for _, tt := range tests {
		if got := fams.Value(tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if typ := fams["airlock_pool_claims_total"].GetType(); typ != dto.MetricType_COUNTER {
		t.Errorf("airlock_pool_claims_total is a %v, want a counter", typ)
	}
	if typ := fams["airlock_sandboxes"].GetType(); typ != dto.MetricType_GAUGE {
		t.Errorf("airlock_sandboxes is a %v, want a gauge", typ)
	}

	// Read at scrape time: a change shows at the next scrape.
	counts = []SandboxCount{{Status: "paused", Level: "process", N: 4}}
	fams = scrape(t, m.Handler())
	if got := fams.Value("airlock_sandboxes", map[string]string{"status": "paused", "level": "process"}); got != 4 {
		t.Errorf("after the change: paused = %v, want 4", got)
	}
	if got := fams.Value("airlock_sandboxes", map[string]string{"status": "ready", "level": "process"}); got != -1 {
		t.Errorf("after the change: ready = %v, want no series", got)
	}
}

// TestNil: a nil *Metrics takes every call and its handler answers 503.
func TestNil(t *testing.T) {
	var m *Metrics
	m.SetSandboxSource(func() []SandboxCount { return nil })
	m.SetPoolSource(func() []api.PoolStatus { return nil })
	m.ObserveCreate("process", SourceCold, time.Now(), nil)
	m.ObserveCreate("process", SourceCold, time.Now(), errors.New("x"))
	m.ObserveExec("process", time.Now())
	m.Observe(api.Event{Type: "limit.memory"})
	m.WebhookDelivery(WebhookFailed)
	m.AuditWritten(1)
	m.AuditDropped(1)
	m.Unauthenticated(UnauthenticatedInvalid)
	m.ConnectionRefused(RefusedTotal)
	m.SetConnectionSource(func() int { return 0 })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("nil handler: status %d, want 503", rec.Code)
	}
}
