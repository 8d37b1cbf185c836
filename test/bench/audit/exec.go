package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/test/bench/serve"
	"github.com/airlockrun/airlock/test/bench/stats"
)

// workload is one command the exec round trip runs.
type workload struct {
	Name    string      `json:"name"`
	Command api.Command `json:"command"`
	// Setup runs once in both sandboxes before the workload, untimed; what it leaves stays for
	// the workloads after it.
	Setup api.Command `json:"setup,omitempty"`
}

// With audit on, the writable layer is scanned after every exec for its file changes (the
// exec.files event), so the cost depends on what the layer holds: the last workload runs with
// 5,000 files in it, as after installing a few packages.
var workloads = []workload{
	{Name: "true", Command: api.Command{"true"}},
	{Name: "write 3 files", Command: api.Shell("echo x > /tmp/f; mkdir -p /tmp/d; echo y > /tmp/d/g")},
	{Name: "true, 5,000 files in the layer", Command: api.Command{"true"},
		Setup: api.Shell("mkdir -p /workspace/many && cd /workspace/many && i=0 && while [ $i -lt 5000 ]; do echo $i > f$i; i=$((i+1)); done")},
}

// execRun is one workload's round trips on both daemons.
type execRun struct {
	Workload workload      `json:"workload"`
	On       stats.Summary `json:"audit_on"`
	Off      stats.Summary `json:"audit_off"`
	// RatioP50 is audit on over audit off, p50.
	RatioP50 float64 `json:"ratio_on_off_p50"`
	// FilesEvents is how many exec.files events the audit-on daemon recorded for this workload
	// (0: the binary measured does not scan an exec's file changes).
	FilesEvents int `json:"exec_files_events"`
}

// side is one daemon and its sandbox.
type side struct {
	c  *client.Client
	id string
}

// measureExec starts two daemons, audit on (the default config) and audit off, each with one
// process-level sandbox, and times n sequential execs of each workload on both after warmup
// rounds, in a random order within each round so that drift hits both alike.
func measureExec(bin, dir string, n, warmup int) ([]execRun, error) {
	ctx := context.Background()
	var sides [2]side // 0: audit on, 1: audit off
	for i, cfg := range []string{`{}`, `{"audit": {"disabled": true}}`} {
		c, stop, err := serve.StartClient(bin, filepath.Join(dir, fmt.Sprint("daemon", i)), cfg)
		if err != nil {
			return nil, err
		}
		defer stop()
		sb, err := c.Create(ctx, api.Spec{Isolation: api.LevelProcess})
		if err != nil {
			return nil, err
		}
		defer serve.Terminate(ctx, c, sb.ID)
		sides[i] = side{c, sb.ID}
	}
	var runs []execRun
	for _, w := range workloads {
		for _, s := range sides {
			if w.Setup == nil {
				break
			}
			if res, err := s.c.Exec(ctx, s.id, api.ExecRequest{Command: w.Setup}); err != nil || res.ExitCode != 0 {
				return nil, serve.ExecError("setup of "+w.Name, res, err)
			}
		}
		since := time.Now()
		var ds [2][]time.Duration
		for round := range warmup + n {
			for _, i := range rand.Perm(2) {
				t0 := time.Now()
				res, err := sides[i].c.Exec(ctx, sides[i].id, api.ExecRequest{Command: w.Command})
				d := time.Since(t0)
				if err != nil || res.ExitCode != 0 {
					return nil, serve.ExecError("exec "+w.Name, res, err)
				}
				if round >= warmup {
					ds[i] = append(ds[i], d)
				}
			}
		}
		r := execRun{Workload: w, On: stats.Summarize(ds[0]), Off: stats.Summarize(ds[1])}
		r.RatioP50 = stats.Ratio(r.On.P50, r.Off.P50)
		var err error
		if r.FilesEvents, err = checkRecorded(ctx, sides, since); err != nil {
			return nil, fmt.Errorf("%s: %w", w.Name, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// checkRecorded checks that the audit-on daemon stored the execs since then and the audit-off
// one stored nothing (so each config did take), and counts the exec.files events stored.
func checkRecorded(ctx context.Context, sides [2]side, since time.Time) (files int, err error) {
	time.Sleep(300 * time.Millisecond) // the log writes within 100 ms
	count := func(s side, typ string) (int, error) {
		total := 0
		for o := (client.EventOptions{Type: typ, Since: since, Limit: 1000}); ; {
			p, err := s.c.Events(ctx, s.id, o)
			if err != nil || len(p.Events) == 0 {
				return total, err
			}
			total, o.After = total+len(p.Events), p.Next
		}
	}
	on, err := count(sides[0], api.EventExecExited)
	if err != nil {
		return 0, err
	}
	off, err := count(sides[1], "")
	if err != nil {
		return 0, err
	}
	if on == 0 || off != 0 {
		return 0, fmt.Errorf("the audit-on daemon stored %d exec.exited events and the audit-off one %d events: want some and none", on, off)
	}
	return count(sides[0], api.EventExecFiles)
}
