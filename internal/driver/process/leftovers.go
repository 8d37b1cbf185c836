package process

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Leftovers lists host resources that belong to no live sandbox of this driver: cgroups under
// CgroupParent and processes running as one of the sandbox uids. With no sandbox alive it must be
// empty; tests and the daemon's recovery use it.
func (d *Driver) Leftovers() []string {
	var out []string
	if d.cgroups != nil {
		names, _ := d.cgroups.List(d.cfg.CgroupParent)
		for _, n := range names {
			out = append(out, "cgroup "+d.cfg.CgroupParent+"/"+n)
		}
	}
	for _, pid := range d.sandboxPids() {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		out = append(out, fmt.Sprintf("process %d (%s)", pid, strings.TrimSpace(string(comm))))
	}
	return out
}

// sandboxPids returns host pids whose real uid lies in the range mapped into sandboxes.
func (d *Driver) sandboxPids() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	lo, hi := uint64(d.cfg.UIDBase), uint64(d.cfg.UIDBase)+uidRange
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
				if fs := strings.Fields(rest); len(fs) > 0 {
					if uid, err := strconv.ParseUint(fs[0], 10, 32); err == nil && uid >= lo && uid < hi {
						pids = append(pids, pid)
					}
				}
				break
			}
		}
		f.Close()
	}
	return pids
}
