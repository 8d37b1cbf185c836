package container_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/guest/pid1"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/testutil"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

func TestMain(m *testing.M) {
	// This test binary is also every container's init (bound in at /.airlock/airlock-init).
	if pid1.IsInit() {
		pid1.Run()
	}
	goleak.VerifyTestMain(m)
}

// newDriver returns a container driver with its own state, cgroup parent and uid range, for
// runtime rt.
func newDriver(t testing.TB, rt string) *container.Driver { return newDriverWith(t, rt, nil) }

// newDriverWith is newDriver with changes to the configuration (an image store, say).
func newDriverWith(t testing.TB, rt string, change func(*container.Config)) *container.Driver {
	t.Helper()
	return newDriverWithBoth(t, rt, change, nil)
}

// newDriverWithInit is newDriver with changes to the configuration of the host side of airlock's
// init underneath (its host template, say).
func newDriverWithInit(t testing.TB, rt string, change func(*host.Config)) *container.Driver {
	t.Helper()
	return newDriverWithBoth(t, rt, nil, change)
}

func newDriverWithBoth(t testing.TB, rt string, change func(*container.Config), ichange func(*host.Config)) *container.Driver {
	t.Helper()
	testutil.RequiresRoot(t, "it makes sandboxes")
	state, err := os.MkdirTemp("", "airlock-test-container-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	level := slog.LevelWarn
	if os.Getenv("AIRLOCK_LOG") == "debug" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ic := host.Config{UIDBase: uidalloc.DefaultBase, StateDir: filepath.Join(state, "process")}
	network, err := egress.New(egress.Config{Pool: netip.MustParsePrefix("10.217.0.0/22")}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg := container.DefaultConfig()
	cfg.Runtime = rt
	cfg.StateDir = filepath.Join(state, "container")
	cfg.CgroupParent = fmt.Sprintf("airlock-test-ctr-%d", os.Getpid())
	cfg.Network = network
	// runsc's debug logs, kept after the test, for a failure to be looked into.
	cfg.DebugLogs = os.Getenv("AIRLOCK_RUNSC_LOGS")
	if change != nil {
		change(&cfg)
	}
	if ichange != nil {
		ichange(&ic)
	}
	d := container.New(cfg, host.NewRuntime(ic, log), log)
	t.Cleanup(func() {
		d.Sweep(context.Background())
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cfg.CgroupParent)
		for _, dir := range dirs {
			os.Remove(dir)
		}
		bundles := filepath.Join(cfg.StateDir, "bundles")
		for i := 0; i < 3 && os.Remove(bundles) != nil; i++ {
			exec_umount(bundles)
		}
		// Whatever a runtime left mounted in its root (runsc's null-netns, were it not told
		// --gofer-network-namespace=new).
		b, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], state+"/") {
				exec_umount(f[4])
			}
		}
		os.RemoveAll(state)
	})
	if c := d.Capabilities(); !c.Available {
		t.Skipf("container level with %s unavailable: %s", rt, c.Reason)
	}
	return d
}

// mounts counts the host mounts at or below the level's state directory, where it mounts
// everything (bundles, and the runtimes' own state). Other packages' tests, running at the same
// time, mount elsewhere.
func mounts(d *container.Driver) int { return len(mountinfo.Under(d.StateDir())) }

// skips are the conformance cases a runtime cannot run, with the reason.
var skips = map[string]map[string]string{
	sandbox.RuntimeRunc: {},
	sandbox.RuntimeRunsc: {
		"HostUnprivileged":   "gVisor's sandbox root is root of gVisor's own kernel, and /proc/self/uid_map shows that kernel's view; on the host the sentry and gofer run as root with most capabilities dropped and their own seccomp filters, which is gVisor's model",
		"SnapshotFIFO":       "a named pipe made in gVisor lives in gVisor's kernel, not in the host-side layer a snapshot saves",
		"CPUQuota/own clock": "a process's CPU clock in gVisor is its kernel's own account of the task, which does not see the host throttling the sandbox's cgroup; airlock's figure (the cgroup's) is checked",
	},
}

func TestConformance(t *testing.T) {
	for _, rt := range []string{sandbox.RuntimeRunc, sandbox.RuntimeRunsc} {
		t.Run(rt, func(t *testing.T) {
			d := newDriver(t, rt)
			// One sandbox first: the bundles directory becomes its own private mount, which stays.
			warm(t, d)
			baseline := mounts(d)
			drivertest.Run(t, &pinned{d, rt}, drivertest.Options{
				Skip:      skips[rt],
				OwnKernel: rt == sandbox.RuntimeRunsc,
				Leaks: func() []string {
					out := d.Leftovers()
					if n := mounts(d); n != baseline {
						out = append(out, fmt.Sprintf("%d mounts under the state directory, had %d", n, baseline))
					}
					return out
				},
			})
		})
	}
}

