package e2e

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestTimeoutKillsTree checks that the timeout kills every process of the sandbox, also those
// that left the command's session and process group, and removes the sandbox's cgroups.
func TestTimeoutKillsTree(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{"new session", `setsid sh -c "sleep 1000 & sleep 1000" & sleep 1000`},
		{"double fork", `(sh -c "sleep 1000 &" &) ; sleep 1000`},
		{"ignores SIGTERM", `trap "" TERM; sh -c 'trap "" TERM; sleep 1000' & sleep 1000`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			procsBefore, cgBefore := sandboxProcs(), sandboxCgroups()
			r := runAirlock(t, nil, "run", "--timeout", "1s", "--", "sh", "-c", tc.script)
			if r.code != 124 {
				t.Errorf("exit %d, want 124 (stderr %q)", r.code, r.stderr)
			}
			if r.elapsed > 5*time.Second {
				t.Errorf("took %v, want < 5s", r.elapsed)
			}
			live, zombies := newProcs(procsBefore)
			if len(live) > 0 {
				t.Errorf("sandbox processes alive after airlock exited: %v", live)
			}
			if len(zombies) > 0 {
				t.Logf("zombies in the sandbox uid range after airlock exited: %v", zombies)
			}
			if cg := newCgroups(cgBefore); len(cg) > 0 {
				t.Errorf("sandbox cgroups left (path: processes): %v", cg)
			}
		})
	}
}

// TestKilledAirlockLeaksNoProcess SIGKILLs airlock run while its command runs: the sandbox's
// processes must die with it (Pdeathsig). A leftover cgroup is only logged: a sweep of orphaned
// cgroups is planned separately.
func TestKilledAirlockLeaksNoProcess(t *testing.T) {
	procsBefore, cgBefore := sandboxProcs(), sandboxCgroups()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := airlockCmd(ctx, "run", "--", "sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill() // the test has failed already: this only reaps
			_ = cmd.Wait()
		}
	}()

	// Wait for the command to run (a "sleep" in the sandbox uid range).
	deadline := time.Now().Add(15 * time.Second)
	for {
		live, _ := newProcs(procsBefore)
		running := false
		for _, p := range live {
			running = running || p.name == "sleep"
		}
		if running {
			t.Logf("sandbox processes before the kill: %v", live)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sandbox process appeared within 15s (live: %v)", live)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait() // "signal: killed": what was sent
	live, zombies := waitNoLiveProcs(procsBefore, 2*time.Second)
	if len(live) > 0 {
		t.Errorf("sandbox processes alive 2s after airlock was SIGKILLed: %v", live)
	}
	if len(zombies) > 0 {
		t.Logf("zombies (not yet reaped by their new parent) after the kill: %v", zombies)
	}
	left := newCgroups(cgBefore)
	t.Logf("sandbox cgroups left after the kill (path: processes): %v", left)
	t.Cleanup(func() {
		for p, n := range newCgroups(cgBefore) {
			if n == 0 && os.Remove(p) == nil {
				t.Logf("removed leftover empty cgroup %s", p)
			}
		}
	})

	if r := runAirlock(t, nil, "run", "--", "true"); r.code != 0 {
		t.Errorf("airlock run -- true after the kill: exit %d, want 0 (stderr %q)", r.code, r.stderr)
	}
	left2 := newCgroups(cgBefore)
	t.Logf("sandbox cgroups left after a subsequent run (path: processes): %v", left2)
	for p, n := range left2 {
		if n != 0 {
			t.Errorf("cgroup %s still holds %d processes", p, n)
		}
	}
}
