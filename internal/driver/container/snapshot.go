package container

import (
	"context"
	"fmt"
	"io"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

var _ driver.Restorer = (*Driver)(nil)

// snapshot saves sandbox id (host.Launcher.Snapshot): its layer, read on the host from the
// bundle, and, with mem on runsc, its kernel — processes, memory, descriptors — by gVisor's
// checkpoint into the directory mem, at the same instant: the sandbox is paused by the runtime
// for both, and the checkpoint leaves it running. Otherwise the layer alone, with the sandbox's
// cgroup frozen: runc's processes are the host kernel's, and saving them would take CRIU.
// (host.Sandbox.Snapshot has made the sandbox ready for a checkpoint: no exec runs, and init
// holds no host descriptor.)
func (d *Driver) snapshot(ctx context.Context, rt *runtime, id string, b *bundle, uids uidalloc.Range, cg *cgroups.Cgroup, w io.Writer, mem string, paused bool) (bool, error) {
	writeLayer := func() error {
		// Owners in sandbox ids: a restore maps them into its own range.
		_, err := snapshot.WriteLayer(w, b.layer, snapshot.WriteOptions{Layout: LayerLayout, SandboxID: uids.SandboxID})
		return err
	}
	if mem != "" && rt.name == sandbox.RuntimeRunsc {
		if err := rt.command(ctx, "pause", rt.cid(id)); err != nil {
			return false, fmt.Errorf("snapshot: %w", err)
		}
		// Resumed whatever happens; a checkpoint leaves it paused while this pause holds.
		defer func() {
			if err := rt.command(context.WithoutCancel(ctx), "resume", rt.cid(id)); err != nil {
				d.log.Error("sandbox left paused after a snapshot", "sandbox", id, "err", err)
			}
		}()
		if err := rt.checkpoint(ctx, id, mem); err != nil {
			return false, fmt.Errorf("snapshot: %w", err)
		}
		return true, writeLayer()
	}
	if !paused {
		if err := cg.Freeze(ctx); err != nil {
			return false, fmt.Errorf("snapshot: freeze sandbox %s: %w", id, err)
		}
		defer func() {
			if err := cg.Thaw(context.WithoutCancel(ctx)); err != nil {
				d.log.Error("sandbox left frozen after a snapshot", "sandbox", id, "err", err)
			}
		}()
	}
	return false, writeLayer()
}
