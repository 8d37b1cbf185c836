package process_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/guest/pid1"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/testutil"
)

func TestMain(m *testing.M) {
	// This test binary is also every sandbox's init (the driver re-executes /proc/self/exe).
	if pid1.IsInit() {
		pid1.Run()
	}
	goleak.VerifyTestMain(m)
}

// newDriver returns a driver with its own cgroup parent and cache, so tests never touch a real
// airlock's state.
func newDriver(t testing.TB) *process.Driver { return newDriverWith(t, nil) }

// newDriverWith is newDriver with changes to the configuration.
func newDriverWith(t testing.TB, change func(*process.Config)) *process.Driver {
	t.Helper()
	testutil.RequiresRoot(t, "the process level creates cgroups and maps a uid range")
	state, err := os.MkdirTemp("", "airlock-test-state-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	cfg := process.DefaultConfig()
	cfg.CgroupParent = fmt.Sprintf("airlock-test-%d", os.Getpid())
	cfg.StateDir = state
	t.Cleanup(func() {
		// The per-run cgroup parent goes too (rmdir only succeeds once it is empty).
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cfg.CgroupParent)
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	network, err := egress.New(egress.Config{Pool: netip.MustParsePrefix("10.216.0.0/22")}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Network = network
	if change != nil {
		change(&cfg)
	}
	level := slog.LevelWarn
	if os.Getenv("AIRLOCK_LOG") == "debug" {
		level = slog.LevelDebug // phase timings of every sandbox and exec
	}
	d := process.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	t.Cleanup(func() { d.Close(context.Background()) })
	if c := d.Capabilities(); !c.Available {
		t.Fatalf("process level unavailable on a host that should have it: %s", c.Reason)
	}
	return d
}

// mounts counts the host's mounts, but for those of other airlocks, which may run at the same
// time: the container level's tests' state, any airlock's container state under /run/airlock
// and the wasm level's stores. (The process level itself mounts nothing on the host.)
func mounts() int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.Contains(l, "airlock-test-container-") && !strings.Contains(l, " /run/airlock/") && !strings.Contains(l, "/wasm/sandboxes/") {
			n++
		}
	}
	return n
}

func TestConformance(t *testing.T) {
	d := newDriver(t)
	baseline := mounts()
	drivertest.Run(t, d, drivertest.Options{
		Leaks: func() []string {
			out := d.Leftovers()
			if n := mounts(); n != baseline {
				out = append(out, fmt.Sprintf("host mount table has %d entries, had %d", n, baseline))
			}
			return out
		},
	})
}

func TestSweepOrphans(t *testing.T) {
	d := newDriver(t)
	parent := fmt.Sprintf("airlock-test-%d", os.Getpid())
	// Two empty cgroups as a killed airlock leaves them: one old, one just made (a sandbox being
	// set up right now), in every hierarchy the driver uses.
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	if len(hier) == 0 {
		// The conformance run creates the parent; make it here when run alone.
		for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "freezer"} {
			if err := os.MkdirAll("/sys/fs/cgroup/"+c+"/"+parent, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		hier, _ = filepath.Glob("/sys/fs/cgroup/*/" + parent)
	}
	old := time.Now().Add(-time.Minute)
	for _, h := range hier {
		for _, n := range []string{"sbx_orphan", "sbx_fresh"} {
			if err := os.Mkdir(h+"/"+n, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(h+"/sbx_orphan", old, old); err != nil {
			t.Fatal(err)
		}
	}
	swept := d.SweepOrphans(context.Background())
	if len(swept) != 1 || swept[0] != "sbx_orphan" {
		t.Fatalf("swept %v, want [sbx_orphan]", swept)
	}
	for _, h := range hier {
		if _, err := os.Stat(h + "/sbx_orphan"); err == nil {
			t.Errorf("%s/sbx_orphan survived the sweep", h)
		}
		if _, err := os.Stat(h + "/sbx_fresh"); err != nil {
			t.Errorf("%s/sbx_fresh was swept: a sandbox being set up would lose its cgroup", h)
		}
		os.Remove(h + "/sbx_fresh")
	}
}

// newSandbox creates a sandbox of d with a defaulted spec and destroys it when t ends.
func newSandbox(t testing.TB, d *process.Driver, spec sandbox.Spec) *host.Sandbox {
	t.Helper()
	sandbox.SetDefaults(&spec)
	sb, err := d.Create(t.Context(), sandbox.NewID("sbx_"), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return sb.(*host.Sandbox)
}

func execSh(t *testing.T, sb *host.Sandbox, timeout time.Duration, script string) (sandbox.ExecResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	return sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{"/bin/sh", "-c", script}, Capture: true})
}

// TestCommandsGetOnlyTheirStdio: nothing init holds — the control socket above all, which would
// let a command read other execs' requests — is inherited by commands.
func TestCommandsGetOnlyTheirStdio(t *testing.T) {
	d := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{})
	res, err := execSh(t, sb, 10*time.Second, `ls /proc/$$/fd`)
	if err != nil || res.Stdout != "0\n1\n2\n" {
		t.Fatalf("descriptors of a command: %q %q %v", res.Stdout, res.Stderr, err)
	}
}

// TestDoneWhenInitDies: a sandbox whose init is killed from outside reports it through Done,
// refuses execs, and Destroy still releases everything.
func TestDoneWhenInitDies(t *testing.T) {
	d := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{})
	if _, err := execSh(t, sb, 10*time.Second, "sleep 30 >/dev/null 2>&1 &"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
		t.Fatal("Done closed while the sandbox lives")
	default:
	}
	if err := syscall.Kill(sb.InitPid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5 s after init was killed")
	}
	if _, err := execSh(t, sb, 10*time.Second, "true"); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("exec into an ended sandbox: %v, want ErrConflict", err)
	}
	if err := sb.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := d.Leftovers(); len(left) > 0 {
		t.Fatalf("leftovers: %v", left)
	}
}

