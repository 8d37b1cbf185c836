// Package process is airlock's own isolation level: a sandbox made of Linux namespaces (user, pid,
// mount, net, uts, ipc, cgroup), a size-capped writable layer under a read-only root, cgroup
// limits, rlimits, Landlock, no capabilities, no_new_privs and a seccomp allowlist.
//
// The driver (this package's Driver and Sandbox, in the airlock process) starts the airlock binary
// again as the sandbox's init (init.go), in fresh namespaces, and talks to it over a socket
// (proto.go). Init builds the root filesystem (mounts.go) from a plan the driver made (plan.go),
// locks itself down and then starts the commands the driver sends it.
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/rlimit"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/seccomp"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Config is the process level's configuration; Settings.Config makes it from the file's section.
type Config struct {
	// CgroupParent is the cgroup (in every hierarchy) under which sandboxes' cgroups are made.
	CgroupParent string
	// UIDBase and UIDRanges are the pool of host uids (and gids) that sandboxes' ids are mapped to:
	// UIDRanges ranges of 65536 ids from the first multiple of 65536 at or above UIDBase (0:
	// DefaultUIDRanges). Every live sandbox, of this level or the container level, has a range of
	// its own, disjoint from every other airlock's on the host (uids.go). No sandbox id maps to
	// host root.
	UIDBase   uint32
	UIDRanges int
	// UIDDir holds the host-wide records of the uid allocator; empty: uidalloc.DefaultDir, which
	// every airlock on a host must share (tests of the allocator alone use another).
	UIDDir string
	// Instance names this airlock in those records; empty: InstanceOf(StateDir).
	Instance string
	// InitPath is the binary started as the sandbox's init; default /proc/self/exe.
	InitPath string
	// StateDir holds the level's caches (the generated /etc of the host template) and the
	// sockets through which a restarted daemon adopts its sandboxes.
	StateDir string
	// OrphanGrace, when positive, makes sandboxes adoptable: when the airlock process that made
	// one dies, its init keeps it this long for a new one to connect (Adopt), then ends it. Zero
	// (the one-shot runner) ends a sandbox as soon as its maker is gone.
	OrphanGrace time.Duration
	// Images gives sandboxes made from an OCI image their layers (nil: images unavailable).
	Images driver.Images
	// Network attaches sandboxes whose egress policy is not "none" (nil: only "none" is
	// available). Its sandboxes are in a namespace owned by the host, with airlock's firewall.
	Network *egress.Service
	// HostPaths are host paths (absolute, clean) the host template also binds read-only at the
	// same place, after hiding /usr/local: the operator's (config hostTemplate.paths), e.g. a
	// tool under /usr/local or /opt.
	HostPaths []string
}

// DefaultConfig returns the defaults: cgroups under "airlock", ids from 2000000000.
func DefaultConfig() Config {
	return Config{CgroupParent: "airlock", UIDBase: 2_000_000_000, InitPath: "/proc/self/exe", StateDir: "/var/lib/airlock/process"}
}

// initTasks is what init itself may use of the pids limit: the Go runtime's threads. The limit
// the kernel enforces is MaxProcesses plus this, so that the agent gets what it asked for.
const initTasks = 8

// Driver is the process isolation level.
type Driver struct {
	cfg         Config
	log         *slog.Logger
	caps        driver.Capabilities
	cgroups     *cgroups.Layout // nil when unavailable
	host        hostTemplate
	landlockABI int

	filterDone chan struct{} // closed when filter is compiled
	filter     []byte        // the seccomp program every sandbox gets, 8 bytes per instruction
	filterErr  error

	etcMu   sync.Mutex        // guards etcDirs
	etcDirs map[string]string // the host template's /etc by name server, built once per process

	uids     *uidalloc.Pool // the host uid ranges of sandboxes; nil when unusable (uidsErr)
	uidsErr  error
	instance string

	usedMu sync.Mutex              // guards used
	used   map[string]map[int]bool // the ranges this process allocated, by level (for leak checks)

	// orphanedAt is when the previous driver on the state dir was last alive (alive.go); zero
	// when it stopped cleanly or never ran. Set in New.
	orphanedAt time.Time
	stop       chan struct{}  // closed by Close: ends the heartbeat
	stopOnce   sync.Once      // guards closing stop
	beats      sync.WaitGroup // the heartbeat
}

