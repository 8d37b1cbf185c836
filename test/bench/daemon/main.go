// Command daemon benchmarks airlock serve through its HTTP API and the Go SDK, beside the
// nearest local equivalent, in one run:
//
//   - create→ready: POST /api/v1/sandboxes?wait=true (the SDK's Create), answered once the
//     sandbox is ready (sequential);
//   - exec round trip: POST .../exec of `true` into a ready sandbox, interleaved with a plain
//     local `sh -c true` (fork+exec on the host, no sandbox, no HTTP);
//   - exec throughput at concurrency 8, for both;
//   - 50 concurrent creates, in waves: latency of each create→ready, and failures;
//   - 50 concurrent creates claiming from a warm pool of 50 (refilled between waves): latency of
//     each create→ready, against the cold creates above.
//
// Usage, from the repository root after building bin/airlock (as root):
//
//	go run ./test/bench/daemon [-airlock PATH] [-rounds N] [-waves N] [-json FILE]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/test/bench/serve"
	"github.com/airlockrun/airlock/test/bench/stats"
)

type config struct {
	airlock  string
	rounds   int
	creates  int
	waves    int
	duration time.Duration
	jsonPath string
}

// result is one measured figure set.
type result struct {
	Name string `json:"name"`
	stats.Summary
	N        int     `json:"n"`
	Failures int     `json:"failures"`
	PerSec   float64 `json:"per_sec,omitempty"`
}

type report struct {
	Results []result           `json:"results"`
	Ratios  map[string]float64 `json:"ratios"`
}

func main() {
	var c config
	flag.StringVar(&c.airlock, "airlock", "./bin/airlock", "path to the airlock binary")
	flag.IntVar(&c.rounds, "rounds", 300, "exec round trips measured (each also runs the local peer)")
	flag.IntVar(&c.creates, "creates", 50, "sequential creates measured")
	flag.IntVar(&c.waves, "waves", 3, "waves of 50 concurrent creates")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "length of each throughput run")
	flag.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	tmp, err := os.MkdirTemp("", "airlock-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	data := filepath.Join(tmp, "data")
	out, err := exec.Command(c.airlock, "keys", "create", "--admin", "--tenant", "bench", "--data-dir", data).Output() // an admin key: it also makes the pool
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	cfgFile := filepath.Join(tmp, "airlock.json")
	if err := os.WriteFile(cfgFile, []byte(`{"limits": {"maxSandboxesPerTenant": 1000}}`), 0o644); err != nil {
		return err
	}
	url, stop, err := serve.Start(c.airlock, data, cfgFile)
	if err != nil {
		return err
	}
	defer stop()
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	cl, err := client.New(url, strings.TrimSpace(string(out)), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return err
	}
	ctx := context.Background()
	// The process level, named: the README's figures are its (the daemon's default is container).
	spec := api.Spec{Isolation: api.LevelProcess, Resources: api.Resources{MemoryMB: 256, DiskMB: 64}}
	var rep report
	rep.Ratios = map[string]float64{}

	// Warm up: the first sandbox pays for caches (generated /etc, seccomp compile).
	for range 3 {
		sb, err := cl.Create(ctx, spec)
		if err != nil {
			return err
		}
		// Ended before the next: one left running would weigh on the creates measured.
		if _, err := cl.Terminate(ctx, sb.ID); err != nil {
			return err
		}
	}

	fmt.Fprintf(os.Stderr, "bench: %d sequential creates\n", c.creates)
	var createT []time.Duration
	for range c.creates {
		t0 := time.Now()
		sb, err := cl.Create(ctx, spec)
		if err != nil {
			return err
		}
		createT = append(createT, time.Since(t0))
		if _, err := cl.Terminate(ctx, sb.ID); err != nil {
			return err
		}
	}
	rep.Results = append(rep.Results, summarize("create→ready (sequential)", createT, 0))

	sb, err := cl.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer serve.Terminate(ctx, cl, sb.ID)
	req := api.ExecRequest{Command: api.Command{"true"}}
	fmt.Fprintf(os.Stderr, "bench: %d exec round trips, interleaved with local sh -c true\n", c.rounds)
	var execT, localT []time.Duration
	for i := range c.rounds + 10 {
		t0 := time.Now()
		r, err := cl.Exec(ctx, sb.ID, req)
		d := time.Since(t0)
		if err != nil || r.ExitCode != 0 {
			return serve.ExecError("exec", r, err)
		}
		t0 = time.Now()
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			return err
		}
		l := time.Since(t0)
		if i >= 10 {
			execT, localT = append(execT, d), append(localT, l)
		}
	}
	e, l := summarize("exec true over HTTP", execT, 0), summarize("local sh -c true", localT, 0)
	rep.Results = append(rep.Results, e, l)
	rep.Ratios["exec_http_vs_local_sh_p50"] = e.P50 / l.P50

	fmt.Fprintf(os.Stderr, "bench: throughput at concurrency 8 for %v each\n", c.duration)
	n, fails := throughput(8, c.duration, func() error {
		r, err := cl.Exec(ctx, sb.ID, req)
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("exit %d", r.ExitCode)
		}
		return err
	})
	rep.Results = append(rep.Results, result{Name: "exec throughput, concurrency 8", N: n, Failures: fails, PerSec: float64(n) / c.duration.Seconds()})
	n2, _ := throughput(8, c.duration, func() error { return exec.Command("sh", "-c", "true").Run() })
	rep.Results = append(rep.Results, result{Name: "local sh -c true throughput, concurrency 8", N: n2, PerSec: float64(n2) / c.duration.Seconds()})
	rep.Ratios["throughput_http_vs_local_sh"] = float64(n) / float64(n2)

	fmt.Fprintf(os.Stderr, "bench: %d waves of 50 concurrent creates\n", c.waves)
	var concT []time.Duration
	failures := 0
	for range c.waves {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var ids []string
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				sb, err := cl.Create(ctx, spec)
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures++
					fmt.Fprintln(os.Stderr, "bench: create:", err)
					return
				}
				concT = append(concT, d)
				ids = append(ids, sb.ID)
			}()
		}
		wg.Wait()
		for _, id := range ids {
			serve.Terminate(ctx, cl, id)
		}
	}
	cr := summarize("create→ready, 50 concurrent", concT, failures)
	rep.Results = append(rep.Results, cr)

	fmt.Fprintf(os.Stderr, "bench: %d waves of 50 concurrent claims from a warm pool of 50\n", c.waves)
	claims, err := poolWaves(ctx, cl, spec, c.waves)
	if err != nil {
		return err
	}
	rep.Results = append(rep.Results, claims)
	rep.Ratios["create_50_concurrent_cold_vs_claim_p50"] = cr.P50 / claims.P50

	printReport(os.Stdout, rep)
	if c.jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	tr.CloseIdleConnections()
	return nil
}

