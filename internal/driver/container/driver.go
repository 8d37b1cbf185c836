// Package container is the `container` isolation level: a sandbox is an OCI bundle run by gVisor's
// runsc (default; the sandbox gets a user-space kernel) or by runc. airlock assembles the root
// filesystem on the host (rootfs.go), writes the runtime spec (spec.go) and starts the runtime
// (runtime.go) with airlock's own init as the container's process, inside the network namespace
// airlock's network code made. From then on the sandbox is driven exactly like a process-level one
// (host.Runtime.Launch, airlock's init as every level runs it): the same control socket, execs,
// terminals, limits events, pause and files.
package container

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/rlimit"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Config is the container level's configuration; Settings.Config makes it from the file's section.
type Config struct {
	// Runtime is used when a spec names none: runsc (default) or runc.
	Runtime string
	// Runsc and Runc are the runtimes' binaries; empty means found in PATH.
	Runsc, Runc string
	// RunscPlatform is gVisor's platform: systrap (default), ptrace or kvm.
	RunscPlatform string
	// StateDir holds the bundles and the runtimes' own state.
	StateDir string
	// CgroupParent is the cgroup under which the runtimes make sandboxes' cgroups.
	CgroupParent string
	// InitPath is the airlock binary bound into every container as its init; it must be
	// statically linked (it runs on the image's libraries, or none). Empty: this executable.
	InitPath string
	// Network attaches sandboxes whose egress policy is not "none".
	Network *egress.Service
	// Images resolves `image:` to the layer directories of a pulled image (nil: images
	// unavailable).
	Images driver.Images
	// DebugLogs, when set, is a directory for runsc's debug logs.
	DebugLogs string
	// NoPreparedRestores turns off Prepare (spare.go): a sandbox's next restore is then made
	// only when it is asked for, and no idle gVisor sandbox waits for it.
	NoPreparedRestores bool
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Runtime: sandbox.RuntimeRunsc, RunscPlatform: "systrap", StateDir: "/var/lib/airlock/container",
		CgroupParent: "airlock-container"}
}

// killGrace is how long init has to kill a timed-out command before the sandbox is killed: gVisor
// runs init in its own, CPU-limited kernel, where a fork bomb at the process limit starves it for
// seconds (measured: 2–8 s at 1 vCPU); runc's init is a host process, as at the process level.
var killGrace = map[string]time.Duration{sandbox.RuntimeRunsc: 15 * time.Second}

// Driver is the container level.
type Driver struct {
	cfg      Config
	log      *slog.Logger
	rt       *host.Runtime // init's host side: seccomp filter, uid ranges, host template, Launch
	caps     driver.Capabilities
	cgroups  *cgroups.Layout
	runtimes map[string]*runtime
	owner    []byte // this process, as recorded in its bundles for Sweep (procfs.OwnerLine)

	privateMu sync.Mutex
	private   bool // the bundles directory is a private mount (ensurePrivate)

	sparesMu sync.Mutex
	spares   map[string]*spare // containers made ahead of a restore, by sandbox id (spare.go)
}

var _ driver.Driver = (*Driver)(nil)

// New probes the host once. It never fails: a host without a runtime yields a driver whose
// Capabilities say why. rt is the host side of airlock's init, which every container runs as its
// PID 1; the levels of one airlock process share it.
func New(cfg Config, rt *host.Runtime, log *slog.Logger) *Driver {
	if cfg.Runtime == "" {
		cfg.Runtime = sandbox.RuntimeRunsc
	}
	if cfg.RunscPlatform == "" {
		cfg.RunscPlatform = "systrap"
	}
	if cfg.InitPath == "" {
		cfg.InitPath, _ = os.Executable()
	}
	d := &Driver{cfg: cfg, log: log, rt: rt, runtimes: map[string]*runtime{}, spares: map[string]*spare{}}
	d.caps = d.probe()
	if owner, err := procfs.OwnerLine(); err != nil {
		d.caps.Available, d.caps.Reason = false, "cannot read this process's start time: "+err.Error()
	} else {
		d.owner = owner
	}
	return d
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return sandbox.LevelContainer }

