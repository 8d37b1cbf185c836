// Package process is airlock's own isolation level: a sandbox made of Linux namespaces (user, pid,
// mount, net, uts, ipc, cgroup), a size-capped writable layer under a read-only root, cgroup
// limits, rlimits, Landlock, no capabilities, no_new_privs and a seccomp allowlist.
//
// It runs on the host, in the airlock process. The driver starts the airlock binary again as the
// sandbox's init (internal/guest/pid1), in fresh namespaces it makes, and drives it through the
// host side of airlock's init (internal/guest/host), which its sandboxes are: init builds the root
// filesystem from a plan the driver made (plan.go), locks itself down and then starts the commands
// it is sent. The driver also owns what the other levels that run init share with it (Runtime).
package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/rlimit"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Config is the process level's configuration; Settings.Config makes it from the file's section.
type Config struct {
	// CgroupParent is the cgroup (in every hierarchy) under which sandboxes' cgroups are made.
	CgroupParent string
	// UIDBase and UIDRanges are the pool of host uids (and gids) that sandboxes' ids are mapped to:
	// UIDRanges ranges of 65536 ids from the first multiple of 65536 at or above UIDBase (0:
	// uidalloc.DefaultRanges). Every live sandbox, of any level, has a range of its own, disjoint
	// from every other airlock's on the host (host.Runtime). No sandbox id maps to host root.
	UIDBase   uint32
	UIDRanges int
	// UIDDir holds the host-wide records of the uid allocator; empty: uidalloc.DefaultDir, which
	// every airlock on a host must share (tests of the allocator alone use another).
	UIDDir string
	// Instance names this airlock in those records; empty: uidalloc.InstanceOf(StateDir).
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

// DefaultConfig returns the defaults: cgroups under "airlock", ids from uidalloc.DefaultBase.
func DefaultConfig() Config {
	return Config{CgroupParent: "airlock", UIDBase: uidalloc.DefaultBase, InitPath: "/proc/self/exe", StateDir: "/var/lib/airlock/process"}
}

// Driver is the process isolation level.
type Driver struct {
	cfg         Config
	log         *slog.Logger
	caps        driver.Capabilities
	rt          *host.Runtime   // init's host side: seccomp filter, uid ranges, host template
	cgroups     *cgroups.Layout // nil when unavailable
	landlockABI int

	// orphanedAt is when the previous driver on the state dir was last alive (alive.go); zero
	// when it stopped cleanly or never ran. Set in New.
	orphanedAt time.Time
	stop       chan struct{}  // closed by Close: ends the heartbeat
	stopOnce   sync.Once      // guards closing stop
	beats      sync.WaitGroup // the heartbeat
}

var (
	_ driver.Driver  = (*Driver)(nil)
	_ driver.Sweeper = (*Driver)(nil)
)

// New probes the host once and returns the driver. It never fails: a host that cannot run the
// level yields a driver whose Capabilities say why, and whose Create returns ErrUnavailable.
func New(cfg Config, log *slog.Logger) *Driver {
	if cfg.InitPath == "" {
		cfg.InitPath = "/proc/self/exe"
	}
	d := &Driver{cfg: cfg, log: log, stop: make(chan struct{})}
	if cfg.OrphanGrace > 0 {
		d.heartbeat(d.stop)
	}
	d.rt = host.NewRuntime(host.Config{UIDBase: cfg.UIDBase, UIDRanges: cfg.UIDRanges, UIDDir: cfg.UIDDir,
		Instance: cfg.Instance, StateDir: cfg.StateDir, HostPaths: cfg.HostPaths}, log)
	d.caps = d.probe()
	return d
}

// Runtime is the host side of airlock's init as this airlock process runs it, which the other
// levels that run init share (the levels package hands it to the container level): the seccomp
// filter, the host uid ranges of every level's sandboxes, the host template.
func (d *Driver) Runtime() *host.Runtime { return d.rt }

// Sweep removes what killed airlock processes left behind (see SweepOrphans) and logs it. Callers
// run it off the hot path: the one-shot runner while its command runs, the daemon at start.
func (d *Driver) Sweep(ctx context.Context) {
	if swept := d.SweepOrphans(ctx); len(swept) > 0 {
		d.log.Info("removed orphaned sandbox cgroups", "cgroups", swept)
	}
	if swept := d.sweepSockets(ctx, orphanAge); len(swept) > 0 {
		d.log.Info("removed the init sockets of gone sandboxes", "sandboxes", swept)
	}
	if uids := d.rt.UIDs(); uids != nil {
		if freed := uids.Sweep(); len(freed) > 0 {
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
	lowers, spec, release, err := driver.ImageLayers(ctx, d.cfg.Images, spec)
	if err != nil {
		return nil, err
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
	uids, err := d.rt.AllocateUIDs(sandbox.LevelProcess, id, "")
	if err != nil {
		if gw != nil {
			gw.Close()
		}
		release()
		return nil, err
	}
	// From here on the sandbox's Destroy, should the launch fail, releases the network, the
	// range (once init is reaped and the cgroup gone) and the image.
	l := d.launcher(id, spec, uids, cfg.Root.Lowers, release)
	l.Config, l.Seed = cfg, seed
	l.Files = func(pid int) ([]*os.File, error) { return openSources(cfg, pid) }
	l.NewCgroup = func() (*cgroups.Cgroup, error) { return d.newCgroup(id, spec) }
	var cmd *exec.Cmd
	l.Start = func(ctx context.Context, ctl *os.File) (int, error) {
		var err error
		cmd, err = d.startInit(id, cfg, ctl, uids, gw)
		if err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	}
	// Init's exit status adds nothing: what it failed at, it told on the control socket.
	l.Wait = func() { _ = cmd.Wait() }
	return d.rt.Launch(ctx, id, spec, gw, l)
}

// launcher is how the process level runs the init of sandbox id, whose ids are mapped to uids:
// it has init build the root over lowers and hold the writable layer; the sandbox's Destroy frees
// uids (once nothing runs with them), its adoption socket and, when not nil, release (an image's
// layers). create adds how init starts; Adopt finds it running.
func (d *Driver) launcher(id string, spec sandbox.Spec, uids uidalloc.Range, lowers []string, release func()) host.Launcher {
	l := host.Launcher{
		PidsLimit: spec.Resources.MaxProcesses + guest.InitTasks,
		UIDs:      uids,
		InitLayer: true,
		Lowers:    lowers,
	}
	if d.cfg.OrphanGrace > 0 {
		l.Socket = d.adoptSocket(id)
	}
	l.Gone = func(clean bool) {
		if clean {
			d.rt.ReleaseUIDs(sandbox.LevelProcess, id, uids)
		}
		if d.cfg.OrphanGrace > 0 {
			os.Remove(d.adoptSocket(id))
		}
		if release != nil {
			release()
		}
	}
	return l
}

// startInit starts the airlock binary as sandbox id's init in new namespaces — user (its ids
// mapped to uids), mount, PID, UTS, IPC and network (or gw's, made and owned by the host) — with
// ctl as its control socket and, for an adoptable sandbox, the socket a new driver connects to.
func (d *Driver) startInit(id string, cfg *guest.Config, ctl *os.File, uids uidalloc.Range, gw *egress.Gateway) (*exec.Cmd, error) {
	extra := []*os.File{ctl}
	if d.cfg.OrphanGrace > 0 {
		ln, err := d.listenAdopt(id)
		if err != nil {
			return nil, err
		}
		defer ln.Close() // init's copy is what it listens on
		extra = append(extra, ln)
		cfg.OrphanGraceMs = d.cfg.OrphanGrace.Milliseconds()
	}
	cmd := &exec.Cmd{
		Path:       d.cfg.InitPath,
		Args:       []string{guest.Arg0},
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
	if d.log.Enabled(context.Background(), slog.LevelDebug) {
		cmd.Env = []string{"GOMAXPROCS=1"}
		cmd.Stderr = os.Stderr
	}
	// Pdeathsig fires when the thread that started the child exits; keep it alive while starting.
	runtime.LockOSThread()
	var err error
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
		return nil, fmt.Errorf("start init: %w", err)
	}
	return cmd, nil
}

// newCgroup makes sandbox id's cgroup with spec's limits. The pids limit leaves init its
// threads (guest.InitTasks).
func (d *Driver) newCgroup(id string, spec sandbox.Spec) (*cgroups.Cgroup, error) {
	cg, err := d.cgroups.New(d.cfg.CgroupParent, id)
	if err != nil {
		return nil, err
	}
	res := cgroups.Resources{CPU: float64(spec.Resources.CPU), MemoryBytes: spec.Resources.MemoryMB << 20, Pids: spec.Resources.MaxProcesses + guest.InitTasks}
	if err := cg.Set(res); err != nil {
		return cg, fmt.Errorf("cgroup limits: %w", err)
	}
	return cg, nil
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
func openSources(cfg *guest.Config, initPid int) (_ []*os.File, err error) {
	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	clone := func(p string, ro bool, idmapPid int) (int, error) {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
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
				return 0, fmt.Errorf("user namespace of init: %w", err)
			}
			defer unix.Close(ns)
			attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
			attr.Userns_fd = uint64(ns)
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			unix.Close(fd)
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
	if len(files) > guest.MaxFds {
		return nil, fmt.Errorf("%d mounts: at most %d: %w", len(files), guest.MaxFds, errdefs.ErrInvalidArgument)
	}
	return files, nil
}
