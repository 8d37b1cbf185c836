package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// instanceLeaks lists what the airlock on dataDir left on the host: its sandboxes' cgroups (both
// levels), uid ranges, processes in those ranges, and its container state. Other airlocks' are
// not counted.
func instanceLeaks(dataDir string) []string {
	inst := uidalloc.InstanceOf(dataDir)
	out := containerLeaks(dataDir)
	for cg := range instanceCgroups("airlock", inst) {
		out = append(out, cg)
	}
	recs := map[int]uidalloc.Record{}
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool { return r.Instance == inst }) {
		recs[r.Block] = r
		if r.Level != api.LevelContainer { // containerLeaks lists those
			out = append(out, fmt.Sprintf("uid range %v of %s", r.Range, r.Sandbox))
		}
	}
	for _, p := range procsIn(recs) {
		if !p.zombie() {
			out = append(out, "process "+p.String())
		}
	}
	return out
}

// rangesOf returns the uid ranges recorded for the airlock on dataDir, by sandbox.
func rangesOf(dataDir string) map[string]uidalloc.Record {
	out := map[string]uidalloc.Record{}
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool { return r.Instance == uidalloc.InstanceOf(dataDir) }) {
		out[r.Sandbox] = r
	}
	return out
}

// cgroupProcs returns the pids in the sandbox cgroup parent/instance/id (pids hierarchy, or v2).
func cgroupProcs(parent, instance, id string) []int {
	for _, d := range []string{"/sys/fs/cgroup/pids/", "/sys/fs/cgroup/"} {
		if pids := cgroupDirPids(filepath.Join(d, parent, instance, id)); len(pids) > 0 {
			return pids
		}
	}
	return nil
}

// cgroupDirPids returns the pids in the cgroup at dir.
func cgroupDirPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// TestTwoDaemonsShareNothing runs two daemons on one host, on different data dirs, each with
// process and container sandboxes at once: every sandbox has a host uid range of its own, the
// daemons' cgroups are under different parents, and each daemon's leak check, once its own
// sandboxes are gone, passes while the other's still run.
func TestTwoDaemonsShareNothing(t *testing.T) {
	type side struct {
		dir, inst string
		c         *client.Client
		ids       map[string]string // sandbox id → level
	}
	var sides []*side
	for range 2 {
		dir := filepath.Join(t.TempDir(), "data")
		removeContainerState(t, dir)
		key := newKey(t, dir, "t1")
		d := startDaemon(t, dir)
		sides = append(sides, &side{dir: dir, inst: uidalloc.InstanceOf(dir), c: d.client(key), ids: map[string]string{}})
	}
	if sides[0].inst == sides[1].inst {
		t.Fatalf("two data dirs, one instance %s", sides[0].inst)
	}
	specs := []api.Spec{smallSpec(), smallSpec()}
	for _, rt := range []string{"runc", "runsc"} {
		s := smallSpec()
		s.Isolation, s.Runtime = api.LevelContainer, rt
		specs = append(specs, s)
	}
	for _, s := range sides {
		for _, spec := range specs {
			sb, err := s.c.Create(bg(), spec)
			if err != nil && clientErr(t, err).StatusCode == http.StatusUnprocessableEntity {
				t.Logf("%s %s unavailable here: %v", spec.Isolation, spec.Runtime, err)
				continue
			}
			if err != nil {
				t.Fatalf("create %+v: %v", spec, err)
			}
			s.ids[sb.ID] = sb.Isolation
			shOK(t, s.c, sb.ID, "echo mine > /workspace/f")
		}
	}

	// Every live sandbox of either daemon has a range recorded for it, and no two share one.
	owner := map[int]string{}
	for _, s := range sides {
		recs := uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool { return r.Instance == s.inst })
		if len(recs) != len(s.ids) {
			t.Fatalf("daemon %s: %d uid ranges recorded for %d sandboxes: %+v", s.inst, len(recs), len(s.ids), recs)
		}
		for _, r := range recs {
			if prev, ok := owner[r.Block]; ok {
				t.Fatalf("uid range %v is %s's and %s's", r.Range, prev, r.Sandbox)
			}
			owner[r.Block] = r.Sandbox
			if s.ids[r.Sandbox] != r.Level {
				t.Fatalf("record %+v names no %s sandbox of daemon %s", r, r.Level, s.inst)
			}
			// The sandbox's processes on the host run as uids of its range (gVisor's sentry
			// and gofer are runsc's own: their uids are gVisor's business), in a cgroup under
			// its daemon's instance.
			parent := map[string]string{api.LevelProcess: "airlock", api.LevelContainer: "airlock-container"}[r.Level]
			pids := cgroupProcs(parent, s.inst, r.Sandbox)
			if len(pids) == 0 {
				t.Fatalf("sandbox %s: no processes in cgroup %s/%s/%s", r.Sandbox, parent, s.inst, r.Sandbox)
			}
			if r.Level == api.LevelContainer && strings.Contains(string(must(os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0])))), "runsc") {
				continue
			}
			for _, pid := range pids {
				m, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
				if err != nil {
					continue // exited meanwhile
				}
				if got, want := strings.Join(strings.Fields(string(m)), " "), fmt.Sprint(0, r.First(), uidalloc.Size); got != want {
					t.Errorf("sandbox %s: pid %d has uid_map %q, want %q", r.Sandbox, pid, got, want)
				}
			}
			if len(procsIn(map[int]uidalloc.Record{r.Block: r})) == 0 {
				t.Errorf("sandbox %s: no process runs as a uid of its range %v", r.Sandbox, r.Range)
			}
		}
	}

	// The first daemon ends its sandboxes: its own leak check passes while the second's run.
	a, b := sides[0], sides[1]
	for id := range a.ids {
		if _, err := a.c.Terminate(bg(), id); err != nil {
			t.Fatal(err)
		}
	}
	var leaks []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if leaks = instanceLeaks(a.dir); len(leaks) == 0 {
			break
		}
	}
	if len(leaks) > 0 {
		t.Fatalf("daemon %s left: %s", a.inst, strings.Join(leaks, "; "))
	}
	if n := len(instanceLeaks(b.dir)); n == 0 {
		t.Fatalf("the second daemon's live sandboxes are not counted as its own")
	}
	for id := range b.ids {
		if got := shOK(t, b.c, id, "cat /workspace/f"); got != "mine" {
			t.Errorf("sandbox %s after the other daemon's teardown: %q", id, got)
		}
		if _, err := b.c.Terminate(bg(), id); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if leaks = instanceLeaks(b.dir); len(leaks) == 0 {
			return
		}
	}
	t.Fatalf("daemon %s left: %s", b.inst, strings.Join(leaks, "; "))
}

func must[T any](v T, _ error) T { return v }
