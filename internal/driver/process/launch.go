package process

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
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Launcher lets another level run airlock's init inside isolation it built itself — the container
// level's OCI runtimes (runc, gVisor's runsc). Init then only locks down and serves execs over the
// same control socket, so every level that launches it behaves the same from Exec on: streams,
// terminals, signals, timeouts, per-exec usage.
type Launcher struct {
	// Start starts the airlock binary, with argv[0] "airlock-init", as the sandbox's PID 1 with
	// ctl as its descriptor 3, its root filesystem, host name and limits in place, and returns
	// its host pid (for gVisor: the sandbox's, whose death ends every process inside).
	Start func(ctx context.Context, ctl *os.File) (pid int, err error)
	// Cgroup is the cgroup the runtime put the sandbox in, with its limits set.
	Cgroup *cgroups.Cgroup
	// PidsLimit is the pids limit the kernel enforces on Cgroup, for Usage.
	PidsLimit int64
	// GuestPids, when set, is the limit for init to enforce in the sandbox's own kernel instead
	// (gVisor, whose processes the host's pids cgroup cannot count; see guestCgroup).
	GuestPids int64
	// Root is the sandbox's root filesystem as the host reaches it (files API); Layer a path on
	// its writable layer (disk usage and the disk-full event).
	Root, Layer string
	// UIDs is the host uid range the runtime maps the sandbox's ids to (AllocateUIDs); the level
	// frees it in Teardown.
	UIDs uidalloc.Range
	// CgroupCPU says the runtime is the sandbox's kernel (gVisor), whose accounting of a command's
	// CPU time also counts time the host throttled it: an exec's CPU time is then capped by the
	// cgroup's usage during it, which the host kernel charged.
	CgroupCPU bool
	// GuestMemory, when set, is the memory limit for the driver and init to enforce (see
	// GuestHeadroom): the runtime set Cgroup's limit higher by the headroom. Only with GuestPids.
	GuestMemory int64
	// TerminalRelay says init's terminals are objects of the sandbox's own kernel (gVisor), which
	// cannot be handed to the host: init relays them (see relay).
	TerminalRelay bool
	// KillGrace, when set, replaces killGrace: how long init has to kill a timed-out command
	// before the whole sandbox is. A sandbox kernel that shares its CPU limit with its processes
	// (gVisor) can take seconds to run init while a fork bomb fills it.
	KillGrace time.Duration
	// Snapshot, when set, saves the sandbox (driver.Snapshotter): its layer as a tar stream to w
	// and, when mem is not "" and the runtime can, its processes into mem. paused says the
	// sandbox's cgroup is frozen (Pause).
	Snapshot func(ctx context.Context, w io.Writer, mem string, paused bool) (memory bool, err error)
	// Control, when set, is where init dials its control socket — the runtime gives init the
	// path in controlEnv — instead of taking ctl as its descriptor 3 (Start gets nil). Init dials
	// it again whenever it breaks, and a Snapshot with mem saves the sandbox's kernel: see
	// redial.go. Destroy closes it.
	Control *net.UnixListener
	// Restore, with Control, says Start brings init back from the memory image in this directory
	// (one that a Snapshot with mem wrote): init is configured already, and its commands run on.
	Restore string
	// Writable, when set, is the sandbox's writable layer as the host reads it (driver.Layerer);
	// nil: this level cannot read it.
	Writable *driver.Layer
	// Teardown releases what the runtime and the level hold (runtime state, mounts); it runs in
	// Destroy after init was killed, and must be idempotent.
	Teardown func(ctx context.Context) error
}