// StateDir is where the level keeps its bundles and the runtimes' state; it mounts nothing
// anywhere else.
func (d *Driver) StateDir() string { return d.cfg.StateDir }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

func (d *Driver) probe() driver.Capabilities {
	c := driver.Capabilities{Level: sandbox.LevelContainer}
	check := func(name string, required, ok bool, detail string) {
		c.Checks = append(c.Checks, driver.Check{Name: name, OK: ok, Detail: detail, Required: required})
	}
	noInit := d.rt.Missing()
	check("init", true, len(noInit) == 0, map[bool]string{true: "airlock's init, seccomp filter and /etc template", false: strings.Join(noInit, "; ")}[len(noInit) == 0])
	layout, err := cgroups.Detect()
	if err == nil && len(layout.Missing()) == 0 {
		d.cgroups = layout
	}
	check("cgroups", true, d.cgroups != nil, map[bool]string{true: "the runtimes' cgroups are read for limit events, usage and pause", false: "no usable cgroup controllers"}[d.cgroups != nil])
	static, why := staticBinary(d.cfg.InitPath)
	check("init binary", true, static, why)
	fs, _ := os.ReadFile("/proc/filesystems")
	check("overlayfs", false, strings.Contains(string(fs), "\toverlay\n"), "stacks an image's layers under the writable layer")

	for _, name := range []string{sandbox.RuntimeRunsc, sandbox.RuntimeRunc} {
		rt := &runtime{name: name, root: filepath.Join(d.cfg.StateDir, name), platform: d.cfg.RunscPlatform, debugLog: d.cfg.DebugLogs}
		path := map[string]string{sandbox.RuntimeRunsc: d.cfg.Runsc, sandbox.RuntimeRunc: d.cfg.Runc}[name]
		if path == "" {
			path, _ = exec.LookPath(name)
		}
		fix := map[string]string{
			sandbox.RuntimeRunsc: "make deps (go install gvisor.dev/gvisor/runsc@" + RunscVersion + " with CGO_ENABLED=0), or apt-get install runsc",
			sandbox.RuntimeRunc:  "apt-get install runc",
		}[name]
		// No `--version` here: the probe runs at every `airlock run`, and starting two runtimes
		// to ask would cost more than a process-level sandbox does.
		if path == "" {
			check(name, false, false, name+" not found (fix: "+fix+")")
		} else if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
			check(name, false, false, path+" is not an executable file")
		} else {
			rt.path = path
			rt.version = "version not recorded"
			if v, err := os.ReadFile(path + ".version"); err == nil { // written by make deps
				rt.version = "pinned " + strings.TrimSpace(string(v))
			}
			if name == sandbox.RuntimeRunsc {
				if ok, why := staticBinary(path); !ok {
					rt.path = ""
					check(name, false, false, path+": "+why+" (gVisor re-executes itself inside an empty root; fix: "+fix+")")
					d.runtimes[name] = rt
					continue
				}
			}
			check(name, false, true, path+" ("+rt.version+")")
		}
		d.runtimes[name] = rt
	}
	var missing []string
	for _, ch := range c.Checks {
		if ch.Required && !ch.OK {
			missing = append(missing, ch.Name+": "+ch.Detail)
		}
	}
	def := d.runtimes[d.cfg.Runtime]
	if def == nil || def.path == "" {
		missing = append(missing, "the default runtime "+d.cfg.Runtime+" is not installed")
	}
	c.Available = len(missing) == 0
	if !c.Available {
		c.Reason = strings.Join(missing, "; ")
		c.Fix = "install the runtimes (make deps), run as root with cgroups, and use a statically linked airlock (CGO_ENABLED=0)"
	}
	for _, name := range []string{sandbox.RuntimeRunsc, sandbox.RuntimeRunc} {
		if rt := d.runtimes[name]; rt.path != "" {
			c.Features = append(c.Features, "runtime:"+name)
		}
	}
	c.Features = append(c.Features, "oci", "limits:cpu,memory,nofile,disk,timeout", "network:none", driver.FeatureSnapshotFilesystem)
	if d.runtimes[sandbox.RuntimeRunsc].path != "" {
		// gVisor's checkpoint saves the sandbox's kernel; runc's processes are the host's.
		c.Features = append(c.Features, driver.FeatureSnapshotMemory)
		if !d.cfg.NoPreparedRestores {
			c.Features = append(c.Features, driver.FeatureSnapshotPrepared)
		}
	}
	return c
}