func warm(t *testing.T, d *container.Driver) {
	spec := sandbox.Spec{Isolation: sandbox.LevelContainer}
	sandbox.SetDefaults(&spec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	drivertest.Destroy(ctx, t, sb)
}

// TestPreparedRestore: a restore with a memory image goes into the container Prepare made ahead
// (runsc's sandbox process is the one `runsc create` started), and one of another shape makes
// its own; either way nothing is left once they end.
func TestPreparedRestore(t *testing.T) {
	d := newDriver(t, sandbox.RuntimeRunsc)
	if !slices.Contains(d.Capabilities().Features, driver.FeatureSnapshotPrepared) {
		t.Fatalf("features %v lack %s", d.Capabilities().Features, driver.FeatureSnapshotPrepared)
	}
	off := newDriverWith(t, sandbox.RuntimeRunsc, func(c *container.Config) { c.NoPreparedRestores = true })
	if slices.Contains(off.Capabilities().Features, driver.FeatureSnapshotPrepared) {
		t.Fatalf("with NoPreparedRestores, features %v list %s", off.Capabilities().Features, driver.FeatureSnapshotPrepared)
	}
	spec := sandbox.Spec{Isolation: sandbox.LevelContainer, Runtime: sandbox.RuntimeRunsc}
	sandbox.SetDefaults(&spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer drivertest.Destroy(ctx, t, sb)
	if r := drivertest.Exec(t, sb, 10*time.Second, "sleep 1000 >/dev/null 2>&1 & echo hi > /workspace/f"); r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	mem := t.TempDir()
	var layer strings.Builder
	if saved, err := sb.(interface {
		Snapshot(context.Context, io.Writer, string) (bool, error)
	}).Snapshot(ctx, &layer, mem); err != nil || !saved {
		t.Fatalf("snapshot: %v %v", saved, err)
	}
	for _, tc := range []struct {
		name     string
		prepared func(sandbox.Spec) sandbox.Spec
		used     bool
	}{
		{"same shape", func(s sandbox.Spec) sandbox.Spec { return s }, true},
		{"other shape", func(s sandbox.Spec) sandbox.Spec { s.Resources.MemoryMB *= 2; return s }, false},
		{"other environment", func(s sandbox.Spec) sandbox.Spec { s.Environment = map[string]string{"X": "1"}; return s }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := sandbox.NewID("sbx_")
			d.Prepare(id, tc.prepared(spec))
			// The created sandbox's pid, once runsc has written it.
			pidFile := filepath.Join(d.StateDir(), "bundles", id, "pid")
			var created string
			for deadline := time.Now().Add(time.Minute); created == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				b, _ := os.ReadFile(pidFile)
				created = strings.TrimSpace(string(b))
			}
			if created == "" {
				t.Fatal("Prepare made no container")
			}
			restored, err := d.Restore(ctx, id, spec, strings.NewReader(layer.String()), mem)
			if err != nil {
				t.Fatal(err)
			}
			defer drivertest.Destroy(ctx, t, restored)
			pid := fmt.Sprint(restored.(interface{ InitPid() int }).InitPid())
			if used := pid == created; used != tc.used {
				t.Fatalf("restored into pid %s, the prepared container's is %s: used %v, want %v", pid, created, used, tc.used)
			}
			if r := drivertest.Exec(t, restored, 10*time.Second, "cat /workspace/f; pgrep -x sleep >/dev/null && echo running"); r.Stdout != "hi\nrunning\n" {
				t.Fatalf("restored sandbox: %+v", r)
			}
		})
	}
	t.Run("at most MaxSpares", func(t *testing.T) {
		var ids []string
		for range container.MaxSpares + 2 {
			id := sandbox.NewID("sbx_")
			ids = append(ids, id)
			d.Prepare(id, spec)
		}
		defer func() {
			for _, id := range ids {
				d.Discard(id)
			}
		}()
		made := func() int {
			n := 0
			for _, id := range ids {
				if _, err := os.Stat(filepath.Join(d.StateDir(), "bundles", id, "pid")); err == nil {
					n++
				}
			}
			return n
		}
		n := made()
		for deadline := time.Now().Add(time.Minute); n < container.MaxSpares && time.Now().Before(deadline); n = made() {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if n = made(); n != container.MaxSpares {
			t.Fatalf("%d containers made for %d prepared restores, want %d", n, len(ids), container.MaxSpares)
		}
	})
	drivertest.Destroy(ctx, t, sb)
	checkLeftovers(t, d)
}

// TestHostPaths: the operator's hostTemplate.paths are bound read-only over the hidden
// /usr/local (and elsewhere) in both runtimes' sandboxes; the rest of /usr/local stays hidden.
func TestHostPaths(t *testing.T) {
	paths := drivertest.HostPaths(t)
	for _, rt := range []string{sandbox.RuntimeRunc, sandbox.RuntimeRunsc} {
		t.Run(rt, func(t *testing.T) {
			d := newDriverWithInit(t, rt, func(c *host.Config) { c.HostPaths = paths })
			drivertest.CheckHostPaths(t, &pinned{d, rt}, paths)
		})
	}
}
