package container

import (
	"context"
	"fmt"
	"io"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

var _ driver.Restorer = (*Driver)(nil)

// snapshot saves sandbox id's layer (process.Launcher.Snapshot), read on the host from the
// bundle while the sandbox's cgroup is frozen. Files only, on both runtimes: runc's processes are
// the host kernel's (saving them would take CRIU), and gVisor's own checkpoint cannot save a
// sandbox whose processes hold descriptors the host passed in (its control socket, every exec's
// standard streams) — see the README's snapshot notes. mem is ignored.
func (d *Driver) snapshot(ctx context.Context, id string, b *bundle, cg *cgroups.Cgroup, uidBase int, w io.Writer, paused bool) (bool, error) {
	if !paused {
		if err := cg.Freeze(ctx); err != nil {
			return false, fmt.Errorf("snapshot: freeze sandbox %s: %w", id, err)
		}
		defer cg.Thaw(context.WithoutCancel(ctx))
	}
	_, err := snapshot.WriteLayer(w, b.layer, snapshot.WriteOptions{
		Layout: LayerLayout, SandboxID: func(host int) (int, bool) {
			return host - uidBase, host >= uidBase && host-uidBase <= snapshot.MaxID
		},
	})
	return false, err
}

// Restore implements driver.Restorer: files only (mem is ignored, see snapshot).
func (d *Driver) Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	return d.create(ctx, id, spec, layer)
}
