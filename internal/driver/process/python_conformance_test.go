package process_test

import (
	"fmt"
	"testing"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
)

// pythonSkips are the cases with no Python form. Every other case runs in Python here, as it
// does on a level without a shell.
var pythonSkips = map[string]string{
	"SnapshotMemory":   "no Python form: its counter is a background shell loop, and a Python one could not be proven here (this level saves files only, so the case skips in either dialect)",
	"SnapshotPrepared": "no Python form, for the same reason as SnapshotMemory (and this level prepares no restores)",
}

// TestConformancePython runs the conformance suite's Python forms (python3 -c, no shell) against
// the process level, whose template has Debian's python3: it proves them right for the levels
// that have an interpreter but no shell.
func TestConformancePython(t *testing.T) {
	d := newDriver(t)
	baseline := mounts()
	drivertest.Run(t, d, drivertest.Options{
		Lang: drivertest.LangPython,
		Skip: pythonSkips,
		Leaks: func() []string {
			out := d.Leftovers()
			if n := mounts(); n != baseline {
				out = append(out, fmt.Sprintf("host mount table has %d entries, had %d", n, baseline))
			}
			return out
		},
	})
}