// RunscVersion is the gVisor release `make deps` installs.
const RunscVersion = "v0.0.0-20260905035102-160fafc42237"

// staticBinary reports whether the ELF file at p needs no dynamic loader.
func staticBinary(p string) (bool, string) {
	f, err := elf.Open(p)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, p + " is dynamically linked"
		}
	}
	return true, p + " (statically linked)"
}

// runtime returns the runtime spec asks for, or says why it cannot be had.
func (d *Driver) runtime(spec sandbox.Spec) (*runtime, error) {
	name := spec.Runtime
	if name == "" {
		name = d.cfg.Runtime
	}
	rt := d.runtimes[name]
	if rt == nil {
		return nil, errdefs.Invalid("runtime", "unknown runtime %q (runsc or runc)", name)
	}
	if rt.path == "" {
		for _, ch := range d.caps.Checks {
			if ch.Name == name {
				return nil, errdefs.Unavailable("runtime", "%s", ch.Detail)
			}
		}
		return nil, errdefs.Unavailable("runtime", "%s is not installed", name)
	}
	return rt, nil
}

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	return d.create(ctx, id, spec, nil, "")
}

// create makes a sandbox whose writable layer starts as seed's (a snapshot's tar stream), or
// empty when seed is nil; with image (runsc only), its kernel is restored from the memory image
// in that directory.
func (d *Driver) create(ctx context.Context, id string, spec sandbox.Spec, seed io.Reader, image string) (driver.Sandbox, error) {
	c, err := d.build(ctx, id, spec, seed, image != "")
	if err != nil {
		return nil, err
	}
	return d.launch(ctx, id, c.spec, c, image, func(ctx context.Context, ctl *os.File) (int, error) {
		return c.rt.start(ctx, id, c.b.dir, ctl, c.gw, image)
	})
}

// built is a container that build made and that its runtime has not started yet: its bundle, its
// control socket, its network and cgroup, and how to undo all of it.
type built struct {
	spec     sandbox.Spec // with its image's environment
	rt       *runtime
	b        *bundle
	lowers   []string
	uids     uidalloc.Range // the host ids the runtime's user namespace maps ids 0..65535 to
	control  *net.UnixListener
	gw       *egress.Gateway
	cg       *cgroups.Cgroup
	pids     int64 // the host pids limit (runc)
	teardown func(ctx context.Context) error
}

// destroy undoes what build did, for a container that was never launched (a launched one's
// sandbox does it in Destroy).
func (c *built) destroy(ctx context.Context) error {
	if c.control != nil {
		c.control.Close()
	}
	err := c.teardown(ctx)
	if c.gw != nil {
		err = errors.Join(err, c.gw.Close())
	}
	return err
}

// discard destroys container c of sandbox id, which is not to be used: its setup failed (and
// returns that error) or it was made ahead for nothing. What destroy leaves is logged.
func (d *Driver) discard(ctx context.Context, id string, c *built) {
	if err := c.destroy(ctx); err != nil {
		d.log.Warn("an unused container is not all cleaned up", "sandbox", id, "err", err)
	}
}

