package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
)

// TestPrometheusMetrics runs a daemon with a warm pool of one, makes sandboxes every way (claimed
// from the pool, cold, from a snapshot), runs execs, has one hit its memory limit, and leaves the
// sandboxes in known states (running, paused, ready, one terminated). GET /metrics, without a key,
// must then say exactly that: sandboxes by status and level (the pool's own not among them), one
// create per create in the histogram by source, one exec per exec, the pool's hit, the limit hit.
func TestPrometheusMetrics(t *testing.T) {
	check := leakCheck(t)
	shape := `{"resources": {"memoryMb": 128, "diskMb": 64}}`
	d, c, _ := newDaemonConfig(t, `{`+processDefault+`, "pools": [{"name": "warm", "size": 1, "spec": `+shape+`}]}`)
	ctx := bg()
	waitPoolState(t, c, "warm", 30*time.Second, func(p api.PoolStatus) bool { return p.Ready == 1 })

	create := func(spec api.Spec) string {
		t.Helper()
		sb, err := c.Create(ctx, spec)
		if err != nil {
			t.Fatalf("create %+v: %v", spec, err)
		}
		return sb.ID
	}
	exec := func(id, script string) api.ExecResult {
		t.Helper()
		res, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Shell(script)})
		if err != nil {
			t.Fatalf("exec %q in %s: %v", script, id, err)
		}
		return res
	}

	// A: claimed from the pool, three execs → running.
	a := create(api.Spec{Resources: api.Resources{MemoryMB: 128, DiskMB: 64}})
	for _, s := range []string{"true", "echo hi", "ls /tmp"} {
		if res := exec(a, s); res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v", s, res)
		}
	}
	// B: cold (another shape), a memory bomb → running, a limit.memory event.
	b := create(api.Spec{Resources: api.Resources{MemoryMB: 64, DiskMB: 64}})
	res := exec(b, "python3 -c 'b=bytearray(512<<20)'")
	oom := false
	for _, le := range res.LimitEvents {
		oom = oom || le.Type == "limit.memory"
	}
	if res.ExitCode != 137 || !oom {
		t.Fatalf("memory bomb: exit %d, limit events %+v; want 137 and limit.memory", res.ExitCode, res.LimitEvents)
	}
	// C: cold, snapshotted, then paused. D: cold, terminated. E: from C's snapshot → ready.
	cc := create(smallSpec())
	snap, err := c.Snapshot(ctx, cc, api.SnapshotRequest{})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, err := c.Pause(ctx, cc); err != nil {
		t.Fatalf("pause: %v", err)
	}
	dd := create(smallSpec())
	if _, err := c.Terminate(ctx, dd); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	e := create(api.Spec{FromSnapshot: snap.ID})
	waitPoolState(t, c, "warm", 30*time.Second, func(p api.PoolStatus) bool { return p.Ready == 1 && p.Warming == 0 })

	// Scraped as Prometheus does: no key.
	// The counters fed by the audit log's events lag them by up to one write of the log (100 ms):
	// scrape until they have caught up, or a few seconds have passed.
	fams := metricstest.Scrape(t, d.url+"/metrics")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if fams.Value("airlock_limit_hits_total", map[string]string{"type": "limit.memory"}) >= 1 &&
			fams.Value("airlock_events_total", map[string]string{"type_group": "exec"}) >= 8 {
			break
		}
		time.Sleep(100 * time.Millisecond)
		fams = metricstest.Scrape(t, d.url+"/metrics")
	}

	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		// A and B ran execs; C is paused; E is ready; D ended; the pool's waiting one is the pool's.
		{"airlock_sandboxes", map[string]string{"status": "running", "level": "process"}, 2},
		{"airlock_sandboxes", map[string]string{"status": "paused", "level": "process"}, 1},
		{"airlock_sandboxes", map[string]string{"status": "ready", "level": "process"}, 1},
		{"airlock_sandboxes", map[string]string{"status": "provisioning", "level": "process"}, 0},
		{"airlock_pool_sandboxes", map[string]string{"pool": "warm", "state": "ready"}, 1},
		{"airlock_pool_sandboxes", map[string]string{"pool": "warm", "state": "warming"}, 0},
		{"airlock_pool_claims_total", map[string]string{"pool": "warm", "result": "hit"}, 1},
		{"airlock_pool_claims_total", map[string]string{"pool": "warm", "result": "miss"}, 0},
		{"airlock_sandbox_create_errors_total", map[string]string{"level": "process"}, -1}, // none
	} {
		if got := fams.Value(w.name, w.labels); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   uint64
	}{
		{"airlock_sandbox_create_seconds", map[string]string{"level": "process", "source": "pool"}, 1},     // A
		{"airlock_sandbox_create_seconds", map[string]string{"level": "process", "source": "cold"}, 3},     // B, C, D
		{"airlock_sandbox_create_seconds", map[string]string{"level": "process", "source": "snapshot"}, 1}, // E
		{"airlock_exec_seconds", map[string]string{"level": "process"}, 4},
	} {
		h := fams.Histogram(w.name, w.labels)
		if h == nil {
			t.Errorf("%s%v: no histogram", w.name, w.labels)
			continue
		}
		if got := h.GetSampleCount(); got != w.want {
			t.Errorf("%s%v count = %d, want %d", w.name, w.labels, got, w.want)
		}
		if h.GetSampleSum() <= 0 {
			t.Errorf("%s%v sum = %v, want > 0", w.name, w.labels, h.GetSampleSum())
		}
	}
	// Counted from the audit log's events.
	if got := fams.Value("airlock_limit_hits_total", map[string]string{"type": "limit.memory"}); got < 1 {
		t.Errorf("airlock_limit_hits_total{type=limit.memory} = %v, want ≥ 1", got)
	}
	if got := fams.Value("airlock_events_total", map[string]string{"type_group": "exec"}); got < 8 {
		t.Errorf("airlock_events_total{type_group=exec} = %v, want ≥ 8 (4 execs started and exited)", got)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "airlock_egress_total", "airlock_webhook_deliveries_total"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if t.Failed() {
		t.Logf("airlock_ families: %v", promNames(fams))
	}

	for _, id := range []string{a, b, cc, e} {
		if _, err := c.Terminate(ctx, id); err != nil {
			t.Errorf("terminate %s: %v", id, err)
		}
	}
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	check()
}

// promNames lists the airlock_ families, for the log of a failed test.
func promNames(fams metricstest.Families) []string {
	var out []string
	for n := range fams {
		if strings.HasPrefix(n, "airlock_") {
			out = append(out, n)
		}
	}
	return out
}
