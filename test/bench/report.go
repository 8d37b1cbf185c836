package main

import (
	"github.com/airlockrun/airlock/test/bench/stats"

	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// report is everything one benchmark run found; it is both printed and written as JSON.
type report struct {
	Host      hostFacts        `json:"host"`
	Rounds    int              `json:"rounds"`
	Warmup    int              `json:"warmup"`
	BwrapArgs []string         `json:"bwrap_args"`
	Workloads []workloadReport `json:"workloads"`
}

type workloadReport struct {
	workload
	Runners []runnerReport `json:"runners"`
	// Pointers so a ratio that cannot be computed becomes JSON null: encoding/json rejects NaN.
	RatioAirlockBwrapP50   *float64 `json:"ratio_airlock_bwrap_p50"`
	RatioAirlockUnshareP50 *float64 `json:"ratio_airlock_unshare_p50"`
}

type runnerReport struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	stats.Summary
	// SamplesMS are in run order, so drift within a run can be checked afterwards.
	SamplesMS []float64 `json:"samples_ms"`
}

// workloadResult collects one workload's cells while the rounds run.
type workloadResult struct {
	Workload workload
	cells    []*cell
}

func (w *workloadResult) finish() workloadReport {
	wr := workloadReport{workload: w.Workload}
	p50 := map[string]float64{}
	for _, c := range w.cells {
		s := stats.Summarize(c.samples)
		p50[c.runner.Name] = s.P50
		wr.Runners = append(wr.Runners, runnerReport{
			Name: c.runner.Name, Argv: c.runner.Argv, Summary: s, SamplesMS: stats.Millis(c.samples),
		})
	}
	wr.RatioAirlockBwrapP50 = finite(stats.Ratio(p50[runAirlock], p50[runBwrap]))
	wr.RatioAirlockUnshareP50 = finite(stats.Ratio(p50[runAirlock], p50[runUnshare]))
	return wr
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func printReport(out io.Writer, r report) {
	h := r.Host
	fmt.Fprintln(out, "host:")
	fmt.Fprintf(out, "  kernel         %s\n", h.Kernel)
	fmt.Fprintf(out, "  cgroup         %s\n", h.Cgroup)
	fmt.Fprintf(out, "  rcu_expedited  %s\n", h.RCUExpedited)
	fmt.Fprintf(out, "  nproc          %d\n", h.NProc)
	fmt.Fprintf(out, "  airlock        %s\n", h.AirlockVersion)
	fmt.Fprintf(out, "  bwrap          %s\n", h.BwrapVersion)
	fmt.Fprintf(out, "  unshare        %s\n", h.UnshareVersion)
	fmt.Fprintln(out)
	fmt.Fprintln(out, "runners:")
	fmt.Fprintln(out, "  airlock   airlock run --isolation process -- W (all namespaces, cgroup limits, seccomp, Landlock, generated /etc)")
	fmt.Fprintln(out, "  bwrap     bwrap with airlock's namespaces and host binds; binds the host /etc read-only")
	fmt.Fprintln(out, "            (bwrap has no generated-/etc feature); no cgroup limits, seccomp or Landlock")
	fmt.Fprintln(out, "  unshare   unshare --fork --pid --mount --net --ipc --uts W (the issue's spec: no user")
	fmt.Fprintln(out, "            or cgroup namespace, runs as host root, no binds)")
	fmt.Fprintln(out, "  baseline  W directly on the host: the workload's own cost")
	fmt.Fprintf(out, "\n%d measured rounds after %d warm-up rounds, interleaved; times in ms\n", r.Rounds, r.Warmup)
	for _, w := range r.Workloads {
		fmt.Fprintf(out, "\nworkload %s: %s\n", w.Name, shellJoin(w.Argv))
		fmt.Fprintf(out, "  %-9s %8s %8s %8s %8s\n", "runner", "p50", "p90", "min", "mean")
		for _, rr := range w.Runners {
			fmt.Fprintf(out, "  %-9s %8.2f %8.2f %8.2f %8.2f\n", rr.Name, rr.P50, rr.P90, rr.Min, rr.Mean)
		}
		fmt.Fprintf(out, "ratio airlock/bwrap p50 = %s\n", fmtRatio(w.RatioAirlockBwrapP50))
		fmt.Fprintf(out, "ratio airlock/unshare p50 = %s\n", fmtRatio(w.RatioAirlockUnshareP50))
	}
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *v)
}

func writeJSON(path string, r report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// shellJoin quotes the arguments that need it, so a printed command line can be pasted into
// a shell as is (print(1) would otherwise be a syntax error).
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`()[]{}<>|&;*?!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
