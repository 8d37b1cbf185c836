package process_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/process"
)

func TestMain(m *testing.M) {
	// This test binary is also every sandbox's init (the driver re-executes /proc/self/exe).
	if process.IsInit() {
		process.Init()
	}
	goleak.VerifyTestMain(m)
}

// newDriver returns a driver with its own cgroup parent and cache, so tests never touch a real
// airlock's state.
func newDriver(t *testing.T) *process.Driver {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the process level creates cgroups and maps a uid range")
	}
	state, err := os.MkdirTemp("", "airlock-test-state-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(state, 0o755)
	t.Cleanup(func() { os.RemoveAll(state) })
	cfg := process.DefaultConfig()
	cfg.CgroupParent = fmt.Sprintf("airlock-test-%d", os.Getpid())
	cfg.StateDir = state
	// Its own uid range, so that the leak check (processes in the range) never sees sandboxes of
	// other test packages running at the same time.
	cfg.UIDBase = 2_100_000_000
	t.Cleanup(func() {
		// The per-run cgroup parent goes too (rmdir only succeeds once it is empty).
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cfg.CgroupParent)
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	d := process.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if c := d.Capabilities(); !c.Available {
		t.Fatalf("process level unavailable on a host that should have it: %s", c.Reason)
	}
	return d
}

func mounts() int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Count(string(b), "\n")
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
			os.MkdirAll("/sys/fs/cgroup/"+c+"/"+parent, 0o755)
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
