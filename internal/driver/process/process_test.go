package process_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

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
