// Package metrics is the daemon's Prometheus exposition, served at GET /metrics (no key needed,
// like /healthz). It exports what an operator alerts and plans on, daemon-wide and without any
// tenant's data in a label: how many sandboxes exist per status and level, how long creates and
// execs take, which limits are hit, what egress is allowed and denied, how full the warm pools are
// and how often a create finds them ready, and whether the record (audit log, webhooks) keeps up.
//
// A Metrics has its own registry, so nothing else in the process (and no package global) adds to
// what is scraped. Counters and histograms are updated by the code that sees the thing happen;
// gauges of state (sandboxes, pools) are read from sources set by the daemon, at scrape time, so
// they can never drift from the manager's own view. Every method is a no-op on a nil *Metrics, so
// tests and tools pass nil.
package metrics

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockrun/airlock/api"
)

// Create sources: how a sandbox came to be (airlock_sandbox_create_seconds{source}).
const (
	SourceCold     = "cold"     // created by its level from nothing
	SourcePool     = "pool"     // claimed from a warm pool
	SourceSnapshot = "snapshot" // created from a snapshot (fromSnapshot, fork)
)

// Webhook delivery outcomes (airlock_webhook_deliveries_total{outcome}).
const (
	WebhookDelivered = "delivered" // the receiver answered 2xx
	WebhookRetried   = "retried"   // an attempt failed and another one is scheduled
	WebhookFailed    = "failed"    // the last attempt failed; the delivery is given up
	WebhookDropped   = "dropped"   // never attempted: the dispatcher's queue was full
)

// SandboxCount is how many sandboxes have one status and isolation level.
type SandboxCount struct {
	Status, Level string
	N             int
}

// createBuckets span a warm-pool claim (milliseconds) to a cold create that pulls nothing but
// starts a gVisor sandbox under load (tens of seconds); creates are bounded at 60 s.
var createBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// execBuckets span 1 ms (true, echo) to 10 minutes (a long build or test run).
var execBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Metrics is the daemon's set of metrics. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	createSeconds *prometheus.HistogramVec // level, source
	createErrors  *prometheus.CounterVec   // level
	execSeconds   *prometheus.HistogramVec // level
	limitHits     *prometheus.CounterVec   // type
	egress        *prometheus.CounterVec   // kind, decision
	events        *prometheus.CounterVec   // type_group
	webhooks      *prometheus.CounterVec   // outcome
	auditWritten  prometheus.Counter
	auditDropped  prometheus.Counter
	unauthn       *prometheus.CounterVec // reason
	rateLimited   prometheus.Counter
	connRefused   *prometheus.CounterVec // reason
	storeDegraded prometheus.Gauge
	storeOnsets   prometheus.Counter
	tools         toolMetrics

	state *stateCollector
}

