// Command bench compares how long airlock takes to start a program with the nearest
// alternatives on the same host: bubblewrap set up with airlock's namespaces and host binds,
// plain util-linux unshare, and the program run directly.
//
// Usage, from the repository root after building bin/airlock:
//
//	go run ./test/bench [-airlock PATH] [-rounds N] [-warmup N] [-workloads true,python] [-json FILE] [-quick]
//
// Every round runs every (workload, runner) pair once, starting at a different pair each
// round, so slow drift of the host (thermal, page cache, other tenants) lands on all runners
// alike instead of on whichever ran last. Linux only; run it as root, like airlock itself.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// minRounds is the floor: fewer samples make p90 a single outlier.
const minRounds = 30

// config is the parsed command line.
type config struct {
	airlock   string
	rounds    int
	warmup    int
	jsonPath  string
	workloads string
	quick     bool
}

func main() {
	var c config
	flag.StringVar(&c.airlock, "airlock", "./bin/airlock", "path to the airlock binary")
	flag.IntVar(&c.rounds, "rounds", minRounds, fmt.Sprintf("measured rounds (at least %d unless -quick)", minRounds))
	flag.IntVar(&c.warmup, "warmup", 3, "unmeasured rounds first, to fill caches (airlock's generated /etc, page cache)")
	flag.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&c.workloads, "workloads", "true,python", "comma-separated workloads: true, python")
	flag.BoolVar(&c.quick, "quick", false, "allow fewer than 30 rounds (for smoke tests; numbers are noisy)")
	flag.Parse()
	if flag.NArg() > 0 {
		fatal(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	if err := run(c, os.Stdout); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func run(c config, out io.Writer) error {
	switch {
	case c.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case c.rounds < minRounds && !c.quick:
		return fmt.Errorf("-rounds %d is below the minimum of %d; pass -quick to allow it", c.rounds, minRounds)
	case c.warmup < 0:
		return errors.New("-warmup must not be negative")
	}
	ws, err := parseWorkloads(c.workloads)
	if err != nil {
		return err
	}
	t, err := findTools(c.airlock)
	if err != nil {
		return err
	}
	bw, err := bwrapArgs()
	if err != nil {
		return fmt.Errorf("probe host for bwrap binds: %w", err)
	}
	facts := gatherFacts(t)

	var cells []*cell
	results := make([]*workloadResult, len(ws))
	for i, w := range ws {
		results[i] = &workloadResult{Workload: w}
		for _, r := range runnersFor(t, w, bw) {
			cl := &cell{runner: r}
			results[i].cells = append(results[i].cells, cl)
			cells = append(cells, cl)
		}
	}
	total := c.warmup + c.rounds
	fmt.Fprintf(os.Stderr, "bench: %d warm-up + %d measured rounds of %d runs each\n", c.warmup, c.rounds, len(cells))
	for r := 0; r < total; r++ {
		start := r % len(cells)
		for i := range cells {
			cl := cells[(start+i)%len(cells)]
			d, err := timeRun(cl.runner.Argv)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, cl.runner.Name, err)
			}
			if r >= c.warmup {
				cl.samples = append(cl.samples, d)
			}
		}
	}

	rep := report{Host: facts, Rounds: c.rounds, Warmup: c.warmup, BwrapArgs: bw}
	for _, wr := range results {
		rep.Workloads = append(rep.Workloads, wr.finish())
	}
	printReport(out, rep)
	if c.jsonPath != "" {
		if err := writeJSON(c.jsonPath, rep); err != nil {
			return fmt.Errorf("write %s: %w", c.jsonPath, err)
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", c.jsonPath)
	}
	return nil
}

// cell is one runner for one workload and the samples it has collected.
type cell struct {
	runner  runner
	samples []time.Duration
}

// timeRun runs argv once and returns its wall time. The clock covers the whole of cmd.Run,
// fork and exec of the wrapper included, because that is what a caller of each tool pays.
// stderr is kept only so a failure can be shown; every runner is treated the same way.
func timeRun(argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %w\nstderr:\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return d, nil
}
