package process

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// orphanAge is how old an empty sandbox cgroup must be before a sweep removes it. A live
// sandbox's cgroup is empty only for the milliseconds between its creation and init's move into
// it, so an old empty one belongs to an airlock that was killed (kill -9 of a one-shot run; its
// processes died with it through PR_SET_PDEATHSIG and the PID namespace).
const orphanAge = 30 * time.Second

// SweepOrphans removes empty sandbox cgroups older than orphanAge and returns their names. It is
// safe to run beside other airlock processes sharing the cgroup parent.
func (d *Driver) SweepOrphans(ctx context.Context) []string {
	if d.cgroups == nil {
		return nil
	}
	names, err := d.cgroups.List(d.cfg.CgroupParent)
	if err != nil {
		return nil
	}
	var swept []string
	for _, n := range names {
		cg := d.cgroups.Open(d.cfg.CgroupParent, n)
		paths := cg.Paths()
		if len(paths) == 0 {
			continue
		}
		st, err := os.Stat(paths[0])
		if err != nil || time.Since(st.ModTime()) < orphanAge {
			continue
		}
		if procs, err := cg.Procs(); err != nil || len(procs) > 0 {
			continue
		}
		if err := cg.Destroy(ctx); err == nil {
			swept = append(swept, n)
		}
	}
	return swept
}

// sweepSockets removes the init sockets in StateDir/run older than minAge whose sandbox has no
// process left in its cgroup (or no cgroup), removing that cgroup too, and returns the sandboxes'
// names. A socket is never dialled to find out: init takes whoever connects as its new driver.
// A socket younger than minAge may be a create's in flight (it is made before init's cgroup).
func (d *Driver) sweepSockets(ctx context.Context, minAge time.Duration) []string {
	dir := filepath.Join(d.cfg.StateDir, "run")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var swept []string
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		st, err := os.Lstat(path)
		if err != nil || time.Since(st.ModTime()) < minAge {
			continue
		}
		if d.cgroups != nil {
			cg := d.cgroups.Open(d.cfg.CgroupParent, e.Name())
			// Destroy of an empty (or gone) cgroup only removes its directories.
			if procs, err := cg.Procs(); err != nil || len(procs) > 0 || cg.Destroy(ctx) != nil {
				continue // a live sandbox (an adopted one, say)
			}
		}
		if os.Remove(path) == nil {
			swept = append(swept, e.Name())
		}
	}
	return swept
}

var _ driver.Closer = (*Driver)(nil)

// Close implements driver.Closer: the heartbeat stops (alive.go). At the daemon's clean stop,
// its sandboxes ended, what is left
// of any of them goes without the sweep's age floor: the init sockets of sandboxes with no
// process left, with their empty cgroups (a one-shot run beside the daemon makes no socket, so
// its sandboxes are not touched), and then the instance's cgroup parent if nothing is under it. A sandbox whose teardown failed keeps its socket and cgroup,
// for the next start's recovery.
func (d *Driver) Close(ctx context.Context) error {
	d.stopOnce.Do(func() { close(d.stop) })
	d.beats.Wait()
	if swept := d.sweepSockets(ctx, 0); len(swept) > 0 {
		d.log.Info("removed what gone sandboxes left", "sandboxes", swept)
	}
	if d.cgroups != nil {
		// The instance's own parent goes once empty; a sandbox left keeps it.
		return d.cgroups.RemoveParent(d.cfg.CgroupParent)
	}
	return nil
}

// Leftovers lists host resources that belong to no live sandbox of this driver: cgroups under
// CgroupParent, uid ranges still recorded for this airlock's process-level sandboxes, and
// processes running as a uid of a range this driver used. With no sandbox alive it must be empty;
// tests and the daemon's recovery use it. Other airlocks' sandboxes on the host are not counted.
func (d *Driver) Leftovers() []string {
	var out []string
	if d.cgroups != nil {
		names, _ := d.cgroups.List(d.cfg.CgroupParent)
		for _, n := range names {
			out = append(out, "cgroup "+d.cfg.CgroupParent+"/"+n)
		}
	}
	return append(out, d.rt.UIDLeftovers(sandbox.LevelProcess)...)
}
