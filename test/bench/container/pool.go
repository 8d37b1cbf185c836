package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/test/bench/serve"
)

// poolSize is each runtime's warm pool in the daemon: enough for a round's two workloads.
const poolSize = 2

// daemon is `airlock serve` with a warm pool of container sandboxes per runtime: the way a
// service built on airlock takes a container's start off the path of a request.
type daemon struct {
	c    *client.Client
	tr   *http.Transport
	stop func()
	once sync.Once
}

// startDaemon starts airlock serve on a fresh data dir named name whose configuration keeps, with
// pools, a pool of poolSize sandboxes of shape poolSpec(rt) for each runtime, and has container
// settings container.
func (w *world) startDaemon(name string, pools bool, container map[string]any) (*daemon, error) {
	dd, _, err := w.dataDir(name)
	if err != nil {
		return nil, err
	}
	conf := map[string]any{"dataDir": dd, "container": container}
	if pools {
		var ps []api.Pool
		for _, rt := range runtimes {
			ps = append(ps, api.Pool{Name: rt, Spec: poolSpec(rt), Size: poolSize, RefillPerSecond: 100})
		}
		conf["pools"] = ps
	}
	b, _ := json.Marshal(conf)
	cfg := w.path("data", name+"-config.json")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		return nil, err
	}
	out, err := exec.Command(w.airlock, "keys", "create", "--tenant", "bench", "--data-dir", dd).Output()
	if err != nil {
		return nil, fmt.Errorf("keys create: %w", err)
	}
	url, stop, err := serve.Start(w.airlock, dd, cfg)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{}
	c, err := client.New(url, strings.TrimSpace(string(out)), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		stop()
		return nil, err
	}
	return &daemon{c: c, tr: tr, stop: stop}, nil
}

// poolSpec is the shape of the pool of runtime rt, and of the creates that claim from it.
func poolSpec(rt string) api.Spec {
	return api.Spec{Isolation: api.LevelContainer, Runtime: rt}
}

// close stops the daemon, which ends its pools' sandboxes.
func (d *daemon) close() {
	d.once.Do(func() {
		d.stop()
		d.tr.CloseIdleConnections()
	})
}

// settle waits until every pool is full again, so that no refill runs while a runner is timed
// (the raw runtime's runs included).
func (d *daemon) settle() error {
	return serve.Settle(context.Background(), d.c, 2*time.Minute, 5*time.Millisecond)
}

// runner claims a sandbox of runtime rt from the pool, runs argv in it, checks its output and
// terminates it: create, exec and terminate through the Go SDK, on the clock.
func (d *daemon) runner(rt string, argv []string, want string) runner {
	return runner{Name: "pool-" + rt, run: func() (time.Duration, error) {
		ctx := context.Background()
		start := time.Now()
		sb, err := d.c.Create(ctx, poolSpec(rt))
		if err != nil {
			return 0, err
		}
		r, err := d.c.Exec(ctx, sb.ID, api.ExecRequest{Command: argv})
		if _, terr := d.c.Terminate(ctx, sb.ID); err == nil {
			err = terr
		}
		dur := time.Since(start)
		if err == nil && (r.ExitCode != 0 || (want != "-" && r.Stdout != want)) {
			err = fmt.Errorf("%v in a pooled sandbox: exit %d, stdout %q, stderr %q", argv, r.ExitCode, r.Stdout, r.Stderr)
		}
		if err == nil && sb.Reason != sandbox.ReasonWarm {
			err = fmt.Errorf("sandbox %s was not claimed from the pool (reason %q)", sb.ID, sb.Reason)
		}
		return dur, err
	}}
}
