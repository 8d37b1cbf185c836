// Command tools measures the tool gateway (issue 27), side by side in one run:
//
//   - gateway overhead per call: an http tool (the operator's, egress daemon) against a local
//     server on loopback, through POST /api/v1/tools/{name}/call — the allowlist (a policy that
//     allows it), schema validation, a rate limit, the tool.call event — beside the same request
//     sent to the server directly; the figure is the difference of their p50s;
//   - run_code on a warm pool: the built-in run_code with the workspace claimed from a warm pool
//     (the first call claims it; then each call is an exec in it, and the files it wrote), beside
//     the same code through POST /api/v1/sandboxes/{id}/exec in a sandbox of the same pool.
//
// Two more runners split the overhead: GET /healthz (the API's hop alone: key, envelope) and GET
// /api/v1/tools/local_http (the hop and the tool's lookup). The daemon's own histogram of the
// call (airlock_tool_call_seconds, mean) is printed too: the gateway's steps and the upstream
// request, without the hop.
//
// Rounds run each runner once, in a random order within the round, so that drift hits all alike.
// Targets: p50 added ≤ 0.5 ms; run_code p50 within 1.2× of exec. A missed target is printed
// ("not met"); only errors exit non-zero.
//
//	go run ./test/bench/tools -airlock bin/airlock [-n 300] [-warmup 30] [-json FILE]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/test/bench/serve"
	"github.com/airlockrun/airlock/test/bench/stats"
)

const (
	targetAddedMs = 0.5
	targetRatio   = 1.2
)

// runner is one thing timed per round.
type runner struct {
	Name string `json:"name"`
	run  func(ctx context.Context) error
}

// result is one runner's figures.
type result struct {
	Name    string        `json:"name"`
	Summary stats.Summary `json:"summary"`
}

// report is what one run found.
type report struct {
	Rounds  int      `json:"rounds"`
	Warmup  int      `json:"warmup"`
	Results []result `json:"results"`
	// AddedP50Ms is the http tool's p50 minus the direct request's; RatioP50 run_code's over exec's.
	AddedP50Ms float64 `json:"gateway_added_p50_ms"`
	RatioP50   float64 `json:"run_code_over_exec_p50"`
	// InDaemonMeanMs is the mean of the daemon's airlock_tool_call_seconds for local_http: from
	// the call's arrival in the gateway to its result (the upstream request included), without
	// the API's own hop.
	InDaemonMeanMs float64 `json:"in_daemon_mean_ms"`
	// ServerConns is how many connections the local server accepted in the whole run.
	ServerConns int64 `json:"local_server_connections"`
}

func main() {
	bin := flag.String("airlock", "./bin/airlock", "path to the airlock binary")
	n := flag.Int("n", 300, "measured rounds")
	warmup := flag.Int("warmup", 30, "rounds run first and not measured")
	jsonPath := flag.String("json", "", "also write the results as JSON to this file")
	local := flag.Bool("local-server", false, "run as the benchmark's local server (internal)")
	flag.Parse()
	if *local {
		serveLocal()
		return
	}
	rep, err := run(*bin, *n, *warmup)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tools benchmark:", err)
		os.Exit(1)
	}
	printReport(os.Stdout, rep)
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "tools benchmark:", err)
			os.Exit(1)
		}
	}
}

// config is the daemon's: the process level; a warm pool whose spec is the tools workspace's;
// the operator's http tool to the local server, with a schema, a rate limit that is never
// reached, and a policy that allows it (so every step of the gateway runs).
func config(serverURL string) string {
	spec := `{"isolation": "process", "resources": {"memoryMb": 256, "diskMb": 256}, "network": {"egressPolicy": "none"}}`
	return `{"defaults": {"isolation": "process"},
 "pools": [{"name": "warm", "size": 2, "spec": ` + spec + `}],
 "tools": {
  "workspace": {"pool": "warm", "reuse": "caller"},
  "tools": [{"name": "local_http", "tenants": ["*"], "rateLimit": "1000000/1s",
    "inputSchema": {"type": "object", "required": ["q"], "additionalProperties": false,
      "properties": {"q": {"type": "string", "pattern": "^[a-z0-9]{1,32}$"}}},
    "http": {"url": "` + serverURL + `/echo", "query": {"q": "{{q}}"}, "egress": "daemon"}}],
  "policies": [{"name": "bench", "tenant": "*", "allow": ["local_http", "run_code"]}]
 }}`
}

