package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/test/bench/serve"
	"github.com/airlockrun/airlock/test/bench/stats"
)

// targetRestore is issue 6's: a container-level restore within 1.1× raw `runsc restore`, p50.
const targetRestore = 1.1

// counter is the restore workload: a shell counting in its memory, shown in /tmp/count.
var counter = workload{Name: "counter", Argv: []string{"/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"}}

type restoreRow struct {
	Airlock   stats.Summary `json:"airlock"`
	Cold      stats.Summary `json:"airlock_cold"`
	Raw       stats.Summary `json:"raw"`
	Ratio     float64       `json:"ratio_p50"`
	ColdRatio float64       `json:"cold_ratio_p50"`
	ImageMB   float64       `json:"airlock_snapshot_mb"`
	AirlockMS []float64     `json:"airlock_samples_ms"`
	ColdMS    []float64     `json:"airlock_cold_samples_ms"`
	RawMS     []float64     `json:"raw_samples_ms"`
}

// restores measures a restore with memory under runsc: through daemon d, POST .../restore of a
// snapshot of a sandbox whose counter runs in the background (the snapshot's layer extracted
// into the container made ahead for the restore, `runsc restore` of its memory image into it,
// init dialling back, the swap, the store); the same through daemon cold, whose configuration
// turns prepared restores off (a new bundle, and `runsc restore` making its container); and
// `runsc restore --detach` of a checkpoint of the raw bundle running the same counter, taken with
// the same flags. The clocks stop when the runtime has the container running again; off the
// clock, each restored counter is read, and the raw container deleted.
func (w *world) restores(c config, d, cold *daemon) (*restoreRow, error) {
	counting := func(read func() (string, error)) error {
		out, err := read()
		if err != nil {
			return fmt.Errorf("restored counter: %w", err)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(out)); n < 1 {
			return fmt.Errorf("restored counter reads %q", out)
		}
		return nil
	}
	airlock, imageMB, done, err := restoreRunner(d, "airlock-restore", counting)
	if err != nil {
		return nil, err
	}
	defer done()
	coldRunner, _, coldDone, err := restoreRunner(cold, "airlock-cold-restore", counting)
	if err != nil {
		return nil, err
	}
	defer coldDone()

	bundle, err := w.rawBundle("runsc", counter)
	if err != nil {
		return nil, err
	}
	rt := func(args ...string) []string {
		return append(append([]string{runscPath}, w.rawGlobal("runsc")...), args...)
	}
	image := w.path("raw-image")
	if _, _, err := w.timed("raw-run", rt("run", "--detach", "--bundle", bundle, "rawsave"), "-"); err != nil {
		return nil, err
	}
	time.Sleep(300 * time.Millisecond)
	if _, _, err := w.timed("raw-checkpoint", rt("checkpoint", "--compression", "none", "--image-path", image, "rawsave"), "-"); err != nil {
		return nil, err
	}
	if _, _, err := w.timed("raw-delete", rt("delete", "--force", "rawsave"), "-"); err != nil {
		return nil, err
	}
	raw := runner{Name: "raw-restore", run: func() (time.Duration, error) {
		id := fmt.Sprintf("rawrestore-%d", w.id.Add(1))
		took, _, err := w.timed("raw-restore", rt("restore", "--detach", "--image-path", image, "--bundle", bundle, id), "-")
		if err == nil {
			err = counting(func() (string, error) {
				_, out, err := w.timed("raw-exec", rt("exec", id, "cat", "/tmp/count"), "-")
				return out, err
			})
		}
		if _, _, derr := w.timed("raw-delete", rt("delete", "--force", id), "-"); err == nil {
			err = derr
		}
		return took, err
	}}

	cells := []*cell{{workload: counter, runtime: "runsc", side: "airlock", runner: airlock},
		{workload: counter, runtime: "runsc", side: "cold", runner: coldRunner},
		{workload: counter, runtime: "runsc", side: "raw", runner: raw}}
	fmt.Fprintf(os.Stderr, "restore: %d warm-up + %d measured rounds\n", c.warmup, c.rounds)
	if err := rounds(c.warmup, c.rounds, cells, d.settle); err != nil {
		return nil, err
	}
	a, cl, r := stats.Summarize(cells[0].samples), stats.Summarize(cells[1].samples), stats.Summarize(cells[2].samples)
	return &restoreRow{Airlock: a, Cold: cl, Raw: r, Ratio: stats.Ratio(a.P50, r.P50), ColdRatio: stats.Ratio(cl.P50, r.P50),
		ImageMB: imageMB, AirlockMS: stats.Millis(cells[0].samples), ColdMS: stats.Millis(cells[1].samples),
		RawMS: stats.Millis(cells[2].samples)}, nil
}

// restoreRunner makes, through daemon d, a runsc sandbox running the counter and a snapshot of
// it with memory, and returns a runner named name that restores the sandbox to it, the
// snapshot's size, and what removes both.
func restoreRunner(d *daemon, name string, counting func(func() (string, error)) error) (runner, float64, func(), error) {
	ctx := context.Background()
	// Not the pool's shape: this sandbox is made cold, and no pool refills behind it.
	spec := poolSpec("runsc")
	spec.Resources = api.Resources{DiskMB: 96}
	sb, err := d.c.Create(ctx, spec)
	if err != nil {
		return runner{}, 0, nil, err
	}
	script := strings.Join(counter.Argv[2:], " ")
	if r, err := d.c.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"/bin/sh", "-c", "sh -c '" + script + "' & sleep 0.3"}}); err != nil || r.ExitCode != 0 {
		serve.Terminate(ctx, d.c, sb.ID)
		return runner{}, 0, nil, serve.ExecError("start the counter", r, err)
	}
	yes := true
	snap, err := d.c.Snapshot(ctx, sb.ID, api.SnapshotRequest{Name: "bench", Memory: &yes})
	if err != nil {
		serve.Terminate(ctx, d.c, sb.ID)
		return runner{}, 0, nil, err
	}
	done := func() {
		serve.Terminate(ctx, d.c, sb.ID)
		serve.DeleteSnapshot(ctx, d.c, snap.ID)
	}
	return runner{Name: name, run: func() (time.Duration, error) {
		start := time.Now()
		if _, err := d.c.Restore(ctx, sb.ID, snap.ID); err != nil {
			return 0, err
		}
		took := time.Since(start)
		return took, counting(func() (string, error) {
			r, err := d.c.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"cat", "/tmp/count"}})
			return r.Stdout, err
		})
	}}, snap.SizeMB, done, nil
}