var _ driver.Driver = (*Driver)(nil)

// New probes the host once and returns the driver. It never fails: a host that cannot run the
// level yields a driver whose Capabilities say why, and whose Create returns ErrUnavailable.
func New(cfg Config, log *slog.Logger) *Driver {
	if cfg.InitPath == "" {
		cfg.InitPath = "/proc/self/exe"
	}
	d := &Driver{cfg: cfg, log: log, filterDone: make(chan struct{}), used: map[string]map[int]bool{}, stop: make(chan struct{})}
	if cfg.OrphanGrace > 0 {
		d.heartbeat(d.stop)
	}
	d.uids, d.instance, d.uidsErr = newUIDPool(cfg)
	// Compiling the filter overlaps with whatever the caller does next (for a one-shot run:
	// starting the first sandbox's init).
	go func() {
		defer close(d.filterDone)
		prog, err := seccomp.Default().Compile()
		if err != nil {
			d.filterErr = err
			return
		}
		d.filter = unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(prog)*8)
	}()
	d.caps = d.probe()
	return d
}

// Sweep removes what killed airlock processes left behind (see SweepOrphans) and logs it. Callers
// run it off the hot path: the one-shot runner while its command runs, the daemon at start.
func (d *Driver) Sweep(ctx context.Context) {
	if swept := d.SweepOrphans(ctx); len(swept) > 0 {
		d.log.Info("removed orphaned sandbox cgroups", "cgroups", swept)
	}
	if swept := d.sweepSockets(ctx, orphanAge); len(swept) > 0 {
		d.log.Info("removed the init sockets of gone sandboxes", "sandboxes", swept)
	}
	if d.uids != nil {
		if freed := d.uids.Sweep(); len(freed) > 0 {
			d.log.Info("freed the uid ranges of gone sandboxes", "ranges", freed)
		}
	}
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return sandbox.LevelProcess }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	return d.create(ctx, id, spec, nil)
}

// create makes a sandbox whose writable layer starts as seed's (a snapshot's tar stream), or
// empty when seed is nil.
func (d *Driver) create(ctx context.Context, id string, spec sandbox.Spec, seed io.Reader) (driver.Sandbox, error) {
	if !d.caps.Available {
		return nil, fmt.Errorf("process level: %s: %w", d.caps.Reason, errdefs.ErrUnavailable)
	}
	networked := spec.Network.EgressPolicy != sandbox.EgressNone
	if networked && d.cfg.Network == nil {
		return nil, errdefs.Unavailable("network.egressPolicy", "%q needs airlock's network service, which this process has not configured", spec.Network.EgressPolicy)
	}
	if err := rlimit.EnsureNoFile(uint64(spec.Resources.MaxOpenFiles)); err != nil {
		return nil, err
	}
	var lowers []string
	release := func() {}
	if spec.Image != "" {
		if d.cfg.Images == nil {
			return nil, errdefs.Unavailable("image", "no image store is configured")
		}
		dirs, env, rel, err := d.cfg.Images.Layers(ctx, spec.Image)
		if err != nil {
			return nil, err
		}
		release = rel
		for i := len(dirs) - 1; i >= 0; i-- { // overlayfs takes the top layer first
			lowers = append(lowers, dirs[i])
		}
		spec.Environment = driver.WithImageEnv(spec.Environment, env)
	}
	cfg, err := d.plan(id, spec, lowers)
	if err != nil {
		release()
		return nil, err
	}
	var gw *egress.Gateway
	if networked {
		if gw, err = d.cfg.Network.Attach(id, spec.Network, spec.Resources.NetworkMbps); err != nil {
			release()
			return nil, err
		}
		cfg.HostNet = true
	}
	uids, err := d.AllocateUIDs(sandbox.LevelProcess, id, "")
	if err != nil {
		if gw != nil {
			gw.Close()
		}
		release()
		return nil, err
	}
	s, err := d.start(ctx, id, spec, cfg, gw, seed, uids)
	if err != nil {
		if gw != nil {
			gw.Close()
		}
		release()
		return nil, err
	}
	s.release = release
	s.lowers = cfg.Root.Lowers
	return s, nil
}