// build assembles container id's bundle — root filesystem, runtime spec, control socket,
// network — with its writable layer seeded from seed when not nil. restore says its runtime
// will restore a memory image into it.
func (d *Driver) build(ctx context.Context, id string, spec sandbox.Spec, seed io.Reader, restore bool) (*built, error) {
	if !d.caps.Available {
		return nil, fmt.Errorf("container level: %s: %w", d.caps.Reason, errdefs.ErrUnavailable)
	}
	rt, err := d.runtime(spec)
	if err != nil {
		return nil, err
	}
	if restore && rt.name != sandbox.RuntimeRunsc {
		return nil, errdefs.Invalid("runtime", "only runsc restores memory images")
	}
	networked := spec.Network.EgressPolicy != sandbox.EgressNone
	if networked && d.cfg.Network == nil {
		return nil, errdefs.Unavailable("network.egressPolicy", "%q needs airlock's network service, which this process has not configured", spec.Network.EgressPolicy)
	}
	if spec.RootDir != "" {
		return nil, errdefs.Unavailable("template", "the container level runs OCI images (image); a directory root (a template, --rootfs) is for the process level")
	}
	if rt.name == sandbox.RuntimeRunc {
		// runc sets the spec's rlimits from inside the user namespace; gVisor's kernel keeps
		// its own.
		if err := rlimit.EnsureNoFile(uint64(spec.Resources.MaxOpenFiles)); err != nil {
			return nil, err
		}
	}
	lowers, spec, release, err := driver.ImageLayers(ctx, d.cfg.Images, spec)
	if err != nil {
		return nil, err
	}
	b := newBundle(filepath.Join(d.cfg.StateDir, "bundles", id), rt.name == sandbox.RuntimeRunsc)
	// The range stays recorded while the bundle, which holds files of its ids, exists.
	uids, err := d.rt.AllocateUIDs(sandbox.LevelContainer, id, b.dir)
	if err != nil {
		release()
		return nil, err
	}
	c := &built{spec: spec, rt: rt, b: b, lowers: lowers, uids: uids}
	c.teardown = func(ctx context.Context) error {
		err := rt.delete(ctx, id)
		if uerr := mountinfo.UnmountAll(b.dir); uerr != nil && err == nil {
			err = uerr
		}
		if cerr := removeCgroups(d.cfg.CgroupParent, id); cerr != nil && err == nil {
			err = cerr
		}
		os.RemoveAll(b.dir)
		release()
		if err == nil {
			// The container and its cgroups are gone: nothing runs with the range's ids.
			d.rt.ReleaseUIDs(sandbox.LevelContainer, id, uids)
		}
		return err
	}
	fail := func(err error) (*built, error) {
		d.discard(context.Background(), id, c)
		return nil, err
	}
	if err := d.ensurePrivate(); err != nil {
		return fail(fmt.Errorf("container state directory: %w: %w", err, errdefs.ErrSetup))
	}
	if err := os.MkdirAll(b.dir, 0o711); err != nil {
		return fail(fmt.Errorf("bundle: %w: %w", err, errdefs.ErrSetup))
	}
	if err := os.WriteFile(filepath.Join(b.dir, "owner"), d.owner, 0o600); err != nil {
		return fail(fmt.Errorf("bundle: %w: %w", err, errdefs.ErrSetup))
	}
	resolver := hosttemplate.Resolver(spec, d.cfg.Network)
	t, err := d.rt.Template().Template(resolver)
	if err != nil {
		return fail(err)
	}
	if seed != nil {
		b.seed = func(layer string) error {
			_, err := snapshot.ExtractLayer(seed, layer, d.extractOptions(uids))
			return err
		}
	}
	if err := b.assemble(spec, t, lowers, hosttemplate.NameFiles(resolver), d.cfg.InitPath, uids.HostID); err != nil {
		if errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, snapshot.ErrCorrupt) {
			return fail(err)
		}
		// The cause as text: whatever its kind (a full disk, say), the sandbox's setup failed.
		return fail(fmt.Errorf("root filesystem: %v: %w", err, errdefs.ErrSetup)) //nolint:errorlint // see above
	}
	// runc's sandboxes are the host kernel's processes, counted by the host's pids cgroup;
	// gVisor's are its own, counted in its kernel (host.Launcher.GuestPids).
	if rt.name == sandbox.RuntimeRunc {
		c.pids = spec.Resources.MaxProcesses + guest.InitTasks
	}
	if err := writeSpec(b.dir, ociSpec(rt, id, d.cfg.CgroupParent, spec, b, networked, c.pids, uids)); err != nil {
		return fail(fmt.Errorf("runtime spec: %w: %w", err, errdefs.ErrSetup))
	}
	if b.control != "" {
		if c.control, err = listenControl(b, uids.HostID(guest.InitUID)); err != nil {
			return fail(fmt.Errorf("control socket: %w: %w", err, errdefs.ErrSetup))
		}
	}
	if networked {
		if c.gw, err = d.cfg.Network.Attach(id, spec.Network, spec.Resources.NetworkMbps); err != nil {
			return fail(err)
		}
	}
	c.cg = d.cgroups.Open(d.cfg.CgroupParent, id)
	return c, nil
}

