package cgroups

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/airlockrun/airlock/internal/mountinfo"
)

// ctrl identifies one controller airlock uses.
type ctrl int

const (
	cpuCtrl ctrl = iota
	cpuacctCtrl
	memoryCtrl
	pidsCtrl
	freezerCtrl
	numCtrls
)

func (c ctrl) String() string {
	switch c {
	case cpuCtrl:
		return "cpu"
	case cpuacctCtrl:
		return "cpuacct"
	case memoryCtrl:
		return "memory"
	case pidsCtrl:
		return "pids"
	case freezerCtrl:
		return "freezer"
	}
	return "ctrl" + strconv.Itoa(int(c))
}

func ctrlByName(name string) (ctrl, bool) {
	for c := ctrl(0); c < numCtrls; c++ {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

// placement says where one controller lives.
type placement struct {
	mount string // mount point of the hierarchy; "" if the controller is unavailable
	v2    bool   // mount is the unified (cgroup2) hierarchy
	root  string // mount's root within its hierarchy, to prefer "/" mounts
}

// Layout is the host's cgroup arrangement as found by Detect. It is safe for
// concurrent use by many sandboxes.
type Layout struct {
	place        [numCtrls]placement
	v1Mounts     int      // cgroup v1 hierarchies mounted, named ones (name=systemd) included
	mounts       []string // every cgroup mount point (v1 hierarchies, used or not, and cgroup2)
	unified      string   // cgroup2 mount point, "" if none
	unifiedCtrls []string // the unified root's cgroup.controllers
	v2Freeze     bool     // kernel has cgroup.freeze (5.2+)
	v2Kill       bool     // kernel has cgroup.kill (5.14+)

	mu sync.Mutex
	// prepared holds the parents whose root→parent chain already has the
	// v2 controllers enabled in cgroup.subtree_control, so New does that
	// work once per parent rather than once per sandbox. Guarded by mu.
	prepared map[string]bool
}

// Detect reads /proc/self/mountinfo and, when cgroup2 is mounted, the
// unified root's cgroup.controllers, and reports where each controller lives.
func Detect() (*Layout, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroups: read /proc/self/mountinfo: %w", err)
	}
	return parseLayout(string(mi), os.ReadFile)
}

// parseLayout builds a Layout from mountinfo text. readFile is used for the
// unified root's cgroup.controllers and for /proc/sys/kernel/osrelease, so
// tests can describe any host with fixtures.
func parseLayout(table string, readFile func(string) ([]byte, error)) (*Layout, error) {
	l := &Layout{prepared: make(map[string]bool)}
	unifiedRoot := ""
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f) {
			continue
		}
		root, mnt, fstype, super := mountinfo.Unescape(f[3]), mountinfo.Unescape(f[4]), f[sep+1], f[sep+3]
		if (fstype == "cgroup" || fstype == "cgroup2") && !slices.Contains(l.mounts, mnt) {
			l.mounts = append(l.mounts, mnt)
		}
		switch fstype {
		case "cgroup2":
			// Prefer a mount of the hierarchy root; bind mounts of
			// sub-cgroups elsewhere (inside containers) come second.
			if l.unified == "" || (unifiedRoot != "/" && root == "/") {
				l.unified, unifiedRoot = mnt, root
			}
		case "cgroup":
			l.v1Mounts++
			for _, opt := range strings.Split(super, ",") {
				c, ok := ctrlByName(opt)
				if !ok {
					continue
				}
				p := &l.place[c]
				if p.mount == "" || (p.root != "/" && root == "/") {
					*p = placement{mount: mnt, root: root}
				}
			}
		}
	}
	if l.unified != "" {
		b, err := readFile(l.unified + "/cgroup.controllers")
		if err != nil && !isNotExist(err) {
			return nil, fmt.Errorf("cgroups: read %s/cgroup.controllers: %w", l.unified, err)
		}
		l.unifiedCtrls = strings.Fields(string(b))
		l.v2Freeze, l.v2Kill = true, true
		if rel, err := readFile("/proc/sys/kernel/osrelease"); err == nil {
			if maj, min, ok := kernelVersion(rel); ok {
				l.v2Freeze = maj > 5 || (maj == 5 && min >= 2)
				l.v2Kill = maj > 5 || (maj == 5 && min >= 14)
			}
		}
		// A controller bound to a v1 hierarchy cannot appear in v2, so v1
		// placements win; the rest go to v2 when available there.
		v2 := placement{mount: l.unified, v2: true, root: unifiedRoot}
		for _, name := range l.unifiedCtrls {
			if c, ok := ctrlByName(name); ok && l.place[c].mount == "" {
				l.place[c] = v2
			}
		}
		// cpu.stat's usage_usec is a core v2 file, present without the cpu
		// controller, so it stands in for cpuacct.
		if l.place[cpuacctCtrl].mount == "" {
			l.place[cpuacctCtrl] = v2
		}
		if l.place[freezerCtrl].mount == "" && l.v2Freeze {
			l.place[freezerCtrl] = v2
		}
	}
	return l, nil
}

