package microvm

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// Leftovers lists what the level's sandboxes still hold on the host: VM directories (disks,
// consoles), VMM cgroups, uid ranges and processes running with their uids (a VMM). With no
// sandbox of the level alive, it is empty.
func (d *Driver) Leftovers() []string {
	var out []string
	if entries, err := os.ReadDir(filepath.Join(d.cfg.StateDir, "vms")); err == nil {
		for _, e := range entries {
			out = append(out, "VM directory "+filepath.Join(d.cfg.StateDir, "vms", e.Name()))
		}
	}
	if d.cgroups != nil {
		if names, err := d.cgroups.List(d.cfg.CgroupParent); err == nil {
			for _, n := range names {
				out = append(out, fmt.Sprintf("cgroup %s/%s", d.cfg.CgroupParent, n))
			}
		}
	}
	return append(out, d.rt.UIDLeftovers(sandbox.LevelMicroVM)...)
}
