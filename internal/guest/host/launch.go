package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Launcher says how a level runs airlock's init: who starts it and where, with what root and
// limits, and what the host side may do with the sandbox beyond execs. The process level starts
// init itself in fresh namespaces and has it build its root (Config, Files, NewCgroup,
// InitLayer); the container level has an OCI runtime (runc, gVisor's runsc) start it in a root and
// cgroup the level built, and init only locks down. From then on every level behaves the same:
// streams, terminals, signals, timeouts, per-exec usage.
type Launcher struct {
	// Start starts the airlock binary, with argv[0] guest.Arg0, as the sandbox's PID 1 with ctl as
	// its descriptor guest.ControlFd, and returns its host pid (for gVisor: the sandbox's, whose
	// death ends every process inside). Unless Config says otherwise, its root filesystem, host
	// name and limits are in place already.
	Start func(ctx context.Context, ctl *os.File) (pid int, err error)
	// Wait, when set, waits for init to exit: init is the level's child, which must reap it.
	// Otherwise its exit is watched through a pidfd.
	Wait func()
	// Config, when set, is the plan init executes (the process level's: init builds the root
	// filesystem, sets the host name and brings up loopback); its seccomp filter is Launch's to
	// fill in. Otherwise init is in a root its runtime made, and only sets its limits and locks
	// down (guest.Config.Container).
	Config *guest.Config
	// Files, when set, returns the descriptors sent with Config, the plan's mount sources (whose
	// indexes Config holds), once init runs as pid. Launch closes them once sent.
	Files func(pid int) ([]*os.File, error)
	// Seed, when set with Config, is a snapshot's layer (a tar stream) for init to extract into
	// the fresh writable layer before it builds anything on it: Launch feeds it through a pipe and
	// then reads it to its end, and a corrupt stream fails the launch.
	Seed io.Reader
	// Cgroup is the cgroup the runtime put the sandbox in, with its limits set.
	Cgroup *cgroups.Cgroup
	// NewCgroup, when set instead of Cgroup, makes the sandbox's cgroup with its limits while init
	// builds its root; Launch moves init into it (on cgroup v1 that move waits for an RCU grace
	// period, so the overlap matters). A cgroup it returns with an error is destroyed.
	NewCgroup func() (*cgroups.Cgroup, error)
	// PidsLimit is the pids limit the kernel enforces on the cgroup, for Usage.
	PidsLimit int64
	// GuestPids, when set, is the limit for init to enforce in the sandbox's own kernel instead
	// (gVisor, whose processes the host's pids cgroup cannot count; see guest.CgroupStats).
	GuestPids int64
	// Root is the sandbox's root filesystem as the host reaches it (files API); Layer a path on
	// its writable layer (disk usage and the disk-full event). Empty: init's, through /proc.
	Root, Layer string
	// UIDs is the host uid range the sandbox's ids are mapped to (Runtime.AllocateUIDs); the level
	// frees it in Teardown or Gone.
	UIDs uidalloc.Range
	// CgroupCPU says the runtime is the sandbox's kernel (gVisor), whose accounting of a command's
	// CPU time also counts time the host throttled it: an exec's CPU time is then capped by the
	// cgroup's usage during it, which the host kernel charged.
	CgroupCPU bool
	// GuestMemory, when set, is the memory limit for the host and init to enforce (see
	// GuestHeadroom): the runtime set the cgroup's limit higher by the headroom. Only with
	// GuestPids.
	GuestMemory int64
	// TerminalRelay says init's terminals are objects of the sandbox's own kernel (gVisor), which
	// cannot be handed to the host: init relays them.
	TerminalRelay bool
	// KillGrace, when set, replaces killGrace: how long init has to kill a timed-out command
	// before the whole sandbox is. A sandbox kernel that shares its CPU limit with its processes
	// (gVisor) can take seconds to run init while a fork bomb fills it.
	KillGrace time.Duration
	// InitLayer says init holds the writable layer in its own mount namespace (it built the root
	// from Config): Layer and Snapshot read it through init's clone of it (guest.MsgLayer), the
	// layer laid out as guest.LayerLayout over Lowers (the overlay's lower directories, top
	// first). Otherwise Writable and Snapshot say how.
	InitLayer bool
	Lowers    []string
	// Snapshot, when set, saves the sandbox (driver.Snapshotter): its layer as a tar stream to w
	// and, when mem is not "" and the runtime can, its processes into mem. paused says the
	// sandbox's cgroup is frozen (Pause).
	Snapshot func(ctx context.Context, w io.Writer, mem string, paused bool) (memory bool, err error)
	// Control, when set, is where init dials its control socket — the runtime gives init the
	// path in guest.ControlEnv — instead of taking ctl as its descriptor (Start gets nil). Init
	// dials it again whenever it breaks, and a Snapshot with mem saves the sandbox's kernel: see
	// redial.go. Destroy closes it.
	Control *net.UnixListener
	// Restore says Start brings init back from the memory image in this directory (one that a
	// Snapshot with mem wrote): init is configured already, and its commands run on. With
	// Control, init dials again with its token; otherwise ctl is connected to it (a VM's link).
	Restore string
	// SavesMachine says Snapshot, given mem, saves the whole machine the sandbox is (a VM: its
	// memory, devices and disk) into mem: it is called between execs, as with Control.
	SavesMachine bool
	// Writable, when set, is the sandbox's writable layer as the host reads it (driver.Layerer);
	// nil: this level cannot read it (unless InitLayer).
	Writable *driver.Layer
	// Socket, when set, is where an adoptable sandbox's init listens for a new host (see Adopt),
	// recorded in the sandbox's HostFacts.
	Socket string
	// Teardown releases what the runtime and the level hold (runtime state, mounts); it runs in
	// Destroy after init was killed, before the cgroup is removed, and must be idempotent.
	Teardown func(ctx context.Context) error
	// Kernel, when set, reads what the sandbox's own kernel counts of it (a VM's guest kernel:
	// its cgroup's OOM kills and refused forks, memory and processes, and the writable disk):
	// the host's cgroup holds only the VMM, whose counters say nothing of the sandbox's
	// processes. Exec's limit events and Usage read them from it; CPU and network stay the
	// host's.
	Kernel func(ctx context.Context) (KernelStats, error)
	// Pause and Resume, when set, stop and restart the sandbox instead of freezing and thawing
	// its cgroup (a VM: its VMM stops the vCPUs and the guest's clocks, so that its processes are
	// not charged the time they spent stopped).
	Pause, Resume func(ctx context.Context) error
	// Gone, when set, runs once, last in Destroy. clean says init was reaped (or never started)
	// and the cgroup is gone, so that nothing runs with the sandbox's ids any more.
	Gone func(clean bool)
}

