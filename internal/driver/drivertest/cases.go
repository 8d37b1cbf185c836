package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Whether a case has a Python form (Case.Python).
const (
	withPython = true
	shellOnly  = false
)

// Cases lists the suite. Names are stable: levels skip by name.
func Cases() []Case {
	return []Case{
		{"Output", testOutput, withPython},
		{"ExitCodes", testExitCodes, withPython},
		{"EnvWorkdirStdin", testEnvWorkdirStdin, withPython},
		{"LargeRequest", testLargeRequest, withPython},
		{"Claim", testClaim, withPython},
		// Isolation (isolation.go, network.go).
		{"Users", testUsers, withPython},
		{"HostUnprivileged", testHostUnprivileged, withPython},
		{"ReadOnlyRoot", testReadOnlyRoot, withPython},
		{"Mounts", testMounts, withPython},
		{"HostProcessesInvisible", testHostProcesses, withPython},
		{"HostFilesInvisible", testHostFiles, withPython},
		{"UsrLocalHidden", testUsrLocalHidden, withPython},
		{"ProcMasked", testProcMasked, withPython},
		{"LoopbackOnly", testLoopbackOnly, withPython},
		{"NetworkRestricted", testNetworkRestricted, withPython},
		{"BlockedSyscalls", testBlockedSyscalls, withPython},
		{"SetuidGrantsNothing", testSetuid, withPython},
		{"InitSurvivesSignals", testInitSignals, withPython},
		// Limits (limits.go).
		{"MemoryBomb", testMemoryBomb, withPython},
		{"ForkBomb", testForkBomb, withPython},
		{"CPUQuota", testCPUQuota, withPython},
		{"DiskFill", testDiskFill, withPython},
		{"OpenFiles", testOpenFiles, withPython},
		{"TimeoutKillsTree", testTimeout, withPython},
		{"OutputBounded", testOutputBounded, withPython},
		{"ManySandboxes", testManySandboxes, withPython},
		// A long-lived sandbox (longlived.go, streams.go).
		{"StatePersists", testStatePersists, withPython},
		{"TTY", testTTY, withPython},
		{"Streams", testStreams, withPython},
		{"PauseResume", testPauseResume, withPython},
		{"Usage", testUsage, withPython},
		{"FileRoot", testFileRoot, withPython},
		{"PerExecUsage", testPerExecUsage, withPython},
		{"LayerChanges", testLayerChanges, withPython},
		// Snapshots (snapshot.go).
		{"Snapshot", testSnapshot, withPython},
		// Shell only: its counter is a background shell loop, whose count lives in the shell's
		// memory; a Python form could be proven only on a level that saves memory.
		{"SnapshotMemory", testSnapshotMemory, shellOnly},
		{"SnapshotPrepared", testSnapshotPrepared, shellOnly},
	}
}

func testOutput(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: "echo out; echo err >&2; exit 3",
		Py: "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)",
	})
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.TimedOut || res.OOMKilled || res.Truncated {
		t.Fatalf("result %+v", res)
	}
	if res.ExecutionID == "" || res.LimitEvents == nil {
		t.Fatalf("result lacks executionId or limitEvents: %+v", res)
	}
}

func testExitCodes(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	type exitCase struct {
		name string
		argv []string
		exit int
	}
	cases := []exitCase{
		{"true", []string{"true"}, 0},
		{"false", []string{"false"}, 1},
		{"killed by signal", []string{"/bin/sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"not found", []string{"no-such-command"}, 127},
		{"not executable", []string{"/etc/passwd"}, 126},
	}
	if h.Python() {
		// A file that exists and is no program: the interpreter's own os module.
		res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: []string{"python3", "-c", "import os; print(os.__file__)"}})
		osPy := strings.TrimSpace(res.Stdout)
		if res.ExitCode != 0 || !strings.HasPrefix(osPy, "/") {
			t.Fatalf("where is os.py: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		cases = []exitCase{
			{"exit 0", []string{"python3", "-c", "pass"}, 0},
			{"exit 1", []string{"python3", "-c", "import sys; sys.exit(1)"}, 1},
			{"exit 42", []string{"python3", "-c", "import sys; sys.exit(42)"}, 42},
			{"uncaught exception", []string{"python3", "-c", "raise ValueError('x')"}, 1},
			{"killed by signal", []string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"}, 128 + 15},
			{"not found", []string{"no-such-command"}, 127},
			{"not executable", []string{osPy}, 126},
		}
	}
	for _, c := range cases {
		h.part(t, c.name, func(t *testing.T) {
			res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: c.argv})
			if res.ExitCode != c.exit {
				t.Fatalf("exit %d, want %d (stderr %q)", res.ExitCode, c.exit, res.Stderr)
			}
		})
	}
}