// TestPausedExecDeadline documents Exec's fallback: a command whose deadline passes while the
// sandbox is paused cannot be killed by (frozen) init, so its cgroup is killed, which ends the
// sandbox.
func TestPausedExecDeadline(t *testing.T) {
	d := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{})
	done := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		// How it ends is the test's below: when, and the sandbox's state.
		_, _ = sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{"sleep", "30"}})
		done <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := sb.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-done:
		t.Logf("exec returned %v after the pause", end.Sub(start))
	case <-time.After(5 * time.Second):
		t.Fatal("exec still waiting 5 s after the pause")
	}
	select {
	case <-sb.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the sandbox did not end")
	}
	if err := sb.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := d.Leftovers(); len(left) > 0 {
		t.Fatalf("leftovers: %v", left)
	}
}

// slowWriter is a streaming client that falls behind: its first writes take a while.
type slowWriter struct {
	mu    sync.Mutex // guards n and slow
	n     int
	slow  int
	delay time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.slow > 0 {
		w.slow--
		time.Sleep(w.delay)
	}
	w.n += len(p)
	return len(p), nil
}

// TestOutputDrainedAfterGrace: when a background process keeps stdout open past the grace, what
// the command wrote before it exited is still delivered, even to a client that fell behind.
func TestOutputDrainedAfterGrace(t *testing.T) {
	d := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{})
	w := &slowWriter{slow: 2, delay: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Stdout: w, Capture: true,
		Command: []string{"/bin/sh", "-c", `sleep 30 & head -c 100000 /dev/zero | tr '\0' a`}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("exec took %v", took)
	}
	if len(res.Stdout) != 100000 || w.n != 100000 {
		t.Fatalf("captured %d and streamed %d of 100000 bytes", len(res.Stdout), w.n)
	}
}

// TestHostPaths: the operator's hostTemplate.paths are bound read-only over the hidden
// /usr/local (and elsewhere); the rest of /usr/local stays hidden.
func TestHostPaths(t *testing.T) {
	paths := drivertest.HostPaths(t)
	d := newDriverWith(t, func(c *process.Config) { c.HostPaths = paths })
	drivertest.CheckHostPaths(t, d, paths)
}

// TestRootfsHostRoot: the host's own root (or a link to it) as a rootfs is refused as the field,
// before any sandbox is started, not a failed setup.
func TestRootfsHostRoot(t *testing.T) {
	d := newDriver(t)
	for _, root := range []string{"/", "/proc/self/root", "//"} {
		spec := sandbox.Spec{Isolation: sandbox.LevelProcess, RootDir: root}
		sandbox.SetDefaults(&spec)
		sb, err := d.Create(context.Background(), sandbox.NewID("sbx_"), spec)
		if err == nil {
			drivertest.Destroy(context.Background(), t, sb)
		}
		fe, ok := errors.AsType[*errdefs.FieldError](err)
		if !ok || fe.Field != "rootfs" || !errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, errdefs.ErrSetup) {
			t.Errorf("rootfs %q: %v, want an invalid rootfs", root, err)
		}
	}
}
