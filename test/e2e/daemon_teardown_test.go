package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// TestDaemonCrashTeardown kills the daemon (kill -9) a few milliseconds into parallel DELETEs of
// sandboxes, half of them paused, with creates, execs and pauses in flight, three times over.
// After each restart every sandbox is either live and usable (adopted) or ended with nothing of
// it left on the host — its cgroups, the processes of its uid range, its init socket — and a
// retried DELETE works. After the final clean stop the airlock leaves nothing at once.
func TestDaemonCrashTeardown(t *testing.T) {
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	const n = 20
	for round := range 3 {
		c := d.client(key)
		ids := createParallel(t, c, n)
		forEach(ids[:n/2], func(id string) {
			if _, err := c.Pause(bg(), id); err != nil {
				t.Errorf("pause %s: %v", id, err)
			}
		})
		ranges := rangesOf(dir) // by sandbox, before the kill frees any
		// In flight at the kill: a DELETE of every sandbox, creates, execs and pauses.
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { _, _ = c.Terminate(bg(), id) }) // in flight at the kill: any answer, or none
			switch i % 5 {
			case 1:
				wg.Go(func() { _, _ = c.Create(bg(), smallSpec()) }) // likewise
			case 2:
				wg.Go(func() { _, _ = c.Exec(bg(), id, api.ExecRequest{Command: api.Shell("sleep 30")}) }) // likewise
			case 3:
				wg.Go(func() { _, _ = c.Pause(bg(), id) }) // likewise
			}
		}
		time.Sleep(time.Duration(5+5*round) * time.Millisecond)
		d.kill9()
		wg.Wait()

		d = startDaemon(t, dir)
		c = d.client(key)
		all, err := c.List(bg(), client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for id, r := range rangesOf(dir) {
			ranges[id] = r
		}
		for _, sb := range all {
			switch {
			case sb.Status == api.StatusPaused || sb.Status == api.StatusRunning || sb.Status == api.StatusReady:
				if sb.Status == api.StatusPaused {
					if _, err := c.Resume(bg(), sb.ID); err != nil {
						t.Errorf("round %d: resume adopted %s: %v", round, sb.ID, err)
					}
				}
				if r, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("echo alive")}); err != nil || r.Stdout != "alive\n" {
					t.Errorf("round %d: %s is %s after the restart, but not usable: %+v %v", round, sb.ID, sb.Status, r, err)
				}
			case sb.Status == api.StatusTerminated || sb.Status == api.StatusFailed:
				if left := sandboxLeft(dir, sb.ID, ranges); len(left) > 0 {
					t.Errorf("round %d: %s is %s (%s) after the restart, but the host still has %v", round, sb.ID, sb.Status, sb.Reason, left)
				}
			default:
				t.Errorf("round %d: %s is %s after the restart", round, sb.ID, sb.Status)
			}
		}
		// A retried DELETE works: it ends a live one, closes an ended one, and says terminated
		// of a terminated one; either way nothing of the sandbox is left.
		forEach(ids, func(id string) {
			sb, err := c.Terminate(bg(), id)
			if err != nil {
				if ce := clientErr(t, err); ce.StatusCode != http.StatusConflict || ce.Status != api.StatusTerminated {
					t.Errorf("round %d: retried DELETE of %s: %v", round, id, err)
				}
			} else if sb.Status != api.StatusTerminated {
				t.Errorf("round %d: retried DELETE of %s: %s", round, id, sb.Status)
			}
			if left := sandboxLeft(dir, id, ranges); len(left) > 0 {
				t.Errorf("round %d: after the retried DELETE of %s the host still has %v", round, id, left)
			}
		})
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	// At once, not after a grace or a sweep's age floor.
	if left := append(instanceLeaks(dir), runSockets(dir)...); len(left) > 0 {
		t.Errorf("after a clean stop the airlock left %v", left)
	}
	if m := mountinfo.Under(dir); len(m) > 0 {
		t.Errorf("after a clean stop the airlock left mounts %v", m)
	}
	check()
}