func testEnvWorkdirStdin(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Environment: map[string]string{"FROM_SPEC": "a"}})
	res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{
		Command: h.Command(t, Script{
			Sh: `echo "$FROM_SPEC $FROM_EXEC $(pwd) $HOME"; cat`,
			Py: `
import os, sys
e = os.environ
print(e.get("FROM_SPEC"), e.get("FROM_EXEC"), os.getcwd(), e.get("HOME"))
sys.stdout.write(sys.stdin.read())`,
		}),
		Env:   map[string]string{"FROM_EXEC": "b"},
		Stdin: strings.NewReader("from stdin"),
	})
	expect(t, res, 0, "a b /workspace /home/agent\nfrom stdin")
	pwd := []string{"pwd"}
	if h.Python() {
		pwd = []string{"python3", "-c", "import os; print(os.getcwd())"}
	}
	res = ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: pwd, Workdir: "/tmp"})
	expect(t, res, 0, "/tmp")
}

// testClaim hands a made sandbox a claimant's spec, as a warm pool does: its environment counts
// from the next exec, and a claim that would add a network is refused, changing nothing.
func testClaim(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	c, ok := sb.(driver.Claimer)
	if !ok {
		t.Skipf("level %s cannot hand out pooled sandboxes (no driver.Claimer)", h.D.Name())
	}
	claim := sandbox.Spec{Isolation: h.D.Name(), Name: "claimant", Environment: map[string]string{"CLAIMED": "yes"}}
	sandbox.SetDefaults(&claim)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Claim(ctx, claim); err != nil {
		t.Fatalf("claim: %v", err)
	}
	claimed := Script{Sh: `echo "$CLAIMED"`, Py: `import os; print(os.environ.get("CLAIMED", ""))`}
	expect(t, h.Exec(t, sb, 10*time.Second, claimed), 0, "yes")
	networked := claim
	networked.Environment = map[string]string{"CLAIMED": "twice"}
	networked.Network.EgressPolicy = sandbox.EgressRestricted
	if err := c.Claim(ctx, networked); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a claim adding a network: %v, want ErrConflict", err)
	}
	expect(t, h.Exec(t, sb, 10*time.Second, claimed), 0, "yes")
}

func testManySandboxes(t *testing.T, h *Harness) {
	n := 200
	if testing.Short() {
		n = 20
	}
	for i := 0; i < n; i++ {
		sb := h.New(t, sandbox.Spec{})
		res := h.Exec(t, sb, 10*time.Second, Script{Sh: "echo " + fmt.Sprint(i), Py: "print(" + fmt.Sprint(i) + ")"})
		expect(t, res, 0, fmt.Sprint(i))
		if err := sb.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// testLargeRequest runs commands whose environment, argv or stdin is about 900 KB: what an API
// request of 1 MiB (the daemon's default body cap) can carry. Each string stays under Linux's
// 128 KiB for one argument (MAX_ARG_STRLEN), which the daemon refuses up front.
func testLargeRequest(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	const parts, size = 9, 100_000
	// The same Python in both dialects: the shell dialect has python3 beside it.
	count := []string{"python3", "-c", `
import os, sys
print(sum(len(a) for a in sys.argv[1:]), sum(len(v) for k, v in os.environ.items() if k.startswith("BIG")), len(sys.stdin.buffer.read()))`}
	big := func(i int) string { return strings.Repeat(string(rune('a'+i)), size) }
	for _, c := range []struct {
		name string
		req  sandbox.ExecRequest
		want string
	}{
		{"env", sandbox.ExecRequest{Command: count, Env: func() map[string]string {
			env := map[string]string{}
			for i := range parts {
				env[fmt.Sprintf("BIG%d", i)] = big(i)
			}
			return env
		}()}, fmt.Sprintf("0 %d 0", parts*size)},
		{"argv", sandbox.ExecRequest{Command: func() []string {
			argv := slices.Clone(count)
			for i := range parts {
				argv = append(argv, big(i))
			}
			return argv
		}()}, fmt.Sprintf("%d 0 0", parts*size)},
		{"stdin", sandbox.ExecRequest{Command: count, Stdin: strings.NewReader(strings.Repeat("x", parts*size))}, fmt.Sprintf("0 0 %d", parts*size)},
	} {
		h.part(t, c.name, func(t *testing.T) {
			expect(t, ExecReq(t, sb, 30*time.Second, c.req), 0, c.want)
		})
	}
	// The sandbox is still there for the next command.
	expect(t, h.Exec(t, sb, 10*time.Second, Script{Sh: "echo ok", Py: "print('ok')"}), 0, "ok")
}
