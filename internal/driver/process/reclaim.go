package process

import (
	"context"
	"fmt"
	"os"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

var _ driver.Reclaimer = (*Driver)(nil)

// Reclaim implements driver.Reclaimer: it releases what is left of sandbox id after the airlock
// process that made it died. Its init died with that process (PR_SET_PDEATHSIG), and the kernel
// took its PID and mount namespaces with it; what can remain is the cgroup, with a straggler that
// left the PID namespace's reach (none should) — the cgroup is killed, then removed.
//
// Its uid range is freed once no process runs with its ids (else a later sweep frees it).
func (d *Driver) Reclaim(ctx context.Context, id string) error {
	os.Remove(d.adoptSocket(id))
	if d.cgroups != nil {
		// Destroy of a cgroup that is gone (in some or all hierarchies) is not an error.
		if err := d.cgroups.Open(d.cfg.CgroupParent, id).Destroy(ctx); err != nil {
			return fmt.Errorf("reclaim sandbox %s: %w", id, err)
		}
	}
	d.rt.ReclaimUIDs(sandbox.LevelProcess, id)
	return nil
}