// createParallel creates n small sandboxes at once and returns their IDs.
func createParallel(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			sb, err := c.Create(bg(), smallSpec())
			if err != nil {
				t.Errorf("create: %v", err)
			}
			ids[i] = sb.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// forEach calls fn for every id at once and waits for them.
func forEach(ids []string, fn func(id string)) {
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { fn(id) })
	}
	wg.Wait()
}

// sandboxLeft lists what the host still holds of process-level sandbox id of the airlock on
// dataDir, of the instance it was made as and of those restores made of it (id-r1, ...), whose
// uid ranges are in ranges (by instance): their cgroups, the processes of their ranges, their init
// sockets.
func sandboxLeft(dataDir, id string, ranges map[string]uidalloc.Record) []string {
	mine := func(instance string) bool {
		n, ok := strings.CutPrefix(instance, id+"-r")
		_, err := strconv.Atoi(n)
		return instance == id || ok && err == nil
	}
	var out []string
	for cg := range instanceCgroups("airlock", uidalloc.InstanceOf(dataDir)) {
		if mine(filepath.Base(cg)) {
			out = append(out, cg)
		}
	}
	for instance, r := range ranges {
		if !mine(instance) || r.Sandbox != instance {
			continue
		}
		// Only processes of the instance's cgroup: another airlock on the host (an older one,
		// or one with an allocator of its own) may run with the same ids, and so may a later
		// sandbox of this airlock that got the range once it was free.
		mark := "/" + uidalloc.InstanceOf(dataDir) + "/" + instance
		for _, p := range procsIn(map[int]uidalloc.Record{r.Block: r}) {
			cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.pid))
			if err == nil && (strings.Contains(string(cg), mark+"\n") || strings.Contains(string(cg), mark+"/")) && !p.zombie() {
				out = append(out, "process "+p.String())
			}
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dataDir, "process", "run"))
	for _, e := range ents {
		if mine(e.Name()) {
			out = append(out, "init socket "+e.Name())
		}
	}
	return out
}

// runSockets lists the init sockets left in the process level's state dir of dataDir.
func runSockets(dataDir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dataDir, "process", "run"))
	var out []string
	for _, e := range ents {
		out = append(out, "socket "+e.Name())
	}
	return out
}

// TestDaemonCrashNoReturnPaused: a paused sandbox is frozen, init included, so it cannot count
// its own orphan grace. A daemon back after the grace does not adopt it: it ends failed
// (daemon_restart) with nothing left, like its running siblings, which ended by themselves.
// Back within the grace, it adopts it paused.
func TestDaemonCrashNoReturnPaused(t *testing.T) {
	check := leakCheck(t)
	d, c, key := newDaemonConfig(t, `{`+processDefault+`, "process": {"orphanGraceSeconds": 2}}`)
	ctx := bg()
	ids := createN(t, c, 2)
	for _, id := range ids {
		if _, err := c.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	ranges := rangesOf(d.dataDir)
	d.kill9()
	d = startDaemon(t, d.dataDir, d.flags...) // within the grace
	c = d.client(key)
	if sb, err := c.Get(ctx, ids[0]); err != nil || sb.Status != api.StatusPaused {
		t.Fatalf("paused sandbox back within the grace: %s %q %v", sb.Status, sb.Reason, err)
	}
	d.kill9()
	time.Sleep(3 * time.Second) // past the grace
	d = startDaemon(t, d.dataDir, d.flags...)
	c = d.client(key)
	for _, id := range ids {
		sb, err := c.Get(ctx, id)
		if err != nil || sb.Status != api.StatusFailed || sb.Reason != "daemon_restart" {
			t.Errorf("paused sandbox %s back after the grace: %s %q %v", id, sb.Status, sb.Reason, err)
		}
		if left := sandboxLeft(d.dataDir, id, ranges); len(left) > 0 {
			t.Errorf("paused sandbox %s back after the grace: the host still has %v", id, left)
		}
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	check()
}