// start launches init in new namespaces and sends it the plan. While init boots and builds the
// root filesystem, the driver makes the cgroup and moves init into it (on cgroup v1 that move waits
// for an RCU grace period, so the overlap matters); only then may init lock down and report ready.
//
// uids is the sandbox's host uid range; until the sandbox exists, start frees it on failure, and
// from then on the sandbox's Destroy does.
func (d *Driver) start(ctx context.Context, id string, spec sandbox.Spec, cfg *initConfig, gw *egress.Gateway, seed io.Reader, uids uidalloc.Range) (*Sandbox, error) {
	setupErr := func(err error) error { return fmt.Errorf("sandbox %s: %w: %w", id, err, errdefs.ErrSetup) }
	early := func(err error) (*Sandbox, error) {
		d.ReleaseUIDs(sandbox.LevelProcess, id, uids)
		return nil, setupErr(err)
	}
	t0 := time.Now()
	driverEnd, initEnd, err := socketPair()
	if err != nil {
		return early(err)
	}
	defer initEnd.Close()
	ctl, err := newConn(driverEnd)
	if err != nil {
		return early(err)
	}
	extra := []*os.File{initEnd}
	if d.cfg.OrphanGrace > 0 {
		ln, err := d.listenAdopt(id)
		if err != nil {
			ctl.close()
			return early(err)
		}
		defer ln.Close()
		extra = append(extra, ln)
		cfg.OrphanGraceMs = d.cfg.OrphanGrace.Milliseconds()
	}
	cmd := &exec.Cmd{
		Path:       d.cfg.InitPath,
		Args:       []string{initArg0},
		Env:        []string{"GOMAXPROCS=1", "GOTRACEBACK=none"},
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
				unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uids.HostID(0), Size: uidalloc.Size}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uids.HostID(0), Size: uidalloc.Size}},
			GidMappingsEnableSetgroups: true,
			// Become the namespace's root (the range's first host uid) before exec, or exec drops every
			// capability: host uid 0 itself is not mapped into the namespace.
			Credential: &syscall.Credential{Uid: 0, Gid: 0},
			Pdeathsig:  unix.SIGKILL,
		},
	}
	if d.log.Enabled(ctx, slog.LevelDebug) {
		cmd.Env = []string{"GOMAXPROCS=1"}
		cmd.Stderr = os.Stderr
	}
	// Pdeathsig fires when the thread that started the child exits; keep it alive while starting.
	runtime.LockOSThread()
	if gw != nil {
		// Born in the sandbox's network namespace, made and owned by the host: the sandbox's
		// root has no power over its interfaces or firewall.
		cmd.SysProcAttr.Cloneflags &^= unix.CLONE_NEWNET
		err = gw.Link.Run(cmd.Start)
	} else {
		err = cmd.Start()
	}
	runtime.UnlockOSThread()
	if err != nil {
		ctl.close()
		if d.cfg.OrphanGrace > 0 {
			os.Remove(d.adoptSocket(id))
		}
		return early(fmt.Errorf("start init: %w", err))
	}
	tStarted := time.Since(t0)
	s := &Sandbox{id: id, d: d, spec: spec, proc: cmd.Process, ctl: ctl, pid: cmd.Process.Pid, gw: gw, uids: uids,
		waiters: map[string]chan *message{}, done: make(chan struct{}), exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	ready := make(chan *message, 1)
	s.waiters[""] = ready
	go s.readLoop()
	fail := func(err error) (*Sandbox, error) {
		s.Destroy(context.Background())
		return nil, setupErr(err)
	}

	<-d.filterDone
	if d.filterErr != nil {
		return fail(d.filterErr)
	}
	cfg.Seccomp = d.filter
	srcs, err := openSources(cfg, s.pid)
	if err != nil {
		return fail(err)
	}
	var fed chan error // the restore's feeder, when seeded
	if seed != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeAll(srcs)
			return fail(err)
		}
		i := len(srcs)
		srcs, cfg.Root.Seed = append(srcs, pr), &i
		fed = make(chan error, 1)
		go func() { fed <- feed(pw, seed) }()
		fail = func(err error) (*Sandbox, error) {
			s.Destroy(context.Background()) // init is gone, and the pipe with it
			return nil, setupErr(seeded(fed, err))
		}
	}
	err = ctl.send(&message{Kind: msgConfig, Config: cfg}, srcs...)
	closeAll(srcs)
	if err != nil {
		return fail(fmt.Errorf("send config: %w", err))
	}
	cg, err := d.cgroups.New(d.cfg.CgroupParent, id)
	if err != nil {
		return fail(err)
	}
	s.cg = cg
	res := cgroups.Resources{CPU: float64(spec.Resources.CPU), MemoryBytes: spec.Resources.MemoryMB << 20, Pids: spec.Resources.MaxProcesses + initTasks}
	if err := cg.Set(res); err != nil {
		return fail(fmt.Errorf("cgroup limits: %w", err))
	}
	if s.events, err = cg.OpenEvents(); err != nil {
		return fail(err)
	}
	if err := cg.AddProc(s.pid); err != nil {
		// Init may have died of a setup error first; its own words say more than ESRCH.
		select {
		case m := <-ready:
			if m != nil && m.Kind == msgError {
				return fail(errors.New(m.Error))
			}
		case <-time.After(time.Second):
		}
		return fail(err)
	}
	tPlaced := time.Since(t0)
	if err := ctl.send(&message{Kind: msgPlaced}); err != nil {
		return fail(fmt.Errorf("init is gone: %w", err))
	}
	if err := s.awaitReady(ctx, ready); err != nil {
		return fail(err)
	}
	if fed != nil {
		if err := seeded(fed, nil); err != nil {
			fed = nil // already waited for
			return fail(err)
		}
	}
	d.log.Debug("sandbox ready", "sandbox", id, "pid", s.pid, "initStarted", tStarted, "cgroupPlaced", tPlaced, "ready", time.Since(t0))
	return s, nil
}

