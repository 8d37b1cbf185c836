package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/test/bench/stats"
)

const (
	producers = 4
	// window is how far ahead of the writer the producers of a closed-loop run stay: 8 batches,
	// so the writer always finds full ones queued, and far under the Log's buffer of 200,000, so
	// that run measures the ceiling without dropping (its latency is then window / rate).
	window = 8 * 1024
)

// logRun is one run of the log's throughput.
type logRun struct {
	Name string `json:"name"`
	// Paced says the events were offered on a schedule (else as fast as the log took them).
	Paced bool `json:"paced"`
	// OfferedPerSec is the events added per second while the producers ran.
	OfferedPerSec float64 `json:"offered_per_sec"`
	Added         int64   `json:"added"`
	Written       int64   `json:"written"`
	Dropped       int64   `json:"dropped"`
	// WrittenPerSec is Written over the time from the first Add to the last batch committed.
	WrittenPerSec float64 `json:"written_per_sec"`
	// DrainMS is the time from the producers' last Add to the last commit: a log that keeps up
	// has at most a flush interval and a batch's write to catch up on.
	DrainMS float64 `json:"drain_ms"`
	Batches int     `json:"batches"`
	// Latency is from an event's Add to its batch's commit (it includes the wait for a flush).
	Latency stats.Summary `json:"add_to_committed"`
	// CPUPerEvent is the process's CPU time (producers, writer, SQLite) per event written.
	CPUPerEvent time.Duration `json:"cpu_per_event_ns"`
	VerifyMS    float64       `json:"verify_ms"`
	Verified    int64         `json:"verified_events"`
}

// measureLog adds events to a real audit.Log over a real store in dir for d, from `producers`
// goroutines, on schedule at rate events/s in all (0: as fast as the log takes them, the
// producers staying at most `window` events ahead of the writer), waits until the last one is
// written, and verifies the chain.
func measureLog(dir, name, syncMode string, rate float64, d time.Duration) (logRun, error) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	st, err := store.Open(ctx, filepath.Join(dir, "airlock.db"), store.Options{Sync: syncMode}, quiet)
	if err != nil {
		return logRun{}, err
	}
	defer st.Close()
	var written, dropped, added, lastCommit atomic.Int64
	var lat []time.Duration // the writer's (sinks run on it), read after Run returned
	r := logRun{Name: name, Paced: rate > 0}
	l := audit.New(st, audit.Config{
		Written: func(n int) { written.Add(int64(n)); lastCommit.Store(time.Now().UnixNano()) },
		Dropped: func(n int) { dropped.Add(int64(n)) },
		Sinks: []audit.Sink{audit.SinkFunc(func(evs []store.TenantEvent) {
			now := time.Now()
			r.Batches++
			for _, e := range evs {
				lat = append(lat, now.Sub(e.Time))
			}
		})},
	}, quiet)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { l.Run(stop); close(done) }()

	cpu0 := cpuTime()
	start := time.Now()
	end := start.Add(d)
	quota := int64(rate * d.Seconds() / producers) // each paced producer's events
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			g := newGenerator(p)
			var sent int64
			for now := time.Now(); (rate > 0 && sent < quota) || (rate == 0 && now.Before(end)); now = time.Now() {
				due := sent + 64
				if rate > 0 {
					due = min(quota, int64(now.Sub(start).Seconds()*rate/producers))
				} else if added.Load()-written.Load()-dropped.Load() >= window {
					due = sent
				}
				if sent >= due {
					time.Sleep(time.Millisecond)
					continue
				}
				added.Add(due - sent)
				for ; sent < due; sent++ {
					l.Add(g.next())
				}
			}
		})
	}
	wg.Wait()
	stopped := time.Now()
	elapsed := stopped.Sub(start)
	if rate > 0 && elapsed < d+50*time.Millisecond {
		elapsed = d // on schedule: the last ones were due at d
	}
	r.OfferedPerSec = float64(added.Load()) / elapsed.Seconds()
	for deadline := time.Now().Add(time.Minute); written.Load()+dropped.Load() < added.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			<-done
			return r, fmt.Errorf("%s: %d of %d events written after a minute", name, written.Load(), added.Load())
		}
	}
	cpu := cpuTime() - cpu0
	close(stop)
	<-done
	last := time.Unix(0, lastCommit.Load())
	r.Added, r.Written, r.Dropped = added.Load(), written.Load(), dropped.Load()
	r.WrittenPerSec = float64(r.Written) / last.Sub(start).Seconds()
	r.DrainMS = max(0, float64(last.Sub(stopped).Microseconds())/1000)
	r.Latency = stats.Summarize(lat)
	if r.Written > 0 {
		r.CPUPerEvent = cpu / time.Duration(r.Written)
	}

	t0 := time.Now()
	rep, err := audit.Verify(ctx, st)
	r.VerifyMS = float64(time.Since(t0).Microseconds()) / 1000
	if err != nil {
		return r, fmt.Errorf("%s: verify: %w", name, err)
	}
	r.Verified = rep.Events
	if rep.Problem != nil {
		return r, fmt.Errorf("%s: verify found a problem: %s", name, rep.Problem)
	}
	n, err := st.EventCount(ctx)
	if err != nil {
		return r, fmt.Errorf("%s: count the events stored: %w", name, err)
	}
	if n != r.Written || rep.Events != r.Written {
		return r, fmt.Errorf("%s: %d events stored and %d verified, but %d written", name, n, rep.Events, r.Written)
	}
	return r, nil
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// generator makes a realistic mix of one tenant's events, the way the daemon records them: half
// network.connect (11 data fields), then DNS queries, exec starts and ends, API requests and
// status changes; 300 to 600 bytes of JSON each.
type generator struct {
	r      *rand.Rand
	tenant string
	sbx    []string
	exec   string
	n      int
}

