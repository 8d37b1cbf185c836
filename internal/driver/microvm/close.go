package microvm

import (
	"context"

	"github.com/airlockrun/airlock/internal/driver"
)

var _ driver.Closer = (*Driver)(nil)

// Close implements driver.Closer: at the daemon's clean stop, the instance's cgroup parent goes
// if no VMM's cgroup is left under it (a VM kept for adoption keeps it).
func (d *Driver) Close(context.Context) error {
	if d.roots != nil {
		d.roots.release()
	}
	if d.cgroups == nil {
		return nil
	}
	return d.cgroups.RemoveParent(d.cfg.CgroupParent)
}
