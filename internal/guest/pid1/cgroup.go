package pid1

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/procfs"
)

// A sandbox whose kernel is its own (gVisor) cannot be held to a process limit by the host's pids
// cgroup: that counts the runtime's threads, not the sandbox's processes. There init makes a pids
// cgroup in the sandbox's kernel and enters it before it starts anything, so every command counts
// against it, and answers the host's pings with its counters.

// guestCgroup is init's pids cgroup in the sandbox's kernel, reached through a descriptor of its
// directory (the cgroup file system is unmounted once init is in it). A nil one does nothing.
type guestCgroup struct {
	dir      int
	max      int64
	hits     int64
	oomKills int64
}

// guestMount is where init mounts the sandbox kernel's pids hierarchy for the moment it needs it.
const guestMount = "/dev/.airlock-pids"

// newGuestCgroup puts init in a new pids cgroup limited to max tasks; init's own threads count
// too (see guest.InitTasks).
func newGuestCgroup(max int64) (*guestCgroup, error) {
	fail := func(what string, err error) (*guestCgroup, error) {
		return nil, fmt.Errorf("process limit in the sandbox's kernel: %s: %w", what, err)
	}
	if err := os.Mkdir(guestMount, 0o700); err != nil {
		return fail("mkdir", err)
	}
	defer os.Remove(guestMount)
	if err := unix.Mount("cgroup", guestMount, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "pids"); err != nil {
		return fail("mount", err)
	}
	mounted := true
	defer func() {
		if mounted { // a failed setup ends init: its error is the one to tell
			_ = unix.Unmount(guestMount, unix.MNT_DETACH)
		}
	}()
	cg := guestMount + "/airlock"
	if err := os.Mkdir(cg, 0o755); err != nil {
		return fail("mkdir", err)
	}
	if err := os.WriteFile(cg+"/pids.max", []byte(strconv.FormatInt(max, 10)), 0); err != nil {
		return fail("pids.max", err)
	}
	if err := os.WriteFile(cg+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fail("enter", err)
	}
	dir, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open", err)
	}
	// Init keeps the directory's descriptor; what it starts must not find the hierarchy.
	mounted = false
	if err := unix.Unmount(guestMount, unix.MNT_DETACH); err != nil {
		unix.Close(dir)
		return fail("unmount", err)
	}
	return &guestCgroup{dir: dir, max: max}, nil
}

// current reads pids.current.
func (g *guestCgroup) current() int64 {
	fd, err := unix.Openat(g.dir, "pids.current", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	defer unix.Close(fd)
	var b [32]byte
	n, _ := unix.Read(fd, b[:])
	v, err := strconv.ParseInt(strings.TrimSpace(string(b[:max(n, 0)])), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// sample counts a hit when the sandbox is at its limit.
func (g *guestCgroup) sample() {
	if g != nil && g.current() >= g.max {
		g.hits++
	}
}

// counts are the event counters, which ride on every command's start and end (the host's
// accounting of each exec); stats add the current count, which only Usage asks for (MsgPing).
func (g *guestCgroup) counts() *guest.CgroupStats {
	if g == nil {
		return nil
	}
	return &guest.CgroupStats{PidsMax: g.max, PidsHits: g.hits, OOMKills: g.oomKills}
}

func (g *guestCgroup) stats() *guest.CgroupStats {
	st := g.counts()
	if st != nil {
		st.Pids = g.current()
	}
	return st
}

// oomKill kills the largest process but init, and counts it.
func (g *guestCgroup) oomKill() {
	if g == nil {
		return
	}
	victim := procfs.Largest(os.Getpid())
	if victim > 0 && unix.Kill(victim, unix.SIGKILL) == nil {
		g.oomKills++
	}
}
