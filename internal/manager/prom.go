package manager

import (
	"github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// SandboxCounts counts the tenants' live sandboxes by status and level, for airlock_sandboxes
// (metrics.Metrics.SetSandboxSource). Every live status of every registered level is there, 0
// when none has it, so a series does not vanish when its last sandbox ends. A warm pool's
// unclaimed sandboxes are not counted here: they are the pools' (Pools).
func (m *Manager) SandboxCounts() []metrics.SandboxCount {
	boxes := m.snapshot()

	type key struct{ status, level string }
	n := map[key]int{}
	if m.drivers != nil {
		for _, d := range m.drivers.All() {
			for _, st := range sandbox.LiveStatuses {
				n[key{st, d.Name()}] = 0
			}
		}
	}
	for _, b := range boxes {
		if status, _ := b.state(); sandbox.Live(status) { // a box being released may already be terminated
			n[key{status, b.level()}]++
		}
	}
	out := make([]metrics.SandboxCount, 0, len(n))
	for k, c := range n {
		out = append(out, metrics.SandboxCount{Status: k.status, Level: k.level, N: c})
	}
	return out
}

// createSource is how a create with snapshot from (nil for none) that did not claim from a pool
// makes its sandbox, for airlock_sandbox_create_seconds.
func createSource(from *store.Snapshot) string {
	if from != nil {
		return metrics.SourceSnapshot
	}
	return metrics.SourceCold
}
