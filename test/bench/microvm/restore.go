package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
	"github.com/airlockrun/airlock/test/bench/serve"
)

// measureRestore saves a default sandbox with its memory (a counter running in it) and restores
// it n times, each restore on the clock until the sandbox is ready, checked by the counter going
// on, and destroyed off the clock. It returns the times and the memory image's size.
func measureRestore(d *microvm.Driver, n int) ([]time.Duration, int64, error) {
	sb, err := create(d)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sb.Destroy(context.Background()) }()
	if _, err := execOnce(sb, "sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done' >/dev/null 2>&1 &"); err != nil {
		return nil, 0, err
	}
	time.Sleep(time.Second)
	mem, err := os.MkdirTemp("", "airlock-bench-microvm-mem-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(mem)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var layer bytes.Buffer
	if saved, err := sb.(driver.Snapshotter).Snapshot(ctx, &layer, mem); err != nil || !saved {
		return nil, 0, fmt.Errorf("snapshot with memory: saved %v: %w", saved, err)
	}
	var size int64
	ents, _ := os.ReadDir(mem)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
	}
	spec := sandbox.Spec{Isolation: d.Name()}
	sandbox.SetDefaults(&spec)
	var out []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		rs, err := d.Restore(ctx, sandbox.NewID("sbx_"), spec, bytes.NewReader(layer.Bytes()), mem)
		if err != nil {
			return nil, 0, fmt.Errorf("restore %d: %w", i, err)
		}
		out = append(out, time.Since(t0))
		a, aerr := count(rs)
		time.Sleep(200 * time.Millisecond)
		b, berr := count(rs)
		_ = rs.Destroy(context.Background())
		if aerr != nil || berr != nil || b <= a {
			return nil, 0, fmt.Errorf("restore %d: the counter does not go on (%d then %d): %w", i, a, b, errors.Join(aerr, berr))
		}
	}
	return out, size, nil
}

// count reads the counter of measureRestore.
func count(sb driver.Sandbox) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{"cat", "/tmp/count"}, Capture: true})
	if err != nil {
		return 0, err
	}
	var c int
	_, err = fmt.Sscan(string(res.Stdout), &c)
	return c, err
}

// poolSize is the daemon's pool: a claim and its refill overlap no other claim (settle).
const poolSize = 2

// measureClaims starts airlock serve with a pool of microvm sandboxes and times n creates the
// pool answers, each through the Go SDK until the sandbox is returned ready, then terminated and
// the pool refilled off the clock.
func measureClaims(airlock, kernelDir string, n int) ([]time.Duration, error) {
	bin, err := filepath.Abs(airlock)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (CGO_ENABLED=0 go build -o bin/airlock ./cmd/airlock, or pass -airlock)", err)
	}
	dir, err := os.MkdirTemp("", "airlock-bench-microvm-pool-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	spec := api.Spec{Isolation: api.LevelMicroVM}
	cfg, err := json.Marshal(map[string]any{
		"microvm": map[string]any{"kernelDir": kernelDir},
		"pools":   []api.Pool{{Name: "vm", Spec: spec, Size: poolSize, RefillPerSecond: 100}},
	})
	if err != nil {
		return nil, err
	}
	// The daemon's microvm state (its initramfs) outlives it by design; not the bench's.
	defer os.RemoveAll(microvm.StateDirOf(uidalloc.InstanceOf(filepath.Join(dir, "data"))))
	c, stop, err := serve.StartClient(bin, dir, string(cfg))
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx := context.Background()
	settle := func() error { return serve.Settle(ctx, c, 5*time.Minute, 20*time.Millisecond) }
	var out []time.Duration
	for i := 0; i < n; i++ {
		if err := settle(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		sb, err := c.Create(ctx, spec)
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
		if sb.Reason != sandbox.ReasonWarm {
			serve.Terminate(ctx, c, sb.ID)
			return nil, fmt.Errorf("sandbox %s was not claimed from the pool (status %s, reason %q)", sb.ID, sb.Status, sb.Reason)
		}
		r, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"echo", "ok"}})
		serve.Terminate(ctx, c, sb.ID)
		if err != nil || strings.TrimSpace(r.Stdout) != "ok" {
			return nil, fmt.Errorf("exec in a claimed VM: %+v: %w", r, err)
		}
	}
	return out, nil
}