// New returns the metrics with their own registry, which also has the Go runtime's and this
// process's collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		createSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_sandbox_create_seconds",
			Help:    "Time from a create request to its sandbox being ready, by level and source (cold, pool, snapshot).",
			Buckets: createBuckets,
		}, []string{"level", "source"}),
		createErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_sandbox_create_errors_total",
			Help: "Creates that were admitted (valid, within quota) but failed to make a sandbox, by level.",
		}, []string{"level"}),
		execSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_exec_seconds",
			Help:    "Round trip of an exec through the API (sync, interactive, compatibility), by level.",
			Buckets: execBuckets,
		}, []string{"level"}),
		limitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_limit_hits_total",
			Help: "Limit events (limit.memory, limit.pids, limit.disk, limit.cpu, limit.timeout, limit.output), by type.",
		}, []string{"type"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_egress_total",
			Help: "Egress decisions: DNS queries (kind dns) and connections or requests (kind connect), allowed or denied.",
		}, []string{"kind", "decision"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_events_total",
			Help: "Events recorded, by the part of their type before the first dot (sandbox, exec, network, limit).",
		}, []string{"type_group"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered, retried, failed (given up), dropped (queue full).",
		}, []string{"outcome"}),
		auditWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_audit_events_written_total",
			Help: "Events written to the audit log.",
		}),
		auditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_audit_events_dropped_total",
			Help: "Events that could not be written to the audit log.",
		}),
		unauthn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_api_unauthenticated_total",
			Help: "API requests refused before their key was accepted (counted, never stored), by reason: missing (no bearer key, 401), invalid (unknown or revoked, 401) or protocol (a WebSocket subprotocol key from a page of another origin, 403, or without airlock.v1, 400).",
		}, []string{"reason"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_api_rate_limited_total",
			Help: "API requests refused with 429 because their tenant was past its request rate (counted, never stored).",
		}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_api_connections_refused_total",
			Help: "API connections closed as soon as accepted, by the cap they were over: client (server.maxConnectionsPerClient) or total (server.maxConnections).",
		}, []string{"reason"}),
		storeDegraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "airlock_store_degraded",
			Help: "1 while the daemon's store cannot be written (its data dir's disk is full or failing: writes answer 507), else 0.",
		}),
		storeOnsets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_store_degraded_total",
			Help: "Times the daemon's store started refusing writes for its disk.",
		}),
		tools: newToolMetrics(),
		state: newStateCollector(),
	}
	// Series that alerts compare against exist from the start, at 0, instead of appearing with
	// their first increment.
	for _, kind := range []string{"dns", "connect"} {
		for _, d := range []string{"allow", "deny"} {
			m.egress.WithLabelValues(kind, d)
		}
	}
	for _, o := range []string{WebhookDelivered, WebhookRetried, WebhookFailed, WebhookDropped} {
		m.webhooks.WithLabelValues(o)
	}
	for _, r := range []string{UnauthenticatedMissing, UnauthenticatedInvalid, UnauthenticatedProtocol} {
		m.unauthn.WithLabelValues(r)
	}
	for _, r := range []string{RefusedClient, RefusedTotal} {
		m.connRefused.WithLabelValues(r)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.createSeconds, m.createErrors, m.execSeconds, m.limitHits, m.egress, m.events, m.webhooks,
		m.auditWritten, m.auditDropped, m.unauthn, m.rateLimited, m.connRefused,
		m.storeDegraded, m.storeOnsets, m.state,
	)
	m.reg.MustRegister(m.tools.collectors()...)
	return m
}

// Handler serves the registry in the Prometheus exposition formats (text by default). On a nil
// *Metrics it answers 503.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "metrics are not enabled in this daemon", http.StatusServiceUnavailable)
		})
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// SetSandboxSource sets what airlock_sandboxes reports: f is called at every scrape.
func (m *Metrics) SetSandboxSource(f func() []SandboxCount) {
	if m == nil {
		return
	}
	m.state.mu.Lock()
	m.state.sandboxFn = f
	m.state.mu.Unlock()
}

// SetPoolSource sets where airlock_pool_sandboxes and airlock_pool_claims_total come from: f is
// called at every scrape; its counters (Claims, Misses) must only grow while a pool exists.
func (m *Metrics) SetPoolSource(f func() []api.PoolStatus) {
	if m == nil {
		return
	}
	m.state.mu.Lock()
	m.state.poolFn = f
	m.state.mu.Unlock()
}

// ObserveCreate records a create of a sandbox of level that began at start: its duration by
// source when err is nil, else a create error.
func (m *Metrics) ObserveCreate(level, source string, start time.Time, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.createErrors.WithLabelValues(level).Inc()
		return
	}
	m.createSeconds.WithLabelValues(level, source).Observe(time.Since(start).Seconds())
}

// ObserveExec records an exec in a sandbox of level that began at start; it is meant to be
// deferred: defer m.ObserveExec(level, time.Now()).
func (m *Metrics) ObserveExec(level string, start time.Time) {
	if m == nil {
		return
	}
	m.execSeconds.WithLabelValues(level).Observe(time.Since(start).Seconds())
}

// Observe counts one recorded event: by type group, and, for a limit event or an egress
// decision, by its type or decision.
func (m *Metrics) Observe(e api.Event) {
	if m == nil || e.Type == "" {
		return
	}
	group, _, _ := strings.Cut(e.Type, ".")
	m.events.WithLabelValues(group).Inc()
	switch {
	case group == "limit":
		m.limitHits.WithLabelValues(e.Type).Inc()
	case e.Type == api.EventNetworkDNS || e.Type == api.EventNetworkConnect:
		// The decision comes from the manager (a string), or from JSON when read back.
		if d, _ := e.Data["decision"].(string); d == "allow" || d == "deny" {
			m.egress.WithLabelValues(strings.TrimPrefix(e.Type, "network."), d).Inc()
		}
	}
}

