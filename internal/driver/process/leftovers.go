package process

import (
	"context"
	"os"
	"time"

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
	return append(out, d.UIDLeftovers(sandbox.LevelProcess)...)
}
