// Command cluster benchmarks the front API of a cluster of airlock nodes (airlock serve
// --cluster kubernetes, docs/kubernetes.md#the-front-api) against one host's own API, in one
// run, on a local cluster (real etcd, kube-apiserver, kube-scheduler, kube-controller-manager;
// three airlock nodes on this machine):
//
//   - create→ready (sequential, each terminated before the next): POST /api/v1/sandboxes?wait=true
//     through the front (a Pod, the scheduler, the node, the Pod's status back) vs the same
//     request on one node's own API; the difference of the p50s is the front's overhead;
//   - throughput: 100 creates→ready at concurrency 20 through the front, spread over the three
//     nodes vs with two of them cordoned (all on one node), with the ratio. The three nodes
//     share this machine's cores, so the ratio says what the front and the scheduler cost, not
//     what three hosts would give.
//
// Usage, from the repository root after make build (as root, with the cached Kubernetes
// binaries: make k8s-binaries):
//
//	go run ./test/bench/cluster [-airlock PATH] [-creates N] [-json FILE]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/test/bench/stats"
)

type config struct {
	airlock     string
	creates     int
	burst       int
	concurrency int
	jsonPath    string
}

type result struct {
	Name string `json:"name"`
	stats.Summary
	N      int     `json:"n"`
	PerSec float64 `json:"per_sec,omitempty"`
}

type report struct {
	Results []result           `json:"results"`
	Figures map[string]float64 `json:"figures"`
}

func main() {
	var c config
	flag.StringVar(&c.airlock, "airlock", "./bin/airlock", "path to the airlock binary (airlock-kube beside it)")
	flag.IntVar(&c.creates, "creates", 30, "sequential creates measured on each side")
	flag.IntVar(&c.burst, "burst", 100, "creates of each throughput run")
	flag.IntVar(&c.concurrency, "concurrency", 20, "creates in flight in a throughput run")
	flag.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		os.Exit(1)
	}
}

// spec is what every create asks for: the process level on the host template, small. No cpu:
// a Pod's cpu limit is its request, and 100 of any size would not fit the scheduler's count of
// this machine's cores (the sandboxes get airlock's default, 1 vCPU each, on both sides).
var spec = api.Spec{Isolation: api.LevelProcess, Resources: api.Resources{MemoryMB: 64}}

