package microvm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

var (
	_ driver.Reclaimer = (*Driver)(nil)
	_ driver.Sweeper   = (*Driver)(nil)
)

// Reclaim implements driver.Reclaimer: what a sandbox whose airlock process died left — its
// VMM, killed with its cgroup (the VMM's parent-death signal has usually ended it already), the
// cgroup, its directory (disk, console) and its uid range.
func (d *Driver) Reclaim(ctx context.Context, id string) error {
	var err error
	if d.cgroups != nil {
		err = d.cgroups.Open(d.cfg.CgroupParent, id).Destroy(ctx)
	}
	if rerr := os.RemoveAll(filepath.Join(d.cfg.StateDir, "vms", id)); err == nil {
		err = rerr
	}
	if err == nil {
		d.rt.ReclaimUIDs(sandbox.LevelMicroVM, id)
	}
	return err
}

// orphanAge is how old a VM directory without an owner record must be before Sweep takes it:
// a younger one may be a sandbox being made right now.
const orphanAge = time.Minute

// Sweep implements driver.Sweeper: the VMs of airlock processes that died before they could tear
// them down. A VM's directory records the airlock process that made it; it is an orphan once
// that process is gone.
func (d *Driver) Sweep(ctx context.Context) {
	ents, _ := os.ReadDir(filepath.Join(d.cfg.StateDir, "vms"))
	var swept []string
	for _, e := range ents {
		dir := filepath.Join(d.cfg.StateDir, "vms", e.Name())
		if procfs.OwnerAlive(dir) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "owner")); err != nil {
			if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) < orphanAge {
				continue
			}
		}
		if err := d.Reclaim(ctx, e.Name()); err != nil {
			d.log.Warn("could not remove an orphaned VM", "sandbox", e.Name(), "err", err)
			continue
		}
		swept = append(swept, e.Name())
	}
	if len(swept) > 0 {
		d.log.Info("removed orphaned VMs", "sandboxes", swept)
	}
}

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