// extractOptions are how a snapshot's layer is extracted into a container whose ids are mapped to
// uids: the layer's owners are sandbox ids, whatever range the snapshotted sandbox had.
func (d *Driver) extractOptions(uids uidalloc.Range) snapshot.ExtractOptions {
	return snapshot.ExtractOptions{Layout: LayerLayout, HostID: uids.HostID, HostOwned: true}
}

// launch hands container c to the process level, which runs start to have the runtime start it
// (restoring the memory image in directory image, when not "") and from then on drives the
// sandbox; a failed launch undoes c.
func (d *Driver) launch(ctx context.Context, id string, spec sandbox.Spec, c *built, image string, start func(context.Context, *os.File) (int, error)) (driver.Sandbox, error) {
	var guestPids, guestMemory int64
	if c.rt.name == sandbox.RuntimeRunsc {
		guestPids = spec.Resources.MaxProcesses + guest.InitTasks
		guestMemory = spec.Resources.MemoryMB << 20
	}
	rt, b, cg := c.rt, c.b, c.cg
	s, err := d.rt.Launch(ctx, id, spec, c.gw, host.Launcher{
		Start:     start,
		Control:   c.control,
		Restore:   image,
		Cgroup:    cg,
		PidsLimit: c.pids,
		GuestPids: guestPids,
		// gVisor's memory is charged to its sentry: the runtime's limit has headroom, and
		// airlock ends the largest process at the sandbox's limit.
		GuestMemory: guestMemory,
		KillGrace:   killGrace[rt.name],
		// gVisor's terminals are its own: init relays them.
		TerminalRelay: rt.name == sandbox.RuntimeRunsc,
		Root:          b.rootfs,
		Layer:         filepath.Join(b.layer, "shm"),
		UIDs:          c.uids,
		CgroupCPU:     rt.name == sandbox.RuntimeRunsc,
		Teardown:      c.teardown,
		Writable:      hostLayer(b, c.lowers),
		Snapshot: func(ctx context.Context, w io.Writer, mem string, paused bool) (bool, error) {
			return d.snapshot(ctx, rt, id, b, c.uids, cg, w, mem, paused)
		},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ensurePrivate makes the bundles directory a mount of its own with private propagation, once:
// the many mounts of sandboxes' roots then never propagate into other mount namespaces.
func (d *Driver) ensurePrivate() error {
	d.privateMu.Lock()
	defer d.privateMu.Unlock()
	if d.private {
		return nil
	}
	dir := filepath.Join(d.cfg.StateDir, "bundles")
	if err := mkdirTraversable(dir); err != nil {
		return err
	}
	if !slices.Contains(mountinfo.Under(dir), dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
			return err
		}
	}
	d.private = true
	return nil
}

// mkdirTraversable makes dir and its missing parents with mode 0711: runc's user-namespace root
// must be able to pass through every directory above a sandbox's root (but list none of them).
func mkdirTraversable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := mkdirTraversable(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !os.IsExist(err) {
		return err
	}
	return os.Chmod(dir, 0o711)
}
