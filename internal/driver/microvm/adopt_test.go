package microvm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// TestAdopt plays a daemon that dies and comes back: the VM outlives its maker, a forged record
// (another token, another pid) is refused and leaves it as it was, the adopter takes it over with
// its running processes — the counter goes on — and exec, files, a memory snapshot, pause and
// resume work; its Destroy leaves nothing. A VM nobody adopts within the grace powers itself off,
// and its Reclaim leaves nothing either.
func TestAdopt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 256, DiskMB: 64}}
	sandbox.SetDefaults(&spec)
	count := func(sb driver.Sandbox) int { t.Helper(); return readCount(t, sb) }
	counter := `sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done' >/dev/null 2>&1 &
echo kept > /workspace/f; sleep 0.5`

	t.Run("within the grace", func(t *testing.T) {
		d := newDriver(t)
		old, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
		if err != nil {
			t.Fatal(err)
		}
		if res := drivertest.Exec(t, old, 30*time.Second, counter); res.ExitCode != 0 {
			t.Fatalf("start the counter: %+v", res)
		}
		before := count(old)
		facts := old.(driver.HostFacter).HostFacts()
		pid := old.(*microvm.Sandbox).VMMPid()
		old.(*microvm.Sandbox).Abandon()
		<-old.(driver.Watcher).Done()
		time.Sleep(500 * time.Millisecond)
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("the VMM died with its host: %v", err)
		}
		// Forged facts are refused, and the VM is left as it was.
		var f map[string]any
		if err := json.Unmarshal(facts, &f); err != nil {
			t.Fatal(err)
		}
		for name, forge := range map[string]func(map[string]any){
			"token": func(f map[string]any) { f["token"] = strings.Repeat("0", 32) },
			"pid":   func(f map[string]any) { f["pid"] = 1 },
		} {
			g := map[string]any{}
			for k, v := range f {
				g[k] = v
			}
			forge(g)
			b, _ := json.Marshal(g)
			if sb, err := d.Adopt(ctx, old.ID(), spec, b); err == nil {
				drivertest.Destroy(ctx, t, sb)
				t.Fatalf("adopted with a forged %s", name)
			}
		}
		sb, err := d.Adopt(ctx, old.ID(), spec, facts)
		if err != nil {
			t.Fatalf("adopt: %v", err)
		}
		defer drivertest.Destroy(ctx, t, sb)
		if got := sb.(*microvm.Sandbox).VMMPid(); got != pid {
			t.Fatalf("adopted VMM pid %d, want %d", got, pid)
		}
		first := countPast(t, func() int { return count(sb) }, before)
		then := countPast(t, func() int { return count(sb) }, first)
		if first <= before || then <= first {
			t.Fatalf("the counter: %d before, %d then %d after the adoption", before, first, then)
		}
		if res := drivertest.Exec(t, sb, 30*time.Second, "cat /workspace/f; echo new > /workspace/g"); res.Stdout != "kept\n" {
			t.Fatalf("exec after adoption: %+v", res)
		}
		files, err := sb.(driver.FileServer).OpenFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := files.Open("/workspace/g")
		if err != nil {
			t.Fatalf("files after adoption: %v", err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files.Close()
		if string(b) != "new\n" {
			t.Fatalf("downloaded %q", b)
		}
		p := sb.(driver.Pauser)
		if err := p.Pause(ctx); err != nil {
			t.Fatalf("pause: %v", err)
		}
		if err := p.Resume(ctx); err != nil {
			t.Fatalf("resume: %v", err)
		}
		var layer bytes.Buffer
		if saved, err := sb.(driver.Snapshotter).Snapshot(ctx, &layer, t.TempDir()); err != nil || !saved {
			t.Fatalf("snapshot with memory after adoption: saved %v, %v", saved, err)
		}
		if n := count(sb); n <= then {
			t.Fatalf("the counter stopped at %d after the snapshot (was %d)", n, then)
		}
		if err := sb.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
		if left := d.Leftovers(); len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	})

	t.Run("past the grace", func(t *testing.T) {
		d := newDriver(t, func(c *microvm.Config) { c.OrphanGrace = 2 * time.Second })
		old, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
		if err != nil {
			t.Fatal(err)
		}
		facts := old.(driver.HostFacter).HostFacts()
		pid := old.(*microvm.Sandbox).VMMPid()
		old.(*microvm.Sandbox).Abandon()
		waitGone(t, pid) // the guest agent powered the VM off
		if sb, err := d.Adopt(ctx, old.ID(), spec, facts); err == nil {
			drivertest.Destroy(ctx, t, sb)
			t.Fatal("adopted a VM that is gone")
		}
		if err := d.Reclaim(ctx, old.ID()); err != nil {
			t.Fatal(err)
		}
		if left := d.Leftovers(); len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	})
}

// readCount reads the number a counter started in sb writes to /tmp/count.
func readCount(t *testing.T, sb driver.Sandbox) int {
	t.Helper()
	res := drivertest.Exec(t, sb, 30*time.Second, "cat /tmp/count")
	var n int
	if _, err := fmt.Sscan(res.Stdout, &n); err != nil {
		t.Fatalf("count %q: %v (%s)", res.Stdout, err, res.Stderr)
	}
	return n
}

// countPast reads a counter until it is past n, for at most 30 s (a loaded host's TCG guest
// may count slowly), and returns the last value read.
func countPast(t *testing.T, count func() int, n int) int {
	t.Helper()
	v := count()
	for deadline := time.Now().Add(30 * time.Second); v <= n && time.Now().Before(deadline); v = count() {
		time.Sleep(100 * time.Millisecond)
	}
	return v
}

// waitGone waits until process pid has exited (or is a zombie nobody waits for).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil || procfs.Zombie(pid) {
			return
		}
	}
	t.Fatalf("process %d is still running", pid)
}
