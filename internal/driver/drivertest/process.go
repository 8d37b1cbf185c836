package drivertest

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/process"
)

// ProcessOptions are the settings of a process level made for a test (ProcessLevel).
type ProcessOptions struct {
	// CgroupParent is the test's own cgroup parent (its directories are removed at the end).
	CgroupParent string
	// StateDir is the level's state directory, the test's own.
	StateDir string
	// UIDBase, when set, is where its pool of host uid ranges starts (else the default's).
	UIDBase uint32
	// OrphanGrace, when set, makes its sandboxes adoptable, as a daemon's are.
	OrphanGrace time.Duration
	// Images gives its sandboxes images (nil: none).
	Images driver.Images
	// Log is its logger (nil: warnings and errors to stderr).
	Log *slog.Logger
}

// ProcessLevel returns a process level for the tests of what is built on it but may not import
// it, as only the levels package wires levels together: the wasm level's jails, the container
// level's tests that compare it with the process level. The level's cgroup parent is removed
// when the test ends.
func ProcessLevel(t testing.TB, o ProcessOptions) *process.Driver {
	t.Helper()
	cfg := process.DefaultConfig()
	cfg.CgroupParent, cfg.StateDir, cfg.OrphanGrace, cfg.Images = o.CgroupParent, o.StateDir, o.OrphanGrace, o.Images
	if o.UIDBase != 0 {
		cfg.UIDBase = o.UIDBase
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	t.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cfg.CgroupParent)
		dirs = append(dirs, "/sys/fs/cgroup/"+cfg.CgroupParent)
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	return process.New(cfg, log)
}