// KernelStats are the counters a sandbox's own kernel keeps of it (Launcher.Kernel).
type KernelStats struct {
	OOMKills, PidsHits            int64 // cumulative: processes its OOM killer ended, forks refused
	Pids, PidsLimit               int64
	MemoryBytes, MemoryPeakBytes  int64
	MemoryLimitBytes              int64
	DiskUsedBytes, DiskLimitBytes int64
	DiskFull                      bool
}

// Launch starts a sandbox whose init l.Start runs, and returns it ready for Exec. gw, when not
// nil, is the sandbox's network, which Start must have put init into. On error, everything is
// released (Destroy): l.Teardown, l.Gone and gw included.
func (rt *Runtime) Launch(ctx context.Context, id string, spec sandbox.Spec, gw *egress.Gateway, l Launcher) (*Sandbox, error) {
	setupErr := func(err error) error { return fmt.Errorf("sandbox %s: %w: %w", id, err, errdefs.ErrSetup) }
	cfg := l.Config
	if cfg == nil {
		cfg = &guest.Config{
			Hostname:  guest.Hostname,
			NoFile:    uint64(spec.Resources.MaxOpenFiles),
			DiskBytes: spec.Resources.DiskMB << 20,
			Container: true,
			HostNet:   gw != nil,
			GuestPids: l.GuestPids,
		}
		if spec.User != sandbox.UserRoot {
			cfg.UID, cfg.GID = sandbox.AgentUID, sandbox.AgentUID
		}
	}
	s := &Sandbox{id: id, rt: rt, spec: spec, gw: gw, l: &l, cg: l.Cgroup, uids: l.UIDs,
		waiters: map[string]chan *guest.Message{}, done: make(chan struct{}), exited: make(chan struct{}), rejoined: make(chan struct{})}
	var fed chan error // the Seed's feeder, once it runs
	fail := func(err error) (*Sandbox, error) {
		// Init is gone after Destroy, and the Seed's pipe with it: its feeder ends.
		driver.Discard(context.Background(), rt.log, s)
		return nil, setupErr(seeded(fed, err))
	}
	var initEnd *os.File
	if l.Control == nil {
		hostEnd, theirs, err := socketPair()
		if err != nil {
			return fail(err)
		}
		initEnd = theirs
		if s.ctl, err = newConn(hostEnd); err != nil {
			theirs.Close()
			return fail(err)
		}
	}
	if l.Control != nil && l.Restore != "" {
		token, err := os.ReadFile(filepath.Join(l.Restore, tokenFile))
		if err != nil {
			return fail(fmt.Errorf("memory image: %w", err))
		}
		s.token = string(token)
	} else if l.Control != nil {
		s.token = newToken()
		cfg.Token = s.token
	}
	t0 := time.Now()
	pid, err := l.Start(ctx, initEnd)
	if initEnd != nil {
		initEnd.Close() // init's now: its EOF is init's exit
	}
	if err != nil {
		return fail(err)
	}
	s.pid = pid
	// A pidfd: once init is reaped, signals fail instead of reaching whoever has its pid.
	if s.proc, err = os.FindProcess(s.pid); err != nil {
		return fail(err)
	}
	tStarted := time.Since(t0)
	if l.Wait != nil {
		go func() { l.Wait(); close(s.exited) }()
	} else {
		go waitExit(s.pid, s.exited)
	}
	if l.Control != nil {
		// A fresh init dials first thing, before anything else runs in the sandbox; a restored
		// one once its kernel runs again, with the token it was given when it was new.
		token := ""
		if l.Restore != "" {
			token = s.token
		}
		c, err := s.accept(ctx, token)
		if err != nil {
			return fail(err)
		}
		s.ctl = newUnixConn(c)
	}
	ready := make(chan *guest.Message, 1)
	s.waiters[""] = ready
	go s.readLoop()
	if l.Restore != "" {
		return s.restored(ctx, l, t0)
	}

	filter, err := rt.filter()
	if err != nil {
		return fail(err)
	}
	cfg.Seccomp = filter
	if fed, err = s.configure(cfg); err != nil {
		return fail(err)
	}
	var tPlaced time.Duration
	if l.NewCgroup != nil {
		if err := s.place(ready); err != nil {
			return fail(err)
		}
		tPlaced = time.Since(t0)
	} else if s.events, err = l.Cgroup.OpenEvents(); err != nil {
		return fail(err)
	}
	if err := s.ctl.send(&guest.Message{Kind: guest.MsgPlaced}); err != nil {
		return fail(fmt.Errorf("init is gone: %w", err))
	}
	initPhases, err := s.awaitReady(ctx, ready)
	if err != nil {
		return fail(err)
	}
	if err := seeded(fed, nil); err != nil {
		fed = nil // already waited for
		return fail(err)
	}
	if l.GuestMemory > 0 && l.GuestPids > 0 {
		s.watchGuestMemory(l.GuestMemory)
	}
	rt.log.Debug("sandbox ready", "sandbox", id, "pid", s.pid, "initStarted", tStarted, "cgroupPlaced", tPlaced, "ready", time.Since(t0), "initPhasesUs", initPhases)
	return s, nil
}

