// Command snapshot measures snapshots through airlock's daemon: a sandbox's writable layer holds
// 50 MB of random bytes (incompressible: the worst case for the store), it is saved once, and then
// restored into the same sandbox, and into a new sandbox (a create with fromSnapshot), many
// times. It reports p50 and p99 of each, per level, against the target of issue 6 (a process-level
// restore of a 50 MB layer within 200 ms).
//
//	go run ./test/bench/snapshot -airlock bin/airlock [-n 20] [-mb 50]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/test/bench/serve"
)

// level is one isolation level the benchmark measures.
type level struct {
	name string
	spec api.Spec
}

var levels = []level{
	{"process", api.Spec{Isolation: api.LevelProcess}},
	{"container/runc", api.Spec{Isolation: api.LevelContainer, Runtime: "runc"}},
	{"container/runsc", api.Spec{Isolation: api.LevelContainer, Runtime: "runsc"}},
}

func main() {
	bin := flag.String("airlock", "./bin/airlock", "path to the airlock binary")
	n := flag.Int("n", 20, "measured rounds of each operation")
	mb := flag.Int("mb", 50, "MiB of random bytes in the layer")
	flag.Parse()
	if err := run(*bin, *n, *mb); err != nil {
		fmt.Fprintln(os.Stderr, "snapshot benchmark:", err)
		os.Exit(1)
	}
}

func run(bin string, n, mb int) error {
	dir, err := os.MkdirTemp("", "airlock-bench-snapshot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{}`), 0o644); err != nil {
		return err
	}
	key, err := exec.Command(bin, "keys", "create", "--tenant", "bench", "--data-dir", data).Output()
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	url, stop, err := serve.Start(bin, data, cfg)
	if err != nil {
		return err
	}
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := client.New(url, strings.TrimSpace(string(key)), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return err
	}
	caps, err := c.Capabilities(context.Background())
	if err != nil {
		return err
	}
	fmt.Printf("snapshot benchmark: a %d MiB random file in the writable layer, %d rounds each, through the daemon (SDK)\n\n", mb, n)
	fmt.Printf("%-17s %12s %12s %12s %12s %12s %12s  %s\n", "level", "snapshot", "restore p50", "restore p99", "create p50", "create p99", "stored MiB", "restore target ≤ 200 ms (process)")
	for _, l := range levels {
		if !available(caps, l) {
			fmt.Printf("%-17s unavailable on this host\n", l.name)
			continue
		}
		r, err := measure(c, l, n, mb)
		if err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		verdict := "-"
		if l.name == "process" {
			verdict = "not met"
			if r.restore.p50 <= 200*time.Millisecond {
				verdict = "met"
			}
		}
		fmt.Printf("%-17s %12s %12s %12s %12s %12s %12.1f  %s\n", l.name, ms(r.snapshot), ms(r.restore.p50), ms(r.restore.p99),
			ms(r.create.p50), ms(r.create.p99), r.storedMB, verdict)
	}
	fmt.Println("\nrestore: POST .../restore into the sandbox the snapshot was taken of (a new sandbox of its level is made from the")
	fmt.Println("snapshot, checked against its sha256, and replaces the old one). create: POST /api/v1/sandboxes with fromSnapshot,")
	fmt.Println("then DELETE (not timed). runsc snapshots save memory too (the default there): its restores are runsc restores")
	fmt.Println("of the saved kernel; the other levels save files only.")
	return nil
}

func available(caps api.Capabilities, l level) bool {
	for _, lc := range caps.Levels {
		if lc.Level == l.spec.Isolation && lc.Available {
			return l.spec.Runtime == "" || slices.Contains(lc.Features, "runtime:"+l.spec.Runtime)
		}
	}
	return false
}

type quantiles struct{ p50, p99 time.Duration }

type result struct {
	snapshot        time.Duration
	restore, create quantiles
	storedMB        float64
}

func measure(c *client.Client, l level, n, mb int) (result, error) {
	ctx := context.Background()
	spec := l.spec
	spec.Resources = api.Resources{DiskMB: int64(mb*2 + 64), MemoryMB: 1024}
	sb, err := c.Create(ctx, spec)
	if err != nil {
		return result{}, err
	}
	defer serve.Terminate(ctx, c, sb.ID)
	fill := fmt.Sprintf("head -c %d /dev/urandom > /workspace/blob && md5sum /workspace/blob | cut -c1-32", mb<<20)
	res, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell(fill)})
	if err != nil || res.ExitCode != 0 {
		return result{}, serve.ExecError("fill the layer", res, err)
	}
	sum := res.Stdout
	t0 := time.Now()
	snap, err := c.Snapshot(ctx, sb.ID, api.SnapshotRequest{Name: "bench"})
	if err != nil {
		return result{}, err
	}
	defer serve.DeleteSnapshot(ctx, c, snap.ID)
	r := result{snapshot: time.Since(t0), storedMB: snap.SizeMB}
	check := func(id string) error {
		res, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Shell("md5sum /workspace/blob | cut -c1-32")})
		if err != nil || res.Stdout != sum {
			return serve.ExecError(fmt.Sprintf("restored layer (want %q)", sum), res, err)
		}
		return nil
	}
	var restores, creates []time.Duration
	for i := range n + 1 { // the first of each is a warm-up
		t := time.Now()
		if _, err := c.Restore(ctx, sb.ID, snap.ID); err != nil {
			return result{}, err
		}
		if d := time.Since(t); i > 0 {
			restores = append(restores, d)
		}
		if err := check(sb.ID); err != nil {
			return result{}, err
		}
		t = time.Now()
		kid, err := c.Create(ctx, api.Spec{FromSnapshot: snap.ID})
		if err != nil {
			return result{}, err
		}
		if d := time.Since(t); i > 0 {
			creates = append(creates, d)
		}
		err = check(kid.ID)
		if _, terr := c.Terminate(ctx, kid.ID); err == nil {
			err = terr
		}
		if err != nil {
			return result{}, err
		}
	}
	r.restore, r.create = quantile(restores), quantile(creates)
	if r.restore.p50 == 0 {
		return result{}, errors.New("nothing measured")
	}
	return r, nil
}

func quantile(d []time.Duration) quantiles {
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return quantiles{p50: at(0.5), p99: at(0.99)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