// WebhookDelivery counts one webhook delivery attempt's outcome (WebhookDelivered, ...).
func (m *Metrics) WebhookDelivery(outcome string) {
	if m == nil {
		return
	}
	m.webhooks.WithLabelValues(outcome).Inc()
}

// AuditWritten counts n events written to the audit log.
func (m *Metrics) AuditWritten(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.auditWritten.Add(float64(n))
}

// AuditDropped counts n events the audit log could not write.
func (m *Metrics) AuditDropped(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.auditDropped.Add(float64(n))
}

// StoreDegraded sets whether the daemon's store refuses writes for its disk.
func (m *Metrics) StoreDegraded(degraded bool) {
	if m == nil {
		return
	}
	if degraded {
		m.storeDegraded.Set(1)
		m.storeOnsets.Inc()
		return
	}
	m.storeDegraded.Set(0)
}

// stateCollector reports the daemon's state from its sources at scrape time.
type stateCollector struct {
	sandboxes, poolSandboxes, poolClaims, connections *prometheus.Desc

	mu        sync.Mutex // guards the sources
	sandboxFn func() []SandboxCount
	poolFn    func() []api.PoolStatus
	connFn    func() int
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		sandboxes: prometheus.NewDesc("airlock_sandboxes",
			"Live sandboxes of tenants by status and level (a warm pool's unclaimed ones are in airlock_pool_sandboxes).",
			[]string{"status", "level"}, nil),
		poolSandboxes: prometheus.NewDesc("airlock_pool_sandboxes",
			"Unclaimed sandboxes of a warm pool by state: ready (waiting to be claimed) or warming (being created).",
			[]string{"pool", "state"}, nil),
		poolClaims: prometheus.NewDesc("airlock_pool_claims_total",
			"Creates with a warm pool's shape: hit (got a ready sandbox) or miss (found it empty, created cold).",
			[]string{"pool", "result"}, nil),
		connections: prometheus.NewDesc("airlock_api_connections",
			"Open API connections (idle keep-alive ones included), as counted against server.maxConnections.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sandboxes
	ch <- c.poolSandboxes
	ch <- c.poolClaims
	ch <- c.connections
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sandboxFn, poolFn, connFn := c.sandboxFn, c.poolFn, c.connFn
	c.mu.Unlock()
	if connFn != nil {
		ch <- prometheus.MustNewConstMetric(c.connections, prometheus.GaugeValue, float64(connFn()))
	}
	if sandboxFn != nil {
		// Rows of one status and level are summed: a duplicate series would fail the scrape.
		type key struct{ status, level string }
		sum := map[key]int{}
		for _, sc := range sandboxFn() {
			sum[key{sc.Status, sc.Level}] += sc.N
		}
		keys := make([]key, 0, len(sum))
		for k := range sum {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.status, b.status), cmp.Compare(a.level, b.level)) })
		for _, k := range keys {
			ch <- prometheus.MustNewConstMetric(c.sandboxes, prometheus.GaugeValue, float64(sum[k]), k.status, k.level)
		}
	}
	if poolFn != nil {
		seen := map[string]bool{}
		for _, p := range poolFn() {
			if seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			ch <- prometheus.MustNewConstMetric(c.poolSandboxes, prometheus.GaugeValue, float64(p.Ready), p.Name, "ready")
			ch <- prometheus.MustNewConstMetric(c.poolSandboxes, prometheus.GaugeValue, float64(p.Warming), p.Name, "warming")
			ch <- prometheus.MustNewConstMetric(c.poolClaims, prometheus.CounterValue, float64(p.Claims), p.Name, "hit")
			ch <- prometheus.MustNewConstMetric(c.poolClaims, prometheus.CounterValue, float64(p.Misses), p.Name, "miss")
		}
	}
}