// startLocalServer starts this binary as the local server and returns its URL, a function that
// asks it how many connections it accepted (a handful: the direct client and the daemon both kept
// theirs alive), and a stop.
func startLocalServer() (url string, conns func() int64, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	cmd := exec.Command(self, "-local-server")
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	stop = func() {
		in.Close()     // the server ends when its stdin does
		_ = cmd.Wait() // its exit changes no figure
	}
	var addr string
	if _, err := fmt.Fscanln(out, &addr); err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("the local server: %w", err)
	}
	url = "http://" + addr
	conns = func() int64 {
		resp, err := http.Get(url + "/conns")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var n int64
		_, _ = fmt.Fscan(resp.Body, &n) // -1 stays when unreadable
		return n
	}
	return url, conns, stop, nil
}

// serveLocal is the local server's process: it answers /echo with a small JSON object (as a
// tool's API would) and /conns with how many connections it accepted, until stdin ends.
func serveLocal() {
	var accepted atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "local server:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"q":%q,"answer":"local"}`, r.URL.Query().Get("q"))
	})
	mux.HandleFunc("/conns", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, accepted.Load()) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }() // ends with the process
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func run(bin string, n, warmup int) (report, error) {
	rep := report{Rounds: n, Warmup: warmup}
	ctx := context.Background()
	// The local server: a small answer, as a tool's API would give.
	// The local server is a process of its own (this binary with -local-server), as a tool's
	// API would be: the direct call and the daemon's both cross to it from another process.
	serverURL, conns, stopServer, err := startLocalServer()
	if err != nil {
		return rep, err
	}
	defer stopServer()

	dir, err := os.MkdirTemp("", "airlock-bench-tools-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	c, stop, err := serve.StartClient(bin, dir, config(serverURL))
	if err != nil {
		return rep, err
	}
	defer stop()
	if err := waitPool(ctx, c); err != nil {
		return rep, err
	}
	// The exec baseline's sandbox: the pool's shape, so it is claimed from it as the workspace is.
	sb, err := c.Create(ctx, api.Spec{Isolation: api.LevelProcess, Resources: api.Resources{MemoryMB: 256, DiskMB: 256}, Network: api.Network{EgressPolicy: api.EgressNone}})
	if err != nil {
		return rep, err
	}
	defer serve.Terminate(ctx, c, sb.ID)

	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	runners := []runner{
		{"http: direct to the local server", func(ctx context.Context) error {
			resp, err := direct.Get(serverURL + "/echo?q=bench")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.Copy(io.Discard, resp.Body)
			return err
		}},
		{"http: through the gateway (local_http)", func(ctx context.Context) error {
			res, err := c.CallTool(ctx, "local_http", api.ToolCallRequest{Arguments: map[string]any{"q": "bench"}})
			if err == nil && (res.IsError || !strings.Contains(res.Content[0].Text, "local")) {
				err = fmt.Errorf("local_http: %+v", res)
			}
			return err
		}},
		{"API hop + lookup: GET /api/v1/tools/local_http", func(ctx context.Context) error {
			_, err := c.Tool(ctx, "local_http")
			return err
		}},
		{"API hop only: GET /healthz", func(ctx context.Context) error {
			_, err := c.Health(ctx)
			return err
		}},
		{"python print(6*7): POST .../exec", func(ctx context.Context) error {
			res, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Command{"python3", "-c", "print(6*7)"}})
			if err == nil && (res.ExitCode != 0 || res.Stdout != "42\n") {
				err = fmt.Errorf("exec: %+v", res)
			}
			return err
		}},
		{"python print(6*7): run_code (warm pool)", func(ctx context.Context) error {
			res, err := c.CallTool(ctx, api.ToolRunCode, api.ToolCallRequest{Arguments: map[string]any{"code": "print(6*7)"}})
			if err == nil && (res.IsError || res.Content[0].Text != "42\n") {
				err = fmt.Errorf("run_code: %+v", res)
			}
			return err
		}},
	}
	samples := make([][]time.Duration, len(runners))
	order := make([]int, len(runners))
	for i := range order {
		order[i] = i
	}
	fmt.Fprintf(os.Stderr, "tools benchmark: %d rounds after %d warm-up\n", n, warmup)
	for round := range n + warmup {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			t0 := time.Now()
			if err := runners[i].run(ctx); err != nil {
				return rep, fmt.Errorf("%s: %w", runners[i].Name, err)
			}
			if round >= warmup {
				samples[i] = append(samples[i], time.Since(t0))
			}
		}
	}
	for i, r := range runners {
		rep.Results = append(rep.Results, result{Name: r.Name, Summary: stats.Summarize(samples[i])})
	}
	rep.AddedP50Ms = rep.Results[1].Summary.P50 - rep.Results[0].Summary.P50
	rep.ServerConns = conns()
	if mean, err := inDaemon(c.BaseURL()); err == nil {
		rep.InDaemonMeanMs = mean
	} else {
		fmt.Fprintln(os.Stderr, "tools benchmark: the daemon's own timing:", err)
	}
	rep.RatioP50 = rep.Results[5].Summary.P50 / rep.Results[4].Summary.P50
	return rep, nil
}

