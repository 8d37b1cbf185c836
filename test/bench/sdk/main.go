// Command sdk measures the exec round trip through each of airlock's SDKs beside the Go SDK and
// curl, in one run against one daemon and one sandbox: POST .../exec of `true` into a ready
// process-level sandbox, one call at a time on one kept-alive connection, as an agent's loop
// does. Each peer times its own calls in its own process with a monotonic clock (the Go SDK here,
// curl's time_total, the TypeScript and Python SDKs' bench scripts), after warm-up calls that are
// not counted. The peers take turns, in rounds whose order rotates, so that the host's drift
// falls on all of them alike. The report gives each peer's p50 and its ratio to the Go SDK's;
// issue 25 asks each SDK to stay within 1.5× of it.
//
// Usage, from the repository root after `make build sdk` (as root):
//
//	go run ./test/bench/sdk [-airlock PATH] [-rounds N] [-n N] [-json FILE]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/test/bench/serve"
	"github.com/airlockrun/airlock/test/bench/stats"
)

// warmup calls precede each peer's timed ones in every round.
const warmup = 20

// target is the most an SDK's p50 may be of the Go SDK's (issue 25).
const target = 1.5

type config struct {
	airlock  string
	rounds   int
	n        int
	jsonPath string
}

// peer is one way of making the exec call: run makes warmup+n calls and returns the n timed ones.
type peer struct {
	name string
	run  func(ctx context.Context, n int) ([]time.Duration, error)
	ms   []time.Duration
}

type result struct {
	Name string `json:"name"`
	stats.Summary
	N       int     `json:"n"`
	VsGoSDK float64 `json:"vs_go_sdk"`
}

func main() {
	var c config
	flag.StringVar(&c.airlock, "airlock", "./bin/airlock", "path to the airlock binary")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds; each peer makes -n timed calls per round")
	flag.IntVar(&c.n, "n", 200, "timed exec round trips per peer and round")
	flag.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	bin, err := filepath.Abs(c.airlock)
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "airlock-bench-sdk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	data, cfg := filepath.Join(tmp, "data"), filepath.Join(tmp, "airlock.json")
	if err := os.WriteFile(cfg, []byte(`{"defaults": {"isolation": "process"}}`), 0o644); err != nil {
		return err
	}
	out, err := exec.Command(bin, "keys", "create", "--tenant", "bench", "--data-dir", data).Output()
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	key := strings.TrimSpace(string(out))
	url, stop, err := serve.Start(bin, data, cfg)
	if err != nil {
		return err
	}
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl, err := client.New(url, key, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return err
	}
	ctx := context.Background()
	sb, err := cl.Create(ctx, api.Spec{Isolation: api.LevelProcess, Resources: api.Resources{MemoryMB: 256}})
	if err != nil {
		return err
	}
	defer serve.Terminate(ctx, cl, sb.ID)

	env := append(os.Environ(), "AIRLOCK_HOST="+url, "AIRLOCK_TOKEN="+key)
	script := func(name string, argv ...string) *peer {
		return &peer{name: name, run: func(ctx context.Context, n int) ([]time.Duration, error) {
			return scriptCalls(ctx, root, env, append(argv, sb.ID, strconv.Itoa(warmup+n)), n)
		}}
	}
	peers := []*peer{
		{name: "Go SDK", run: func(ctx context.Context, n int) ([]time.Duration, error) { return goCalls(ctx, cl, sb.ID, n) }},
		{name: "curl", run: func(ctx context.Context, n int) ([]time.Duration, error) { return curlCalls(ctx, url, key, sb.ID, n) }},
		script("TypeScript SDK", "node", "sdk/typescript/bench/exec-rtt.mjs"),
		script("Python SDK", "python3", "sdk/python/bench/exec_rtt.py"),
	}
	for r := range c.rounds {
		for i := range peers {
			p := peers[(r+i)%len(peers)]
			ms, err := p.run(ctx, c.n)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			p.ms = append(p.ms, ms...)
		}
	}
	return report(c, peers)
}