// poolWaves makes a warm pool of 50 sandboxes of spec's shape and claims all of it with 50
// concurrent creates, waves times, the pool refilled in between. Each claim is checked: the pool
// counted it (no miss), and the sandbox runs a command with the create's own environment.
func poolWaves(ctx context.Context, cl *client.Client, spec api.Spec, waves int) (result, error) {
	const size = 50
	if _, err := cl.PutPool(ctx, api.Pool{Name: "bench", Spec: spec, Size: size, RefillPerSecond: 100}); err != nil {
		return result{}, err
	}
	defer func() {
		if _, err := cl.DeletePool(ctx, "bench"); err != nil {
			fmt.Fprintln(os.Stderr, "bench: delete pool:", err)
		}
	}()
	var ds []time.Duration
	failures := 0
	for w := range waves {
		st, err := waitPool(ctx, cl, "bench", size)
		if err != nil {
			return result{}, err
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		ids := make([]string, size)
		start := make(chan struct{})
		for i := range size {
			wg.Go(func() {
				s := spec
				s.Environment = map[string]string{"CLAIM": fmt.Sprint(i)}
				<-start
				t0 := time.Now()
				sb, err := cl.Create(ctx, s)
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures++
					fmt.Fprintln(os.Stderr, "bench: claim:", err)
					return
				}
				ds = append(ds, d)
				ids[i] = sb.ID
			})
		}
		close(start)
		wg.Wait()
		after, err := cl.Pool(ctx, "bench")
		if err != nil {
			return result{}, err
		}
		if after.Claims-st.Claims != size || after.Misses != st.Misses {
			return result{}, fmt.Errorf("wave %d: %d claims and %d misses, want %d claims and no miss", w, after.Claims-st.Claims, after.Misses-st.Misses, size)
		}
		for i, id := range ids {
			if id == "" {
				continue
			}
			r, err := cl.Exec(ctx, id, api.ExecRequest{Command: api.Shell("echo $CLAIM")})
			if err != nil || r.Stdout != fmt.Sprintf("%d\n", i) {
				return result{}, serve.ExecError(fmt.Sprintf("claimed sandbox %d", i), r, err)
			}
			serve.Terminate(ctx, cl, id)
		}
	}
	return summarize("claim from a warm pool, 50 concurrent", ds, failures), nil
}

// waitPool waits until pool name has ready sandboxes.
func waitPool(ctx context.Context, cl *client.Client, name string, ready int) (api.PoolStatus, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := cl.Pool(ctx, name)
		if err != nil || st.Ready >= ready {
			return st, err
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("pool %s not refilled: %+v", name, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func summarize(name string, ds []time.Duration, failures int) result {
	return result{Name: name, Summary: stats.Summarize(ds), N: len(ds), Failures: failures}
}

// throughput runs fn from `workers` goroutines for d and returns how many calls succeeded and
// failed.
func throughput(workers int, d time.Duration, fn func() error) (ok, failed int) {
	var n, f atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if fn() != nil {
					f.Add(1)
				} else {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(n.Load()), int(f.Load())
}

func printReport(w io.Writer, rep report) {
	fmt.Fprintf(w, "%-44s %8s %8s %8s %8s %6s %6s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "min ms", "n", "fail", "per sec")
	for _, r := range rep.Results {
		if r.PerSec > 0 {
			fmt.Fprintf(w, "%-44s %8s %8s %8s %8s %6d %6d %9.0f\n", r.Name, "", "", "", "", r.N, r.Failures, r.PerSec)
			continue
		}
		fmt.Fprintf(w, "%-44s %8.2f %8.2f %8.2f %8.2f %6d %6d\n", r.Name, r.P50, r.P90, r.P99, r.Min, r.N, r.Failures)
	}
	for k, v := range rep.Ratios {
		fmt.Fprintf(w, "ratio %s: %.2f×\n", k, v)
	}
}