// waitPool waits until the pool has its sandboxes ready, so that the first claims are warm.
func waitPool(ctx context.Context, c *client.Client) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := c.Pool(ctx, "warm")
		if err == nil && p.Ready >= 2 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the warm pool: %w", err)
			}
			return fmt.Errorf("the warm pool is not ready within 60 s: %+v", p)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inDaemon is the mean duration, in ms, the daemon measured of local_http's allowed calls
// (warm-up included), from its Prometheus histogram.
func inDaemon(base string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	f := fams["airlock_tool_call_seconds"]
	if f == nil {
		return 0, fmt.Errorf("no airlock_tool_call_seconds")
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if h := m.GetHistogram(); labels["tool"] == "local_http" && labels["decision"] == "allow" && h.GetSampleCount() > 0 {
			return h.GetSampleSum() / float64(h.GetSampleCount()) * 1000, nil
		}
	}
	return 0, fmt.Errorf("no local_http series")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func printReport(w io.Writer, rep report) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "runner\tp50 ms\tp90 ms\tp99 ms\tmin ms\tmean ms\t\n")
	for _, r := range rep.Results {
		s := r.Summary
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.Name, s.P50, s.P90, s.P99, s.Min, s.Mean)
	}
	tw.Flush()
	fmt.Fprintf(w, "\ngateway overhead (http tool p50 − direct p50): %.3f ms (target ≤ %.1f ms: %s)\n", rep.AddedP50Ms, targetAddedMs, verdict(rep.AddedP50Ms <= targetAddedMs))
	if rep.InDaemonMeanMs > 0 {
		fmt.Fprintf(w, "  inside the daemon's gateway, mean (its airlock_tool_call_seconds, the upstream request included): %.3f ms\n", rep.InDaemonMeanMs)
	}
	fmt.Fprintf(w, "run_code on a warm pool / exec, p50: %.2f× (target ≤ %.1f×: %s)\n", rep.RatioP50, targetRatio, verdict(rep.RatioP50 <= targetRatio))
	fmt.Fprintf(w, "(%d rounds after %d warm-up; each round runs every runner once, in a random order; the local server, a process of its own, accepted %d connections)\n", rep.Rounds, rep.Warmup, rep.ServerConns)
}
