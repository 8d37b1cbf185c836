package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// Restores made ready ahead (driver.Preparer). Half of a `runsc restore` passes before it reads
// the image: the runtime starts its sandbox process and gofer, compiles its seccomp filters and
// makes the sandbox's mounts and cgroups. runsc restores as well into a container `runsc create`
// made earlier, so Prepare has that container made — bundle, control socket, cgroups, the
// created sandbox — before the restore is asked for, and Restore then only extracts the
// snapshot's layer into it and has runsc load the image.

var _ driver.Preparer = (*Driver)(nil)

// maxSpares bounds the containers made ahead at a time, daemon-wide: each is an idle gVisor
// sandbox (29 MB of host memory, measured); past it, restores make their container when asked.
const maxSpares = 16

// spare is a container made for a restore that has not come yet.
type spare struct {
	shape string        // spareShape of the spec it was made for
	ready chan struct{} // closed once made, or once making it failed
	c     *built        // nil when making it failed
	pid   int           // the created sandbox's process
}

// spareShape is what a restore's spec must share with the spec a spare was made for: all but
// the fields that live in init's memory, which the image brings back, or in airlock's records.
func spareShape(spec sandbox.Spec) string {
	spec.Name, spec.AgentID, spec.Environment, spec.Metadata, spec.Timeout = "", "", nil, nil, sandbox.Timeout{}
	b, _ := json.Marshal(spec)
	return string(b)
}

// preparable reports whether a restore of spec can use a spare: runsc, no image (the layer of a
// spare is filled under its root while it is mounted, which overlayfs does not allow for its
// upper directory), no network (a spare would hold a network namespace and firewall rules).
func (d *Driver) preparable(spec sandbox.Spec) bool {
	rt, err := d.runtime(spec)
	return err == nil && d.caps.Available && !d.cfg.NoPreparedRestores && rt.name == sandbox.RuntimeRunsc &&
		spec.Image == "" && spec.Network.EgressPolicy == sandbox.EgressNone
}

// Prepare implements driver.Preparer: it starts making container id of spec, for a Restore of id
// with a memory image, when the container level can.
func (d *Driver) Prepare(id string, spec sandbox.Spec) {
	if !d.preparable(spec) {
		return
	}
	sp := &spare{shape: spareShape(spec), ready: make(chan struct{})}
	d.sparesMu.Lock()
	if d.spares[id] != nil || len(d.spares) >= maxSpares {
		d.sparesMu.Unlock()
		return
	}
	d.spares[id] = sp
	d.sparesMu.Unlock()
	go func() {
		defer close(sp.ready)
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := d.build(ctx, id, spec, nil, true)
		if err == nil {
			if sp.pid, err = c.rt.create(ctx, id, c.b.dir, c.gw); err != nil {
				err = errors.Join(err, c.destroy(context.WithoutCancel(ctx))) // logged below
			}
		}
		if err != nil {
			d.log.Warn("could not make a container ready for a restore; the restore will make its own", "sandbox", id, "err", err)
			return
		}
		sp.c = c
		d.log.Debug("container ready for a restore", "sandbox", id, "took", time.Since(t0))
	}()
}

// Discard implements driver.Preparer.
func (d *Driver) Discard(id string) {
	if sp := d.takeSpare(id); sp != nil {
		<-sp.ready
		d.dropSpare(id, sp)
	}
}

// dropSpare discards spare sp of sandbox id, which is ready.
func (d *Driver) dropSpare(id string, sp *spare) {
	if sp.c != nil {
		d.discard(context.Background(), id, sp.c)
	}
}

func (d *Driver) takeSpare(id string) *spare {
	d.sparesMu.Lock()
	defer d.sparesMu.Unlock()
	sp := d.spares[id]
	delete(d.spares, id)
	return sp
}

// Restore implements driver.Restorer: a create over the snapshot's layer and, with mem (a runsc
// snapshot's memory image), gVisor's restore of the sandbox's kernel, whose processes run on
// where they were. A spare Prepare made for id is used when it fits, and ended otherwise.
func (d *Driver) Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	if sp := d.takeSpare(id); sp != nil {
		select {
		case <-sp.ready:
		case <-ctx.Done():
			go func() { <-sp.ready; d.dropSpare(id, sp) }()
			return nil, ctx.Err()
		}
		if sp.c != nil && mem != "" && sp.shape == spareShape(spec) {
			return d.restoreSpare(ctx, id, spec, sp, layer, mem)
		}
		d.dropSpare(id, sp) // before the create below makes a container of the same id
	}
	return d.create(ctx, id, spec, layer, mem)
}

// restoreSpare fills spare sp's layer from the snapshot's and has runsc restore the memory image
// in mem into its container.
func (d *Driver) restoreSpare(ctx context.Context, id string, spec sandbox.Spec, sp *spare, layer io.Reader, mem string) (driver.Sandbox, error) {
	c := sp.c
	if err := c.b.fill(layer, d.extractOptions(c.uids)); err != nil {
		d.discard(context.WithoutCancel(ctx), id, c)
		if errors.Is(err, snapshot.ErrCorrupt) {
			return nil, err
		}
		// The cause as text: whatever its kind, the restore's setup failed.
		return nil, fmt.Errorf("restore the snapshot's layer: %v: %w", err, errdefs.ErrSetup) //nolint:errorlint // see above
	}
	return d.launch(ctx, id, spec, c, mem, func(ctx context.Context, _ *os.File) (int, error) {
		if err := c.rt.restoreCreated(ctx, id, c.b.dir, mem); err != nil {
			return 0, err
		}
		return sp.pid, nil
	})
}

// fill extracts a snapshot's layer into the layer of a bundle assembled without one (a spare):
// into a directory of its own on the layer's file system, whose entries then move into place.
// The directories the bundle has already — its skeleton, and the writable directories bound
// into its root, which must stay the same directories — stay and take the snapshot's owner,
// mode and times; what the snapshot has in them moves in. The skeleton's other entries (mount
// points, /usr links) are the snapshot's own: both come from the same template.
func (b *bundle) fill(r io.Reader, o snapshot.ExtractOptions) error {
	stage := filepath.Join(b.layer, ".restore")
	if err := os.Mkdir(stage, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if _, err := snapshot.ExtractLayer(r, stage, o); err != nil {
		return err
	}
	return merge(stage, b.layer)
}

// merge moves what src holds into dst, keeping the directories both have (see bundle.fill).
func merge(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := os.Lstat(to)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(from, to); err != nil {
				return err
			}
		case err != nil:
			return err
		case e.IsDir() && fi.IsDir():
			if err := merge(from, to); err != nil {
				return err
			}
			if err := sameMeta(from, to); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameMeta gives directory dst the owner, mode and times of src.
func sameMeta(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner", src)
	}
	if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid)); err != nil {
		return err
	}
	return os.Chtimes(dst, time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix()))
}