// Launch starts a sandbox whose init l.Start runs, and returns it ready for Exec. gw, when not
// nil, is the sandbox's network, which Start must have put init into. On error, everything is
// released, l.Teardown and gw included.
func (d *Driver) Launch(ctx context.Context, id string, spec sandbox.Spec, gw *egress.Gateway, l Launcher) (*Sandbox, error) {
	setupErr := func(err error) error { return fmt.Errorf("sandbox %s: %w: %w", id, err, errdefs.ErrSetup) }
	cfg := &guest.Config{
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
	s := &Sandbox{id: id, d: d, spec: spec, gw: gw, ext: &l, cg: l.Cgroup, uids: l.UIDs,
		waiters: map[string]chan *guest.Message{}, done: make(chan struct{}), exited: make(chan struct{}), rejoined: make(chan struct{})}
	fail := func(err error) (*Sandbox, error) {
		s.Destroy(context.Background())
		return nil, setupErr(err)
	}
	var initEnd *os.File
	if l.Control == nil {
		driverEnd, theirs, err := socketPair()
		if err != nil {
			return fail(err)
		}
		initEnd = theirs
		if s.ctl, err = newConn(driverEnd); err != nil {
			theirs.Close()
			return fail(err)
		}
	} else if l.Restore != "" {
		token, err := os.ReadFile(filepath.Join(l.Restore, tokenFile))
		if err != nil {
			return fail(fmt.Errorf("memory image: %w", err))
		}
		s.token = string(token)
	} else {
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
	if s.proc, err = os.FindProcess(s.pid); err != nil {
		return fail(err)
	}
	tStarted := time.Since(t0)
	go waitExit(s.pid, s.exited)
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

	<-d.filterDone
	if d.filterErr != nil {
		return fail(d.filterErr)
	}
	cfg.Seccomp = d.filter
	if err := s.ctl.send(&guest.Message{Kind: guest.MsgConfig, Config: cfg}); err != nil {
		return fail(fmt.Errorf("send config: %w", err))
	}
	if s.events, err = l.Cgroup.OpenEvents(); err != nil {
		return fail(err)
	}
	if err := s.ctl.send(&guest.Message{Kind: guest.MsgPlaced}); err != nil {
		return fail(fmt.Errorf("init is gone: %w", err))
	}
	if err := s.awaitReady(ctx, ready); err != nil {
		return fail(err)
	}
	if l.GuestMemory > 0 && l.GuestPids > 0 {
		s.watchGuestMemory(l.GuestMemory)
	}
	d.log.Debug("sandbox ready", "sandbox", id, "pid", s.pid, "initStarted", tStarted, "ready", time.Since(t0))
	return s, nil
}

// restored finishes a Launch whose init a memory image brought back: it is configured and locked
// down already, and its commands run on.
func (s *Sandbox) restored(ctx context.Context, l Launcher, t0 time.Time) (*Sandbox, error) {
	fail := func(err error) (*Sandbox, error) {
		s.Destroy(context.Background())
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
	s.d.log.Debug("sandbox restored", "sandbox", s.id, "pid", s.pid, "ready", time.Since(t0))
	return s, nil
}

// awaitReady waits for init's answer to its configuration.
func (s *Sandbox) awaitReady(ctx context.Context, ready chan *guest.Message) error {
	select {
	case m := <-ready:
		if m == nil {
			return errors.New("init exited during setup")
		}
		if m.Kind != guest.MsgReady {
			return errors.New(m.Error)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	delete(s.waiters, "")
	s.mu.Unlock()
	s.created = time.Now()
	return nil
}

// waitExit closes exited when pid, which need not be this process's child, has exited.
func waitExit(pid int, exited chan struct{}) {
	defer close(exited)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			return
		}
	}
}

// rootPath is the sandbox's root as the host reaches it.
func (s *Sandbox) rootPath() string {
	if s.ext != nil && s.ext.Root != "" {
		return s.ext.Root
	}
	return fmt.Sprintf("/proc/%d/root", s.pid)
}

// layerPath is a directory on the sandbox's writable layer, as the host reaches it.
func (s *Sandbox) layerPath() string {
	if s.ext != nil && s.ext.Layer != "" {
		return s.ext.Layer
	}
	return fmt.Sprintf("/proc/%d/root/tmp", s.pid)
}

// hostID is the host uid owning files the sandbox's user uid creates.
func (s *Sandbox) hostID(uid int) int { return s.uids.HostID(uid) }

// Template returns the host template for spec (its /etc names spec's resolver).
func (d *Driver) Template(spec sandbox.Spec) (hosttemplate.Template, error) {
	return d.host.Template(d.resolver(spec))
}

// NameFiles are the files that make a root filesystem of an image resolve names by spec's network
// policy: /etc/hostname, /etc/hosts and /etc/resolv.conf, path → content.
func (d *Driver) NameFiles(spec sandbox.Spec) map[string]string {
	return hosttemplate.NameFiles(d.resolver(spec))
}
