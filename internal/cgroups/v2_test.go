package cgroups

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestUnifiedCoreFiles exercises the v2 code paths that need no controller
// (cgroup.freeze, cgroup.events, cgroup.kill, cpu.stat usage_usec) for real
// on a hybrid host, by placing the freezer and CPU accounting on the unified
// hierarchy. The v2 cpu, memory and pids controllers themselves can only be
// tested on a v2 host; here they stay on v1.
func TestUnifiedCoreFiles(t *testing.T) {
	host := hostLayout(t)
	if host.Mode() != "hybrid" || !host.v2Kill {
		t.Skip("needs a hybrid host with a 5.14+ kernel")
	}
	l := coreOnUnified(host)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	c := newCgroup(t, l, Resources{CPU: 1})
	if c.v2 == "" || !c.at[freezerCtrl].v2 {
		t.Fatalf("freezer not placed on v2: %+v", c.at)
	}
	p := startIn(t, c, `(setsid sleep 1000 </dev/null >/dev/null 2>&1 &); while :; do :; done`)
	p.release(t)
	time.Sleep(100 * time.Millisecond)
	if err := c.Freeze(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	frozen := stats(t, c).CPUUsage
	time.Sleep(300 * time.Millisecond)
	if got := stats(t, c).CPUUsage; got != frozen || frozen == 0 {
		t.Errorf("v2 cpu.stat usage moved from %v to %v while frozen", frozen, got)
	}
	if err := c.Thaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	runsAgain(t, c, frozen)
	pids, err := c.Procs()
	if err != nil || len(pids) != 2 {
		t.Fatalf("want the shell and the orphaned sleep, got %v, %v", pids, err)
	}
	// Kill goes through cgroup.kill here.
	if err := c.Kill(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Procs(); err != nil || len(left) > 0 {
		t.Fatalf("after Kill: Procs() = %v, %v", left, err)
	}
	for _, pid := range pids {
		if pid == p.cmd.Process.Pid {
			continue // os/exec reaps the shell
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got != pid || err != nil || ws.Signal() != unix.SIGKILL {
			t.Errorf("orphan %d not dead of SIGKILL: wait4 = %d, %v, status %v", pid, got, err, ws)
		}
	}
	destroyAndCheck(t, c)
}

// coreOnUnified returns host's layout with the freezer and CPU accounting
// moved to the unified hierarchy, as on a hybrid host without those v1
// controllers.
func coreOnUnified(host *Layout) *Layout {
	v2 := placement{mount: host.unified, v2: true, root: "/"}
	l := &Layout{
		place: host.place, v1Mounts: host.v1Mounts, unified: host.unified,
		v2Freeze: true, v2Kill: true, prepared: map[string]bool{},
	}
	l.place[freezerCtrl], l.place[cpuacctCtrl] = v2, v2
	return l
}