// kernelVersion parses "6.18.44-foo" into 6, 18.
func kernelVersion(rel []byte) (major, minor int, ok bool) {
	parts := strings.SplitN(string(bytes.TrimSpace(rel)), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	end := 0
	for end < len(parts[1]) && parts[1][end] >= '0' && parts[1][end] <= '9' {
		end++
	}
	min, err2 := strconv.Atoi(parts[1][:end])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return maj, min, true
}

// Mode reports "v1", "v2", "hybrid" (the unified hierarchy mounted alongside
// v1 hierarchies, whatever controllers it has), or "none".
func (l *Layout) Mode() string {
	switch {
	case l.unified != "" && l.v1Mounts > 0:
		return "hybrid"
	case l.unified != "":
		return "v2"
	case l.v1Mounts > 0:
		return "v1"
	}
	return "none"
}

// Missing lists the required controllers that are available nowhere: cpu,
// memory, pids, and the freezer ("cgroup.freeze" when only v2 could have
// provided it, i.e. the kernel predates 5.2).
func (l *Layout) Missing() []string {
	var out []string
	for _, c := range []ctrl{cpuCtrl, memoryCtrl, pidsCtrl, freezerCtrl} {
		if l.place[c].mount != "" {
			continue
		}
		if c == freezerCtrl && l.unified != "" {
			out = append(out, "cgroup.freeze")
			continue
		}
		out = append(out, c.String())
	}
	return out
}

// Describe summarises the layout in one line for `airlock doctor`, e.g.
// "hybrid (cpu,cpuacct,memory,pids,freezer via v1; unified mounted at
// /sys/fs/cgroup/unified, no controllers)".
func (l *Layout) Describe() string {
	v1, v2 := l.split()
	var parts []string
	if len(v1) > 0 {
		parts = append(parts, strings.Join(v1, ",")+" via v1")
	}
	if len(v2) > 0 {
		parts = append(parts, strings.Join(v2, ",")+" via v2 at "+l.unified)
	}
	if l.unified != "" && len(v2) == 0 {
		s := "unified mounted at " + l.unified + ", "
		if len(l.unifiedCtrls) == 0 {
			s += "no controllers"
		} else {
			s += "unused controllers " + strings.Join(l.unifiedCtrls, ",")
		}
		parts = append(parts, s)
	}
	if l.unified != "" && len(v2) > 0 && !l.v2Kill {
		parts = append(parts, "no cgroup.kill")
	}
	if m := l.Missing(); len(m) > 0 {
		parts = append(parts, "missing "+strings.Join(m, ","))
	}
	return l.Mode() + " (" + strings.Join(parts, "; ") + ")"
}

// split names the controllers found on v1 hierarchies and on the v2 one.
func (l *Layout) split() (v1, v2 []string) {
	for c := ctrl(0); c < numCtrls; c++ {
		switch p := l.place[c]; {
		case p.mount == "":
		case p.v2:
			v2 = append(v2, c.String())
		default:
			v1 = append(v1, c.String())
		}
	}
	return v1, v2
}
