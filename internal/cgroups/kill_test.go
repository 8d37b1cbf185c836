package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestKillDoubleForkedGrandchild(t *testing.T) {
	l := hostLayout(t)
	// Become the orphan's reaper so the test can tell "dead" from "zombie"
	// itself instead of depending on how quickly pid 1 reaps.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	c := newCgroup(t, l, Resources{})
	p := startIn(t, c, `(setsid sleep 1000 </dev/null >/dev/null 2>&1 &); exit 0`)
	p.release(t)
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); len(pids) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		var err error
		if pids, err = c.Procs(); err != nil {
			t.Fatal(err)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("want the orphaned sleep alone in the cgroup, got %v", pids)
	}
	orphan := pids[0]
	if err := c.Kill(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if pids, err := c.Procs(); err != nil || len(pids) > 0 {
		t.Fatalf("after Kill: Procs() = %v, %v", pids, err)
	}
	var ws unix.WaitStatus
	if got, err := unix.Wait4(orphan, &ws, unix.WNOHANG, nil); got != orphan || err != nil || ws.Signal() != unix.SIGKILL {
		t.Fatalf("orphan %d not dead of SIGKILL: wait4 = %d, %v, status %v", orphan, got, err, ws)
	}
	if err := unix.Kill(orphan, 0); err != unix.ESRCH {
		t.Errorf("kill(%d, 0) = %v, want ESRCH", orphan, err)
	}
	destroyAndCheck(t, c)
}

func destroyAndCheck(t *testing.T, c *Cgroup) {
	t.Helper()
	for i := 0; i < 2; i++ { // the second call must be a no-op
		if err := c.Destroy(ctxTimeout(t, 5*time.Second)); err != nil {
			t.Fatalf("Destroy #%d: %v", i+1, err)
		}
	}
	for _, dir := range c.Paths() {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after Destroy (stat: %v)", dir, err)
		}
	}
}