// configure sends init its configuration with the descriptors it names (Launcher.Files and the
// Seed's pipe). With a Seed it returns the channel its feeder reports on (see seeded).
func (s *Sandbox) configure(cfg *guest.Config) (fed chan error, err error) {
	var files []*os.File
	if s.l.Files != nil {
		if files, err = s.l.Files(s.pid); err != nil {
			return nil, err
		}
	}
	if s.l.Seed != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeAll(files)
			return nil, err
		}
		i := len(files)
		files, cfg.Root.Seed = append(files, pr), &i
		fed = make(chan error, 1)
		go func() { fed <- feed(pw, s.l.Seed) }()
		// If init is gone before it read the pipe, the sandbox's Destroy closes its end, and the
		// feeder stops.
	}
	err = s.ctl.send(&guest.Message{Kind: guest.MsgConfig, Config: cfg}, files...)
	closeAll(files)
	if err != nil {
		return fed, fmt.Errorf("send config: %w", err)
	}
	return fed, nil
}

// place makes the sandbox's cgroup (Launcher.NewCgroup) and moves init into it, while init builds
// its root. ready is where init's first answer arrives: should the move fail because init died of
// a setup error first, its own words say more than ESRCH.
func (s *Sandbox) place(ready <-chan *guest.Message) error {
	cg, err := s.l.NewCgroup()
	s.cg = cg
	if err != nil {
		return err
	}
	if s.events, err = cg.OpenEvents(); err != nil {
		return err
	}
	if err := cg.AddProc(s.pid); err != nil {
		select {
		case m := <-ready:
			if m != nil && m.Kind == guest.MsgError {
				return errors.New(m.Error)
			}
		case <-time.After(time.Second):
		}
		return err
	}
	return nil
}