func newGenerator(seed int) *generator {
	g := &generator{r: rand.New(rand.NewPCG(uint64(seed), 7)), tenant: fmt.Sprintf("tenant-%d", seed)}
	for range 4 {
		g.sbx = append(g.sbx, sandbox.NewID("sbx_"))
	}
	return g
}

var hosts = []string{"api.github.com", "pypi.org", "files.pythonhosted.org", "registry.npmjs.org", "api.openai.com", "evil.example.net"}

func (g *generator) next() store.TenantEvent {
	g.n++
	if g.n%10 == 1 {
		g.exec = sandbox.NewID("exec_")
	}
	sb := g.sbx[g.n%len(g.sbx)]
	host := hosts[g.r.IntN(len(hosts))]
	decision, rule, reason := "allow", host, "the domain is in allowedDomains"
	if host == "evil.example.net" {
		decision, rule, reason = "deny", "", "the domain is not in allowedDomains (egressPolicy deny)"
	}
	e := api.Event{SandboxID: sb, ExecutionID: g.exec}
	switch k := g.n % 20; {
	case k < 10:
		e.Type = api.EventNetworkConnect
		e.Message = fmt.Sprintf("tls %s:443: %s (%s)", host, decision, reason)
		e.Data = map[string]any{"proto": "tls", "name": host, "address": fmt.Sprintf("140.82.%d.%d", g.r.IntN(256), g.r.IntN(256)),
			"port": 443, "decision": decision, "rule": rule, "reason": reason, "bytesOut": g.r.IntN(1 << 20),
			"bytesIn": g.r.IntN(1 << 24), "credentialHeader": "", "runningExecutions": []string{g.exec}}
	case k < 13:
		e.Type = api.EventNetworkDNS
		e.Message = fmt.Sprintf("dns A %s: %s", host, decision)
		e.Data = map[string]any{"proto": "udp", "name": host + ".", "qtype": "A", "decision": decision, "rule": rule,
			"reason": reason, "answers": []string{"140.82.112.5", "140.82.112.6"}}
	case k < 15:
		e.Type = api.EventExecStarted
		e.Data = map[string]any{"command": []string{"python3", "-c", "import urllib.request as u; print(u.urlopen('https://" + host + "/').status)"}}
	case k < 17:
		e.Type = api.EventExecExited
		e.Message = "exit 0"
		e.Data = map[string]any{"exitCode": 0, "durationMs": g.r.IntN(5000), "stdoutBytes": g.r.IntN(1 << 16),
			"stderrBytes": 0, "limitEvents": []string{}, "cpuMs": g.r.IntN(4000), "memoryPeakMb": 40 + g.r.IntN(200)}
	case k < 19:
		e.Type = api.EventAPIRequest
		e.Message = "POST /api/v1/sandboxes/" + sb + "/exec → 200"
		e.Data = map[string]any{"method": "POST", "path": "/api/v1/sandboxes/" + sb + "/exec", "status": 200,
			"remote": fmt.Sprintf("127.0.0.1:%d", 30000+g.r.IntN(30000)), "durationMs": g.r.IntN(300),
			"keyId": "key_01HZX3K9Q2W7", "userAgent": "airlock-go/0.7 (agent-runner)"}
	default:
		e.Type = api.EventSandboxStatus
		e.ExecutionID = ""
		e.Message = "running → paused: paused through the API"
		e.Data = map[string]any{"from": "running", "to": "paused", "reason": "paused through the API"}
	}
	return store.TenantEvent{Tenant: g.tenant, Event: e}
}

// eventSizes returns the smallest, mean and largest JSON body of n generated events, with the
// ID, time and seq the log gives them.
func eventSizes(n int) (lo, mean, hi int) {
	g := newGenerator(99)
	lo, sum := 1<<30, 0
	for range n {
		e := g.next().Event
		e.ID, e.Time, e.Seq = sandbox.NewID("evt_"), time.Now().UTC(), 123456
		b, _ := json.Marshal(e)
		lo, hi, sum = min(lo, len(b)), max(hi, len(b)), sum+len(b)
	}
	return lo, sum / n, hi
}