// A fork bomb of double-forking processes inside nested child cgroups.
func TestKillForkBombInNestedCgroups(t *testing.T) {
	l := hostLayout(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	c := newCgroup(t, l, Resources{Pids: 40})
	// Opened while the cgroup has no children: reads must still find the nested ones' events.
	events, err := c.OpenEvents()
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	p := startIn(t, c, `exec /usr/bin/python3 -c '
import os, time
while True:
    try:
        if os.fork() == 0:
            if os.fork() == 0:
                time.sleep(1000)
            os._exit(0)
    except OSError:
        time.sleep(0.001)
'`)
	// Move the process down into inner/deeper in every hierarchy.
	for _, dir := range c.Paths() {
		inner := filepath.Join(dir, "inner", "deeper")
		if err := os.MkdirAll(inner, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(inner+"/cgroup.procs", fmt.Sprint(p.cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	p.release(t)
	for deadline := time.Now().Add(10 * time.Second); stats(t, c).PidsLimitHits == 0; {
		if time.Now().After(deadline) {
			t.Fatal("fork bomb never reached pids.max")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pids, _ := c.Procs(); len(pids) < 10 {
		t.Fatalf("Procs() = %v, want the bomb's processes from the nested cgroup", pids)
	}
	if e, err := events.Read(); err != nil || e.PidsLimitHits == 0 {
		t.Fatalf("EventReader.Read() = %+v, %v: missed the nested cgroup's pids.max hits", e, err)
	}
	start := time.Now()
	if err := c.Kill(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the bomb in %v", time.Since(start))
	if pids, err := c.Procs(); err != nil || len(pids) > 0 {
		t.Fatalf("after Kill: Procs() = %v, %v", pids, err)
	}
	destroyAndCheck(t, c)
}

func TestNewIsIdempotentOnlyWhenEmpty(t *testing.T) {
	l := hostLayout(t)
	c := newCgroup(t, l, Resources{Pids: 5})
	again, err := l.New(testParent(), nameOf(c))
	if err != nil {
		t.Fatalf("New on an existing empty cgroup: %v", err)
	}
	if again.pristine.Load() {
		t.Errorf("an existing cgroup must not count as pristine")
	}
	p := startIn(t, c, `exit 0`)
	if _, err := l.New(testParent(), nameOf(c)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("New on a cgroup with a process: %v, want fs.ErrExist", err)
	}
	p.release(t)
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	names, err := l.List(testParent())
	if err != nil || !slices.Contains(names, nameOf(c)) {
		t.Errorf("List(%q) = %q, %v; want it to include %q", testParent(), names, err, nameOf(c))
	}
}

func TestSetChangesAndResets(t *testing.T) {
	l := hostLayout(t)
	c := newCgroup(t, l, Resources{CPU: 1.5, MemoryBytes: 64 << 20, Pids: 7})
	mem := c.at[memoryCtrl]
	read := func(k ctrl, v1file, v2file string) string {
		t.Helper()
		f := v1file
		if c.at[k].v2 {
			f = v2file
		}
		b, err := readFile(c.at[k].mount + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	check := func(cpu, memory, pids string) {
		t.Helper()
		if got := read(cpuCtrl, "cpu.cfs_quota_us", "cpu.max"); got != cpu {
			t.Errorf("cpu = %q, want %q", got, cpu)
		}
		if got := read(memoryCtrl, "memory.limit_in_bytes", "memory.max"); got != memory {
			t.Errorf("memory = %q, want %q", got, memory)
		}
		if got := read(pidsCtrl, "pids.max", "pids.max"); got != pids {
			t.Errorf("pids = %q, want %q", got, pids)
		}
	}
	quota := func(v1, v2 string) string {
		if c.at[cpuCtrl].v2 {
			return v2
		}
		return v1
	}
	unlimitedMem := "max"
	if !mem.v2 {
		b, err := readFile(filepath.Dir(filepath.Dir(mem.mount)) + "/memory.limit_in_bytes")
		if err != nil {
			t.Fatal(err)
		}
		unlimitedMem = strings.TrimSpace(string(b))
	}
	check(quota("150000", "150000 100000"), "67108864", "7")
	// Raising memory above v1's memsw limit needs memsw written first.
	if err := c.Set(Resources{CPU: 0.25, MemoryBytes: 128 << 20, Pids: 9}); err != nil {
		t.Fatal(err)
	}
	check(quota("25000", "25000 100000"), "134217728", "9")
	if err := c.Set(Resources{MemoryBytes: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	check(quota("-1", "max 100000"), "33554432", "max")
	if err := c.Set(Resources{}); err != nil {
		t.Fatal(err)
	}
	check(quota("-1", "max 100000"), unlimitedMem, "max")
	if err := c.Set(Resources{CPU: -1}); err == nil {
		t.Errorf("Set with negative CPU: want an error")
	}
}

func TestDestroyMissingAndKillSelf(t *testing.T) {
	l := hostLayout(t)
	ctx := ctxTimeout(t, 5*time.Second)
	if err := l.Open(testParent(), "never-created").Destroy(ctx); err != nil {
		t.Errorf("Destroy of a missing cgroup: %v", err)
	}
	if err := l.Open(testParent(), "never-created").Kill(ctx); err != nil {
		t.Errorf("Kill of a missing cgroup: %v", err)
	}
	// Only the pids hierarchy is joined, and the test process returns to
	// its original pids cgroup afterwards; nothing else is disturbed.
	c := newCgroup(t, l, Resources{})
	pidsDir := c.at[pidsCtrl].mount
	orig, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var home string
	for _, line := range strings.Split(string(orig), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "pids") {
			home = filepath.Join(l.place[pidsCtrl].mount, f[2])
		} else if len(f) == 3 && f[1] == "" && c.at[pidsCtrl].v2 {
			home = filepath.Join(l.unified, f[2])
		}
	}
	if home == "" {
		t.Skip("cannot tell which pids cgroup this process is in")
	}
	if err := writeFile(pidsDir+"/cgroup.procs", fmt.Sprint(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	err = c.Kill(ctx)
	if werr := writeFile(home+"/cgroup.procs", fmt.Sprint(os.Getpid())); werr != nil {
		t.Fatalf("moving the test process back to %s: %v", home, werr)
	}
	if err == nil || !strings.Contains(err.Error(), "calling process") {
		t.Errorf("Kill with the caller inside: %v, want a refusal", err)
	}
}

// nameOf returns the cgroup's own name, the last element of its id.
func nameOf(c *Cgroup) string { return filepath.Base(c.id) }

// TestRemoveParent: an instance's parent goes from every hierarchy once empty, stays while a
// cgroup is under it, and a parent already gone is no error.
func TestRemoveParent(t *testing.T) {
	l := hostLayout(t)
	parent := testParent() + "/instance"
	c, err := l.New(parent, "box")
	if err != nil {
		t.Fatal(err)
	}
	// A hierarchy airlock uses no controller of, as a runtime (runc) makes the parent in.
	extra := ""
	for _, m := range l.mounts {
		if !slices.ContainsFunc(c.Paths(), func(d string) bool { return strings.HasPrefix(d, m+"/") }) {
			extra = path.Join(m, parent)
			if err := os.MkdirAll(extra, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(extra); os.Remove(path.Dir(extra)) })
			break
		}
	}
	if err := l.RemoveParent(parent); err != nil {
		t.Fatalf("RemoveParent with a cgroup under it: %v", err)
	}
	for _, d := range c.Paths() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a cgroup under a parent in use went: %v", err)
		}
	}
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveParent(parent); err != nil {
		t.Fatalf("RemoveParent: %v", err)
	}
	dirs := []string{}
	for _, d := range c.Paths() {
		dirs = append(dirs, path.Dir(d))
	}
	if extra != "" {
		dirs = append(dirs, extra)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("parent %s left: %v", d, err)
		}
	}
	if err := l.RemoveParent(parent); err != nil {
		t.Errorf("RemoveParent of a parent gone: %v", err)
	}
	if err := l.RemoveParent("../x"); err == nil {
		t.Errorf("RemoveParent(../x) accepted")
	}
}
