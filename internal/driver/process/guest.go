package process

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/procfs"
)

// A sandbox whose kernel is its own (gVisor) cannot be held to a process limit by the host's pids
// cgroup: that counts the runtime's threads, not the sandbox's processes. There init makes a pids
// cgroup in the sandbox's kernel and enters it before it starts anything, so every command counts
// against it, and answers the driver's pings with its counters.

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
// too (see initTasks).
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
	defer unix.Unmount(guestMount, unix.MNT_DETACH)
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

// counts are the event counters, which ride on every command's start and end (see
// Sandbox.account); stats add the current count, which only Usage asks for (msgPing).
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

// The memory limit of a sandbox with its own kernel: the host's cgroup charges that kernel for
// everything, so at the limit the host's OOM killer would end the whole sandbox. Its limit has
// headroom instead (GuestHeadroom), and when the use reaches the sandbox's limit the driver
// (watching the cgroup) tells init, which kills the process with the largest resident set, as
// the kernel's OOM killer would.

// GuestHeadroom is what the host cgroup of a sandbox of memory bytes allows above them: the
// sandbox kernel's own memory, and the time the driver and init take to kill a process that
// allocates fast.
func GuestHeadroom(memory int64) int64 { return 64<<20 + memory/4 }

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

// watchGuestMemory tells init to kill a process whenever the sandbox's use reaches its limit,
// until the sandbox ends. The watch is set up in the background: on cgroup v1, registering the
// threshold waits for an RCU grace period (9 ms measured on the CI host), which no create or
// restore should wait for; the runtime's own limit holds meanwhile. A sandbox whose watch cannot
// be set up is ended: it never runs unwatched for longer than the setup takes.
func (s *Sandbox) watchGuestMemory(limit int64) {
	go func() {
		w, err := s.cg.WatchMemory(limit)
		if err != nil {
			select {
			case <-s.done:
				return // it ended first, and took its cgroup with it
			default:
			}
			s.d.log.Error("sandbox ended: its memory limit cannot be watched", "sandbox", s.id, "err", err)
			s.proc.Kill()
			return
		}
		defer w.Close()
		for {
			select {
			case <-w.C:
				if w.Over() {
					s.ctl.send(&guest.Message{Kind: guest.MsgOOM})
				}
			case <-s.done:
				return
			}
		}
	}()
}

// guestStats asks init for its guest cgroup's counters.
func (s *Sandbox) guestStats(ctx context.Context) (*guest.CgroupStats, error) {
	ctx, cancel := context.WithTimeout(ctx, guestPing)
	defer cancel()
	m, err := s.ask(ctx, guest.MsgPing, guest.MsgPong)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: init's process count: %w", s.id, err)
	}
	if m.Guest == nil {
		return nil, fmt.Errorf("sandbox %s: init keeps no process count", s.id)
	}
	return m.Guest, nil
}

// guestPing bounds the wait for init's counters (a paused sandbox does not answer; a busy gVisor
// is slow to run init).
const guestPing = 3 * time.Second