// openSources turns every mount source of cfg into a detached mount tree (open_tree with
// OPEN_TREE_CLONE), made as host root and already read-only where asked, and records each one's
// index in cfg. Init attaches them with move_mount, so neither the host path's directory
// permissions nor the kernel's locks on copied mounts stand in the way.
//
// A rootfs directory is also idmapped through init's user namespace: its files, owned by host
// root on disk, belong to the sandbox's root inside, so the copy-on-write layer above can change
// them. It is read-only, so nothing the sandbox does reaches the disk as host root. Binds keep host
// ownership: a read-write bind must never let the sandbox create host-root files.
func openSources(cfg *initConfig, initPid int) ([]*os.File, error) {
	var files []*os.File
	clone := func(p string, ro bool, idmapPid int) (int, error) {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			closeAll(files)
			return 0, fmt.Errorf("clone mount %s: %w", p, err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if ro {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if idmapPid > 0 {
			ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", idmapPid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				unix.Close(fd)
				closeAll(files)
				return 0, fmt.Errorf("user namespace of init: %w", err)
			}
			defer unix.Close(ns)
			attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
			attr.Userns_fd = uint64(ns)
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			unix.Close(fd)
			closeAll(files)
			return 0, fmt.Errorf("set attributes of mount %s: %w", p, err)
		}
		files = append(files, os.NewFile(uintptr(fd), p))
		return len(files) - 1, nil
	}
	r := &cfg.Root
	r.LowerFds = nil
	for _, l := range r.Lowers {
		i, err := clone(l, true, initPid)
		if err != nil {
			return nil, err
		}
		r.LowerFds = append(r.LowerFds, i)
	}
	for j := range r.Binds {
		if r.Binds[j].Empty {
			continue
		}
		i, err := clone(r.Binds[j].Src, r.Binds[j].ReadOnly, 0)
		if err != nil {
			return nil, err
		}
		r.Binds[j].Fd = i
	}
	if len(files) > maxFds {
		closeAll(files)
		return nil, fmt.Errorf("%d mounts: at most %d: %w", len(files), maxFds, errdefs.ErrInvalidArgument)
	}
	return files, nil
}
