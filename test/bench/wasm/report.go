package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// report is what one run found; it is printed and, with -json, written as JSON.
type report struct {
	Host       hostFacts `json:"host"`
	Rounds     int       `json:"rounds"`
	Warmup     int       `json:"warmup"`
	ColdRounds int       `json:"cold_rounds"`
	Idle       int       `json:"idle"`
	Settle     string    `json:"settle"`
	WorkerIdle string    `json:"worker_idle"`
	// Unavailable are the languages the wasm level could not run here, and why.
	Unavailable []string       `json:"unavailable,omitempty"`
	Warm        []warmRow      `json:"warm"`
	AfterIdle   []afterIdleRow `json:"after_idle"`
	Cold        []coldRow      `json:"cold"`
	Compile     compileReport  `json:"compile"`
	Memory      []idleRow      `json:"idle_memory"`
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func cmdline(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = a
		if strings.ContainsAny(a, " ()'") {
			q[i] = "'" + a + "'"
		}
	}
	return strings.Join(q, " ")
}

// f2 prints a figure, or n/a for one not measured.
func f2(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", x)
}

func f1(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", x)
}

const warmNotes = `
Round trip of POST /api/v1/sandboxes/{id}/exec through the Go SDK, stdout checked ("1\n", exit 0). wasm: the
sandbox's worker — the airlock binary jailed in a process-level sandbox, kept warm between execs — instantiates
the compiled interpreter (CPython for WASI; QuickJS behind a node-style CLI) in wazero. process: the host's /usr/bin/python3 and /usr/bin/node in the sandbox's namespaces.
`

const memoryNotes = `
per sandbox = (daemon ΔRSS + in sandboxes) / count. daemon RSS: VmRSS of airlock serve (/proc/PID/status), median
of 5 readings, before the sandboxes were made and after they sat idle; it includes Go heap the GC has not given
back yet. in sandboxes: what the sandboxes hold outside the daemon's RSS — a sandbox's processes (its init;
a process sandbox's leftovers; an idle wasm sandbox has no worker) and its writable layer (a wasm sandbox's
store, a tmpfs whose pages are in no process's RSS) are in its cgroup: the larger of the cgroups' memory.current (metrics' memoryBytes) and the growth of the
private memory (RssAnon) of the processes below the daemon (on cgroup v1 what an init touched before it joined
its cgroup stays charged elsewhere). host drop: MemAvailable before − after, moved by everything else the host
runs too. descendants Δ: processes below the daemon. Each sandbox ran its command once, then sat idle.
`

const compileNotes = `
The first wasm sandbox of a daemon has the interpreters readied (compiled, or loaded from the cache), one after
the other; whichever of its create and first exec waits for that holds the time, so "to first result" (create +
the first exec) is what a client sees. daemon log: the "took" of the level's "compiled the ... interpreter"
lines.
`

func printReport(w io.Writer, r report) {
	fmt.Fprintf(w, "## wasm level vs process level: warm exec\n\nhost: Linux %s, %d CPUs, %.1f GiB; load average %s at the start, %s at the end\n",
		r.Host.Kernel, r.Host.NProc, float64(r.Host.MemTotal)/(1<<20), r.Host.LoadStart, r.Host.LoadEnd)
	fmt.Fprintf(w, "one daemon, one sandbox per level (default spec, egress none); %d rounds after %d warm-up, the execs of a round in a random order; ms\n\n",
		r.Rounds, r.Warmup)
	for _, u := range r.Unavailable {
		fmt.Fprintf(w, "not measured: %s\n\n", u)
	}
	fmt.Fprintln(w, "| command | wasm p50 | wasm p90 | wasm p99 | process p50 | process p90 | process p99 | wasm/process p50 | target: wasm p50 | |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range r.Warm {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s× | ≤ %.0f ms | %s |\n", cmdline(x.Lang.Command),
			f2(x.Wasm.P50), f2(x.Wasm.P90), f2(x.Wasm.P99), f2(x.Process.P50), f2(x.Process.P90), f2(x.Process.P99),
			f2(x.Ratio), x.Lang.TargetMS, verdict(x.Met))
	}
	fmt.Fprint(w, warmNotes)

	fmt.Fprintf(w, "\n## wasm: first exec after idle (the worker gone after %s without execs), and the next\n\n%d per language, in one sandbox; ms\n\n", r.WorkerIdle, r.ColdRounds)
	fmt.Fprintln(w, "| command | first p50 | first p90 | next p50 | next p90 | warm exec p50 |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, a := range r.AfterIdle {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", a.Lang, f2(a.First.P50), f2(a.First.P90), f2(a.Next.P50), f2(a.Next.P90), f2(a.WarmP50))
	}

	fmt.Fprintf(w, "\n## First exec in a fresh sandbox (cold instance; the interpreters already compiled)\n\n%d sandboxes per row, made, run once and terminated in a random order; ms\n\n", r.ColdRounds)
	fmt.Fprintln(w, "| level | command | create p50 | create p90 | first exec p50 | first exec p90 | warm exec p50 |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, c := range r.Cold {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Level, c.Lang, f2(c.Create.P50), f2(c.Create.P90),
			f2(c.First.P50), f2(c.First.P90), f2(c.WarmP50))
	}

	fmt.Fprintf(w, "\n## Compile: a daemon's first wasm sandbox\n\nms\n\n")
	fmt.Fprint(w, "| compilation cache (DATA_DIR/wasm/cache) | to first result | create |")
	for _, f := range r.Compile.Empty.First {
		fmt.Fprintf(w, " first %s exec |", f.Lang)
	}
	for _, f := range r.Compile.Empty.Ready {
		fmt.Fprintf(w, " daemon log: %s ready |", f.Lang)
	}
	fmt.Fprint(w, "\n|---|---:|---:|")
	for range len(r.Compile.Empty.First) + len(r.Compile.Empty.Ready) {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, row := range []struct {
		name string
		run  compileRun
	}{{"empty: compiles the interpreters", r.Compile.Empty}, {fmt.Sprintf("on disk (%.1f MB), from the first daemon", r.Compile.CacheMB), r.Compile.Cached}} {
		first := row.run.CreateMS
		if len(row.run.First) > 0 {
			first += row.run.First[0].MS
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f |", row.name, first, row.run.CreateMS)
		for _, f := range row.run.First {
			fmt.Fprintf(w, " %.1f |", f.MS)
		}
		for _, f := range row.run.Ready {
			fmt.Fprintf(w, " %.1f |", f.MS)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, compileNotes)

	fmt.Fprintf(w, "\n## Memory per idle sandbox\n\n%d sandboxes per level, each ran its command once, then %s idle; MB (MiB)\n\n", r.Idle, r.Settle)
	fmt.Fprintln(w, "| level | ran | daemon RSS before → after | daemon ΔRSS | in sandboxes | per sandbox | host drop (per sandbox) | descendants Δ | target | |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, m := range r.Memory {
		target, met := "-", "-"
		if m.Met != nil {
			target, met = fmt.Sprintf("≤ %.0f MB", m.TargetMB), verdict(*m.Met)
		}
		fmt.Fprintf(w, "| %s | %s | %.1f → %.1f | %.1f | %.2f (%s) | %.2f | %.1f (%.2f) | %+d | %s | %s |\n", m.Level, m.Lang,
			kbToMB(m.Before.RSSKB), kbToMB(m.After.RSSKB), m.DaemonRSSMB, m.SandboxesMB, m.SandboxesWhat, m.PerSandboxMB,
			m.HostMB, m.HostPerSandboxMB, m.ChildrenDelta, target, met)
	}
	fmt.Fprint(w, memoryNotes)
}
