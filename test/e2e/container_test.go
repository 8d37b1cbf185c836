package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/testutil"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// containerLeaks lists what the container level of the airlock on dataDir left on the host:
// bundles, mounts, runtime state, cgroups, uid ranges and runsc processes. Other airlocks'
// containers are not counted.
func containerLeaks(dataDir string) []string {
	var out []string
	state := levels.ContainerStateDir(dataDir)
	bundles := filepath.Join(state, "bundles")
	ents, _ := os.ReadDir(bundles)
	for _, e := range ents {
		out = append(out, "bundle "+e.Name())
	}
	for _, m := range mountinfo.Under(bundles) {
		if m != bundles {
			out = append(out, "mount "+m)
		}
	}
	for _, rt := range []string{"runsc", "runc"} {
		st, _ := filepath.Glob(filepath.Join(state, rt, "*"))
		for _, s := range st {
			if fi, err := os.Stat(s); err == nil && (fi.IsDir() || strings.HasSuffix(s, ".state")) {
				out = append(out, rt+" state "+filepath.Base(s))
			}
		}
	}
	for cg := range instanceCgroups("airlock-container", uidalloc.InstanceOf(dataDir)) {
		out = append(out, cg)
	}
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool {
		return r.Instance == uidalloc.InstanceOf(dataDir) && r.Level == api.LevelContainer
	}) {
		out = append(out, fmt.Sprintf("uid range %v of %s", r.Range, r.Sandbox))
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if c, _ := os.ReadFile(p); strings.Contains(string(c), state+"/runsc") {
			out = append(out, "process "+strings.ReplaceAll(string(c), "\x00", " "))
		}
	}
	return out
}

func waitNoContainerLeaks(t *testing.T, dataDir string) {
	t.Helper()
	var leaks []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if leaks = containerLeaks(dataDir); len(leaks) == 0 {
			return
		}
	}
	t.Fatalf("container level left behind: %s", strings.Join(leaks, "; "))
}

// TestContainerLevel drives container sandboxes of both runtimes through the daemon: create, exec,
// the files API, network policy none, terminate; then a kill -9 of the daemon with a sandbox
// live, and a restart that marks it failed and removes every trace.
func TestContainerLevel(t *testing.T) {
	testutil.RequiresRoot(t, "it makes sandboxes")
	dataDir := filepath.Join(t.TempDir(), "data")
	removeContainerState(t, dataDir)
	key := newKey(t, dataDir, "t1")
	d := startDaemon(t, dataDir)
	c := d.client(key)
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			spec := smallSpec()
			spec.Isolation, spec.Runtime = "container", rt
			sb, err := c.Create(bg(), spec)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			res, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: []string{"/bin/sh", "-c", "uname -r; id -u; echo data > /workspace/f"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %v %+v", err, res)
			}
			lines := strings.Fields(res.Stdout)
			if len(lines) < 2 || lines[1] != "1000" || (rt == "runsc") != strings.Contains(lines[0], "gvisor") {
				t.Fatalf("exec output %q", res.Stdout)
			}
			rc, err := c.ReadFile(bg(), sb.ID, "/workspace/f")
			if err != nil {
				t.Fatalf("files API: %v", err)
			}
			got := make([]byte, 16)
			n, _ := rc.Read(got)
			rc.Close()
			if string(got[:n]) != "data\n" {
				t.Fatalf("files API read %q", got[:n])
			}
			if _, err := c.Terminate(bg(), sb.ID); err != nil {
				t.Fatal(err)
			}
			waitNoContainerLeaks(t, dataDir)
		})
	}
	// A bad runtime is a 400 naming the field; the process level takes no runtime.
	for _, s := range []api.Spec{{Isolation: "container", Runtime: "crun"}, {Runtime: "runc"}} {
		if _, err := c.Create(bg(), s); err == nil || clientErr(t, err).Field != "runtime" {
			t.Fatalf("spec %+v: want a 400 naming runtime, got %v", s, err)
		}
	}

	// kill -9 with a live container sandbox: its init ends the container when the control socket
	// closes; the restarted daemon marks it failed and removes the rest.
	spec := smallSpec()
	spec.Isolation, spec.Runtime = "container", "runsc"
	sb, err := c.Create(bg(), spec)
	if err != nil {
		t.Fatal(err)
	}
	d.kill9()
	d = startDaemon(t, dataDir)
	c = d.client(key)
	got, err := c.Get(bg(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "failed" && got.Status != "terminated" {
		t.Fatalf("after restart: status %s, want failed", got.Status)
	}
	waitNoContainerLeaks(t, dataDir)

}

// TestContainerCleanStopUnmounts: a clean stop (SIGTERM) of a daemon that ran container
// sandboxes of both runtimes leaves no mount under its container state directory — neither the
// bundles directory's bind of itself nor anything of runsc's; a start after a kill -9 reuses what
// the killed one left (no mount is stacked on another) and its clean stop removes it all.
func TestContainerCleanStopUnmounts(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	removeContainerState(t, dataDir)
	state := levels.ContainerStateDir(dataDir)
	key := newKey(t, dataDir, "t1")
	run := func(d *daemon) {
		t.Helper()
		c := d.client(key)
		for _, rt := range []string{"runc", "runsc"} {
			spec := smallSpec()
			spec.Isolation, spec.Runtime = "container", rt
			sb, err := c.Create(bg(), spec)
			if err != nil {
				t.Fatalf("create (%s): %v", rt, err)
			}
			shOK(t, c, sb.ID, "true")
		}
	}

	d := startDaemon(t, dataDir)
	run(d)
	live := mountinfo.Under(state)
	if len(live) == 0 {
		t.Fatalf("no mount under %s with sandboxes live: is this the state directory?", state)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if left := mountinfo.Under(state); len(left) > 0 {
		t.Fatalf("a clean stop left mounts: %q", left)
	}

	// A kill -9 leaves them; the next daemon takes them over rather than mounting again.
	d = startDaemon(t, dataDir)
	run(d)
	d.kill9()
	killed := mountinfo.Under(state)
	d = startDaemon(t, dataDir)
	run(d)
	again := mountinfo.Under(state)
	for _, m := range killed {
		n := 0
		for _, a := range again {
			if a == m {
				n++
			}
		}
		if n > 1 && !strings.Contains(m, "/bundles/") {
			t.Errorf("%s is mounted %d times after a restart", m, n)
		}
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if left := mountinfo.Under(state); len(left) > 0 {
		t.Fatalf("a clean stop after a kill -9 left mounts: %q", left)
	}
}