// restored finishes a Launch whose init a memory image brought back: it is configured and locked
// down already, and its commands run on.
func (s *Sandbox) restored(ctx context.Context, l Launcher, t0 time.Time) (*Sandbox, error) {
	fail := func(err error) (*Sandbox, error) {
		driver.Discard(context.Background(), s.rt.log, s)
		return nil, fmt.Errorf("sandbox %s: %w: %w", s.id, err, errdefs.ErrSetup)
	}
	s.mu.Lock()
	delete(s.waiters, "")
	s.mu.Unlock()
	var err error
	if s.events, err = l.Cgroup.OpenEvents(); err != nil {
		return fail(err)
	}
	if l.GuestMemory > 0 && l.GuestPids > 0 {
		s.watchGuestMemory(l.GuestMemory)
	}
	s.created = time.Now()
	s.rt.log.Debug("sandbox restored", "sandbox", s.id, "pid", s.pid, "ready", time.Since(t0))
	return s, nil
}

// awaitReady waits for init's answer to its configuration, and returns the phases it reported.
func (s *Sandbox) awaitReady(ctx context.Context, ready chan *guest.Message) (map[string]int64, error) {
	var phases map[string]int64
	select {
	case m := <-ready:
		if m == nil {
			return nil, errors.New("init exited during setup")
		}
		if m.Kind != guest.MsgReady {
			return nil, errors.New(m.Error)
		}
		phases = m.Phases
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	delete(s.waiters, "")
	s.mu.Unlock()
	s.created = time.Now()
	return phases, nil
}

// watchExit closes exited when pid, which need not be this process's child, has exited. An error
// opening its pidfd is returned, and exited left open.
func watchExit(pid int, exited chan struct{}) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	go func() {
		defer close(exited)
		defer unix.Close(fd)
		for {
			_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
			if err != unix.EINTR {
				return
			}
		}
	}()
	return nil
}

// waitExit closes exited when pid, which need not be this process's child, has exited (at once
// if it cannot be watched).
func waitExit(pid int, exited chan struct{}) {
	if watchExit(pid, exited) != nil {
		close(exited)
	}
}

// rootPath is the sandbox's root as the host reaches it.
func (s *Sandbox) rootPath() string {
	if s.l.Root != "" {
		return s.l.Root
	}
	return fmt.Sprintf("/proc/%d/root", s.pid)
}

// layerPath is a directory on the sandbox's writable layer, as the host reaches it.
func (s *Sandbox) layerPath() string {
	if s.l.Layer != "" {
		return s.l.Layer
	}
	return fmt.Sprintf("/proc/%d/root/tmp", s.pid)
}

// hostID is the host uid owning files the sandbox's user uid creates.
func (s *Sandbox) hostID(uid int) int { return s.uids.HostID(uid) }