// goCalls makes warmup+n execs through the Go SDK and times the last n.
func goCalls(ctx context.Context, cl *client.Client, id string, n int) ([]time.Duration, error) {
	var ds []time.Duration
	for i := range warmup + n {
		t0 := time.Now()
		res, err := cl.Exec(ctx, id, api.ExecRequest{Command: api.Command{"true"}})
		if err != nil || res.ExitCode != 0 {
			return nil, serve.ExecError("exec", res, err)
		}
		if i >= warmup {
			ds = append(ds, time.Since(t0))
		}
	}
	return ds, nil
}

// curlCalls makes warmup+n execs with one curl process, which keeps its connection for all of
// them, and takes each transfer's time_total.
func curlCalls(ctx context.Context, url, key, id string, n int) ([]time.Duration, error) {
	args := []string{"-sS", "-w", "%{http_code} %{time_total}\n",
		"-H", "Authorization: Bearer " + key, "-H", "Content-Type: application/json", "-d", `{"command":["true"]}`}
	for range warmup + n {
		args = append(args, "-o", "/dev/null", url+"/api/v1/sandboxes/"+id+"/exec") // -o applies to one URL
	}
	out, err := exec.CommandContext(ctx, "curl", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("curl: %w", err)
	}
	var ds []time.Duration
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		code, secs, _ := strings.Cut(line, " ")
		s, err := strconv.ParseFloat(secs, 64)
		if code != "200" || err != nil {
			return nil, fmt.Errorf("curl: transfer %d: %q", i, line)
		}
		if i >= warmup {
			ds = append(ds, time.Duration(s*float64(time.Second)))
		}
	}
	if len(ds) != n {
		return nil, fmt.Errorf("curl: %d timed transfers, want %d", len(ds), n)
	}
	return ds, nil
}

// scriptCalls runs an SDK's bench script (argv, in the repository root), which makes the calls and
// prints {"ms": [...]}: the round trips after its warm-up ones, in milliseconds.
func scriptCalls(ctx context.Context, root string, env, argv []string, n int) ([]time.Duration, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = root, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv[:2], " "), err, stderr.String())
	}
	var got struct {
		Ms []float64 `json:"ms"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("%s: %w in %q", argv[1], err, out)
	}
	var ds []time.Duration
	for _, ms := range got.Ms {
		ds = append(ds, time.Duration(ms*float64(time.Millisecond)))
	}
	if len(ds) < n {
		return nil, fmt.Errorf("%s: %d timings, want %d", argv[1], len(ds), n)
	}
	return ds[len(ds)-n:], nil
}

func report(c config, peers []*peer) error {
	goP50 := stats.Summarize(peers[0].ms).P50
	fmt.Printf("exec round trip of `true` into a ready process sandbox, one call at a time on a kept-alive connection\n")
	fmt.Printf("(%d rounds × %d calls per peer, after %d warm-up calls each round)\n\n", c.rounds, c.n, warmup)
	fmt.Printf("%-16s %8s %8s %8s %8s  %s\n", "peer", "p50 ms", "p90 ms", "p99 ms", "min ms", "vs Go SDK (p50)")
	var results []result
	missed := false
	for _, p := range peers {
		s := stats.Summarize(p.ms)
		r := result{Name: p.name, Summary: s, N: len(p.ms), VsGoSDK: s.P50 / goP50}
		results = append(results, r)
		verdict := ""
		if strings.HasSuffix(p.name, " SDK") && p.name != "Go SDK" {
			verdict = fmt.Sprintf("  (target ≤ %.1f×: ok)", target)
			if r.VsGoSDK > target {
				verdict, missed = fmt.Sprintf("  (target ≤ %.1f×: MISSED)", target), true
			}
		}
		fmt.Printf("%-16s %8.2f %8.2f %8.2f %8.2f  %.2f×%s\n", p.name, s.P50, s.P90, s.P99, s.Min, r.VsGoSDK, verdict)
	}
	if c.jsonPath != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(c.jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if missed {
		return fmt.Errorf("an SDK's p50 is over %.1f× the Go SDK's", target)
	}
	return nil
}