func run(c config) error {
	if why := cluster.Missing(os.Getenv("AIRLOCK_K8S_DIR")); why != "" {
		return errors.New(why)
	}
	bin, err := filepath.Abs(c.airlock)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "airlock-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// A killed run's directory is swept by the next cluster (cluster.SweepStale).
	if err := os.WriteFile(filepath.Join(tmp, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	dir := filepath.Join(tmp, "cluster")
	// A key of node airlock-1's own API, made before its daemon holds the data dir.
	nodeData := filepath.Join(dir, "nodes", "airlock-1", "data")
	out, err := exec.Command(bin, "keys", "create", "--tenant", "bench", "--data-dir", nodeData).Output()
	if err != nil {
		return fmt.Errorf("keys create on airlock-1: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	fmt.Fprintln(os.Stderr, "bench-cluster: starting the control plane and 3 airlock nodes")
	kc, nodes, err := cluster.Up(ctx, cluster.UpOptions{Options: cluster.Options{Dir: dir, BinDir: os.Getenv("AIRLOCK_K8S_DIR"), ControllerManager: true},
		Airlock: bin, Nodes: 3}, log)
	if err != nil {
		return err
	}
	defer kc.Stop()
	fr, err := kc.StartFront(ctx, bin, 40*time.Second)
	if err != nil {
		return err
	}
	key, err := kc.AddTenant(ctx, "bench", kubeapi.Quota{MaxSandboxes: 2 * c.burst})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	viaFront, err := client.New(fr.API, key, client.WithHTTPClient(hc))
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) { // the front reads keys through a watch
		_, err := viaFront.List(ctx, client.ListOptions{})
		if !errors.Is(err, client.ErrUnauthorized) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the front did not take the bench's key within 30 s: %w", err)
		}
	}
	direct, err := client.New(nodes[0].API, strings.TrimSpace(string(out)), client.WithHTTPClient(hc))
	if err != nil {
		return err
	}
	rep := report{Figures: map[string]float64{}}

	// Warm up both paths (caches, connections, the scheduler's first cycle).
	for _, cl := range []*client.Client{viaFront, direct, viaFront, direct} {
		if err := createAndEnd(ctx, cl, nil); err != nil {
			return err
		}
	}
	cs, err := kc.Client()
	if err != nil {
		return err
	}
	st, err := watchStages(ctx, cs, "tenant-bench")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench-cluster: %d sequential creates on each side, interleaved\n", c.creates)
	var frontT, directT []time.Duration
	st.start()
	for range c.creates {
		if err := createAndEnd(ctx, viaFront, &frontT); err != nil {
			return err
		}
		if err := createAndEnd(ctx, direct, &directT); err != nil {
			return err
		}
	}
	f, d := stats.Summarize(frontT), stats.Summarize(directT)
	rep.Results = append(rep.Results, result{Name: "create→ready through the front API", Summary: f, N: len(frontT)},
		result{Name: "create→ready on one node's own API", Summary: d, N: len(directT)})
	st.stop()
	rep.Figures["front_overhead_p50_ms"] = f.P50 - d.P50
	fmt.Fprintf(os.Stderr, "bench-cluster: create→ready p50 %.1f ms through the front, %.1f ms on the node's own API\n", f.P50, d.P50)

	for _, x := range st.summary() {
		rep.Results = append(rep.Results, x)
	}
	fmt.Fprintf(os.Stderr, "bench-cluster: %d creates at concurrency %d over three nodes\n", c.burst, c.concurrency)
	three, err := burst(ctx, viaFront, c.burst, c.concurrency)
	if err != nil {
		return err
	}
	cordon := func(on bool) error {
		for _, n := range nodes[1:] {
			patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
			if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("cordon %s: %w", n.Name, err)
			}
		}
		return nil
	}
	if err := cordon(true); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench-cluster: %d creates at concurrency %d on one node (two cordoned)\n", c.burst, c.concurrency)
	one, err := burst(ctx, viaFront, c.burst, c.concurrency)
	if err2 := cordon(false); err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	three.Name, one.Name = "100 creates→ready, three nodes", "100 creates→ready, one node"
	rep.Results = append(rep.Results, three, one)
	rep.Figures["throughput_ratio_three_vs_one"] = stats.Ratio(three.PerSec, one.PerSec)

	fmt.Printf("%-42s %8s %8s %8s %8s %6s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "min ms", "n", "per s")
	for _, r := range rep.Results {
		fmt.Printf("%-42s %8.1f %8.1f %8.1f %8.1f %6d %9.1f\n", r.Name, r.P50, r.P90, r.P99, r.Min, r.N, r.PerSec)
	}
	fmt.Printf("\nfront API overhead, create→ready p50: %+.1f ms (target ≤ 100 ms)\n", rep.Figures["front_overhead_p50_ms"])
	fmt.Printf("throughput, three nodes vs one: %.2f× (the three share this machine's %d cores)\n", rep.Figures["throughput_ratio_three_vs_one"], numCPU())
	if c.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(c.jsonPath, b, 0o644)
	}
	return nil
}

// createAndEnd creates a sandbox and waits until it is ready (timed into into, when not nil),
// then terminates it.
func createAndEnd(ctx context.Context, cl *client.Client, into *[]time.Duration) error {
	t0 := time.Now()
	sb, err := cl.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create on %s: %w", cl.BaseURL(), err)
	}
	if into != nil {
		*into = append(*into, time.Since(t0))
	}
	if _, err := cl.Terminate(ctx, sb.ID); err != nil {
		return fmt.Errorf("terminate on %s: %w", cl.BaseURL(), err)
	}
	return nil
}

// burst creates n sandboxes, conc at a time, each to ready, and then terminates them all: the
// latencies of the creates and the creates per second from the first to the last ready.
func burst(ctx context.Context, cl *client.Client, n, conc int) (result, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var ids []string
	var errs []error
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for range work {
				s := time.Now()
				sb, err := cl.Create(ctx, spec)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					lat, ids = append(lat, time.Since(s)), append(ids, sb.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(t0)
	var end sync.WaitGroup
	for _, id := range ids {
		end.Go(func() { _, _ = cl.Terminate(context.WithoutCancel(ctx), id) })
	}
	end.Wait()
	if err := errors.Join(errs...); err != nil {
		return result{}, fmt.Errorf("%d of %d creates failed: %w", len(errs), n, err)
	}
	return result{Summary: stats.Summarize(lat), N: len(lat), PerSec: float64(len(lat)) / took.Seconds()}, nil
}

func numCPU() int { return runtime.NumCPU() }
