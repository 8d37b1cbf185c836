package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

var (
	_ driver.Reclaimer = (*Driver)(nil)
	_ driver.Sweeper   = (*Driver)(nil)
)

// Reclaim implements driver.Reclaimer: whatever is left of sandbox id — its container in either
// runtime, its mounts, its bundle — is released.
func (d *Driver) Reclaim(ctx context.Context, id string) error {
	for _, rt := range d.runtimes {
		if rt.path != "" {
			// What runs of it dies with its cgroups below; the runtime's record of it stays.
			if err := rt.delete(ctx, id); err != nil {
				d.log.Warn("reclaim: the runtime's state of a container not removed", "sandbox", id, "err", err)
			}
		}
	}
	dir := filepath.Join(d.cfg.StateDir, "bundles", id)
	err := mountinfo.UnmountAll(dir)
	os.RemoveAll(dir)
	if d.cgroups != nil {
		// What this leaves, removeCgroups below reports.
		_ = d.cgroups.Open(d.cfg.CgroupParent, id).Destroy(ctx)
	}
	err = errors.Join(err, removeCgroups(d.cfg.CgroupParent, id))
	if err == nil {
		d.rt.ReclaimUIDs(sandbox.LevelContainer, id)
	}
	return err
}

// orphanAge is how old a bundle must be before Sweep takes it for an orphan: younger ones may
// belong to a sandbox another airlock process is setting up right now.
const orphanAge = time.Minute

// Sweep implements driver.Sweeper: the containers and bundles that airlock processes killed before
// they could tear them down left behind. A bundle belongs to the airlock process whose pid (with
// its start time) it records; it is an orphan once that process is gone.
func (d *Driver) Sweep(ctx context.Context) {
	ents, _ := os.ReadDir(filepath.Join(d.cfg.StateDir, "bundles"))
	var swept []string
	for _, e := range ents {
		dir := filepath.Join(d.cfg.StateDir, "bundles", e.Name())
		if procfs.OwnerAlive(dir) {
			continue
		}
		if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) < orphanAge && ownerUnknown(dir) {
			continue
		}
		if err := d.Reclaim(ctx, e.Name()); err != nil {
			d.log.Warn("could not remove an orphaned container", "sandbox", e.Name(), "err", err)
			continue
		}
		swept = append(swept, e.Name())
	}
	if len(swept) > 0 {
		d.log.Info("removed orphaned containers", "sandboxes", swept)
	}
}

var _ driver.Closer = (*Driver)(nil)

// Close implements driver.Closer: with no sandbox of the level left, the mounts it keeps for all
// of them under its state directory go — the bundles directory's private bind of itself, and
// what a runtime keeps in its own state (none today: runsc's gofers get their own network
// namespaces, so it pins no null-netns), and the
// instance's cgroup parent, in every hierarchy the runtimes made it in. A
// bundle still there (a sandbox not torn down, or one of another airlock on the same data dir)
// keeps them all; a mount in use is left (unmounted without MNT_DETACH, it says EBUSY). A
// start after a kill -9 reuses them.
func (d *Driver) Close(ctx context.Context) error {
	d.sparesMu.Lock()
	ids := slices.Collect(maps.Keys(d.spares))
	d.sparesMu.Unlock()
	for _, id := range ids {
		d.Discard(id)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.cfg.StateDir, "bundles")); len(ents) > 0 {
		d.log.Warn("sandboxes are left: their shared mounts stay", "bundles", len(ents))
		return nil
	}
	d.privateMu.Lock()
	defer d.privateMu.Unlock()
	d.private = false
	var errs []error
	for _, m := range mountinfo.Under(d.cfg.StateDir) {
		switch err := unix.Unmount(m, 0); err {
		case nil, unix.EINVAL, unix.ENOENT:
		case unix.EBUSY:
			d.log.Warn("a mount of the container level is in use; it stays", "mount", m)
		default:
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	if d.cgroups != nil {
		errs = append(errs, d.cgroups.RemoveParent(d.cfg.CgroupParent))
	}
	return errors.Join(errs...)
}

func ownerUnknown(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "owner"))
	return err != nil
}

// Leftovers lists what this level's sandboxes still hold on the host: cgroups, containers the
// runtimes know, bundles, mounts, the uid ranges still recorded for them, and processes (runc's
// in a uid range of theirs; runsc's by its state directory on their command line). Tests call it after tearing sandboxes down.
func (d *Driver) Leftovers() []string {
	var out []string
	out = append(out, cgroupDirs(d.cfg.CgroupParent, "*")...)
	for name, rt := range d.runtimes {
		for _, id := range rt.list(context.Background()) {
			out = append(out, name+" container "+id)
		}
	}
	bundles := filepath.Join(d.cfg.StateDir, "bundles")
	ents, _ := os.ReadDir(bundles)
	for _, e := range ents {
		out = append(out, "bundle "+e.Name())
	}
	for _, m := range mountinfo.Under(bundles) {
		if m != bundles {
			out = append(out, "mount "+m)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || procfs.Zombie(pid) {
			// An exited container process holds nothing but its pid until the host's init,
			// which the runtime left it to, reaps it.
			continue
		}
		if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmd), d.cfg.StateDir+"/runsc") {
			out = append(out, fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return append(out, d.rt.UIDLeftovers(sandbox.LevelContainer)...)
}

// cgroupDirs are the directories of cgroup parent/name (name may be a glob) in every mounted
// hierarchy: the runtimes make one in each v1 hierarchy (blkio, cpuset, devices, name=systemd,
// ...), not only in the controllers airlock reads.
func cgroupDirs(parent, name string) []string {
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/*/" + parent + "/" + name, "/sys/fs/cgroup/" + parent + "/" + name} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				out = append(out, d)
			}
		}
	}
	return out
}

// removeCgroups removes the (empty, once the container is gone) directories of cgroup parent/id
// in every hierarchy the runtime used, retrying briefly while the kernel finishes with them.
func removeCgroups(parent, id string) error {
	var err error
	for try := 0; try < 50; try++ {
		err = nil
		for _, d := range cgroupDirs(parent, id) {
			if rerr := os.Remove(d); rerr != nil && !os.IsNotExist(rerr) {
				err = errors.Join(err, rerr)
			}
		}
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s/%s: %w", parent, id, err)
}
