package microvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Sizes of what a VM has beside its sandbox's memory.
const (
	// guestOverheadMB is guest RAM above memoryMb: the guest kernel, the agent and init, the
	// initramfs (the airlock binary). The sandbox's processes are held to memoryMb by a cgroup
	// of the guest kernel.
	guestOverheadMB = 160
	// vmmOverheadMB is what the VMM's host cgroup allows above guest RAM: QEMU itself and, under
	// TCG, its translation cache (tb-size 64 MiB).
	vmmOverheadMB = 192
	// vmmTasks bounds the VMM's threads (vCPUs, I/O, RCU).
	vmmTasks = 256
)

// vmInst is what the level holds of one VM, from its start (or adoption: adopt.go) to its
// teardown, and what host.Launcher's calls act on.
type vmInst struct {
	d       *Driver
	id      string
	dir     string
	v       VM
	link    *vmlink.Host
	ram     *os.File // guest RAM, kept for saves
	disk    string
	images  []Image
	shape   *memManifest // the machine's shape, for a memory snapshot's manifest
	machine bool         // QEMU can save it: no 9p share
	ks      *kernelStats
	uids    uidalloc.Range
	cg      *cgroups.Cgroup
	pids    int64
	plan    *guest.Config
	tail    string // the console's end, read before the directory goes: what a failed boot said
	// lowers are the host directories the root's image was made from (an image's layers, an
	// operator's template), top first: the guest's scans of the layer are compared over them
	// (Layer). release lets the image's layers be collected again, at teardown.
	lowers  []string
	release func()
}

// console is the VM's console log.
func (i *vmInst) console() string { return filepath.Join(i.dir, "console.log") }

// teardown releases what the level holds of the VM (host.Launcher.Teardown).
func (i *vmInst) teardown(context.Context) error {
	i.tail = consoleTail(i.console())
	if i.link != nil {
		i.link.Close()
	}
	if i.v != nil {
		_ = i.v.Kill() // killed already by the host side, unless the launch failed before
		if q, ok := i.v.(*qemuVM); ok && q.cmd == nil {
			q.qmp.close() // an adopted VM's monitor: nobody waits for it
		}
	}
	if i.ram != nil {
		i.ram.Close()
	}
	if i.release != nil {
		i.release()
	}
	return os.RemoveAll(i.dir)
}

// launcher is how host.Runtime drives the VM's init, but for how it starts.
func (i *vmInst) launcher() host.Launcher {
	d := i.d
	sockets := ""
	if d.cfg.OrphanGrace > 0 {
		sockets = ControlSocket(i.dir)
	}
	return host.Launcher{
		Config:        i.plan,
		Cgroup:        i.cg,
		PidsLimit:     i.pids,
		TerminalRelay: true,
		// Under TCG a fork bomb can starve the guest's init for seconds.
		KillGrace: 15 * time.Second,
		Root:      i.dir,
		Layer:     i.dir,
		UIDs:      i.uids,
		Socket:    sockets,
		Kernel:    i.ks.read,
		Pause: func(ctx context.Context) error {
			if err := i.v.Pause(ctx); err != nil {
				return err
			}
			i.ks.paused.Store(true)
			return nil
		},
		Resume: func(ctx context.Context) error {
			if err := i.v.Resume(ctx); err != nil {
				return err
			}
			i.ks.paused.Store(false)
			return nil
		},
		SavesMachine: i.machine,
		Snapshot: func(ctx context.Context, w io.Writer, mem string, paused bool) (bool, error) {
			// The agent reads the layer in the guest, with the sandbox frozen: a paused VM
			// runs again for that, its sandbox's processes frozen, and is paused after.
			if paused {
				if err := i.v.Resume(ctx); err != nil {
					return false, err
				}
				defer func() { _ = i.v.Pause(context.WithoutCancel(ctx)) }()
			}
			if err := i.link.CallStream(ctx, "layer", w); err != nil || mem == "" || !i.machine {
				return false, err
			}
			if err := saveMachine(ctx, d.log, i.v.(*qemuVM), i.link, i.ram, i.disk, i.images, *i.shape, mem); err != nil {
				return false, err
			}
			return true, d.roots.refer(i.images, mem)
		},
		// The guest kernel counts a command's CPU time by its own clock, which does not see
		// the host throttling the VMM: an exec's CPU time is capped by the VMM cgroup's use.
		CgroupCPU: true,
		Teardown:  i.teardown,
		Gone: func(clean bool) {
			if clean {
				d.rt.ReleaseUIDs(sandbox.LevelMicroVM, i.id, i.uids)
			}
		},
	}
}

// shapeOf is the machine a VM of spec is, on images (a memory snapshot's manifest without its
// files), and its vCPUs and guest RAM.
func (d *Driver) shapeOf(spec sandbox.Spec, accel string, images []Image) *memManifest {
	vcpus := int(spec.Resources.CPU)
	if float64(vcpus) < float64(spec.Resources.CPU) {
		vcpus++
	}
	shape := &memManifest{Format: memFormat, Accel: accel, Kernel: d.kernel.VmlinuxSha256, VCPUs: max(vcpus, 1),
		MemoryMB: spec.Resources.MemoryMB + guestOverheadMB, DiskMB: spec.Resources.DiskMB, Network: spec.Network.EgressPolicy != sandbox.EgressNone}
	for _, img := range images {
		if img.Serial == vm.SerialEtc {
			shape.Images = append(shape.Images, memImage{Serial: img.Serial, File: fileEtc})
		} else {
			shape.Images = append(shape.Images, memImage{Serial: img.Serial, Cache: filepath.Base(img.Path)})
		}
	}
	return shape
}

// start makes sandbox id's VM and has host.Runtime.Launch drive its init.
// seed, when set, is a snapshot's layer for init to extract; from, when set, a memory snapshot the
// VM is restored from instead of booted.
func (d *Driver) start(ctx context.Context, id string, spec sandbox.Spec, bs *bootSetup, seed io.Reader, from *memRestore) (driver.Sandbox, error) {
	tBegin := time.Now()
	dir := filepath.Join(d.cfg.StateDir, "vms", id)
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return nil, fmt.Errorf("microvm state: %w: %w", err, errdefs.ErrSetup)
	}
	// Host root's, traversable: the VMM opens its disk in it and writes nothing there.
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, fmt.Errorf("microvm state: %w: %w", err, errdefs.ErrSetup)
	}
	// Which airlock process made the VM, for Sweep.
	writeOwner(dir)
	uids, err := d.rt.AllocateUIDs(sandbox.LevelMicroVM, id, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// The VMM runs as the first id of the sandbox's own range.
	vmmUID := uids.HostID(0)
	in := &vmInst{d: d, id: id, dir: dir, uids: uids, disk: filepath.Join(dir, "disk.img"), ks: &kernelStats{paused: &atomic.Bool{}}}
	// Until Launch owns them, a failure undoes this by hand.
	undo := func(err error) (driver.Sandbox, error) {
		_ = in.teardown(context.Background())
		if in.cg != nil {
			_ = in.cg.Destroy(context.Background())
		}
		closeImages(in.images)
		d.rt.ReleaseUIDs(sandbox.LevelMicroVM, id, uids)
		return nil, err
	}
	setupErr := func(what string, err error) error {
		return fmt.Errorf("sandbox %s: %s: %w: %w", id, what, err, errdefs.ErrSetup)
	}
	lowers, spec, release, err := driver.ImageLayers(ctx, d.cfg.Images, spec)
	if err != nil {
		return undo(err)
	}
	in.release = release // held to the end: a scan of the layer is compared over them
	vp, err := d.plan(spec, lowers)
	if err != nil {
		return undo(err)
	}
	in.lowers = vp.Lowers
	if from != nil {
		// A cached image collected since is made again here, or the restore refused.
		if in.images, err = d.restoredImages(ctx, from, vp, dir); err == nil {
			in.images, err = lockImages(in.images, nil)
		}
	} else if in.images, err = d.images(ctx, vp); err == nil {
		in.images, err = lockImages(in.images, func() ([]Image, error) { return d.images(ctx, vp) })
	}
	if err != nil {
		return undo(setupErr("root filesystem", err))
	}
	share, writable := vp.Share, vp.Writable
	in.plan = vp.Config
	if from != nil {
		err = from.disk(in.disk, vmmUID)
		from.tDisk = time.Since(tBegin)
	} else {
		err = makeDisk(in.disk, spec.Resources.DiskMB, vmmUID, vmmUID)
	}
	if err != nil {
		return undo(setupErr("writable disk", err))
	}
	if in.cg, err = d.cgroups.New(d.cfg.CgroupParent, id); err != nil {
		return undo(setupErr("cgroup", err))
	}
	guestMB := spec.Resources.MemoryMB + guestOverheadMB
	// The VM boots at full speed (under TCG a boot at half a CPU takes many seconds); the CPU
	// quota, the sandbox's, applies once it is ready.
	limits := cgroups.Resources{CPU: float64(spec.Resources.CPU), MemoryBytes: (guestMB + vmmOverheadMB) << 20, Pids: vmmTasks}
	boot := limits
	boot.CPU = 0
	if err := in.cg.Set(boot); err != nil {
		return undo(setupErr("cgroup limits", err))
	}
	con, err := os.OpenFile(in.console(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return undo(setupErr("console", err))
	}
	defer con.Close()
	// The host's end of the serial port: a socket pair, or, for a VM that may outlive this
	// process, a connection to the port's socket (dialled once the VMM listens).
	var hostEnd, vmEnd *os.File
	if d.cfg.OrphanGrace == 0 {
		if hostEnd, vmEnd, err = streamPair(); err != nil {
			return undo(setupErr("serial port", err))
		}
		defer vmEnd.Close()
	}
	networked := spec.Network.EgressPolicy != sandbox.EgressNone
	var gw *egress.Gateway
	if networked {
		if gw, err = d.cfg.Network.Attach(id, spec.Network, spec.Resources.NetworkMbps); err != nil {
			return undo(err)
		}
		// From here the sandbox's Destroy closes it; before Launch, undo does.
		undoGW := undo
		undo = func(err error) (driver.Sandbox, error) {
			_ = gw.Close()
			return undoGW(err)
		}
		in.plan.HostNet = true
	}
	in.pids = spec.Resources.MaxProcesses + guest.InitTasks
	in.shape = d.shapeOf(spec, bs.accel, in.images)
	if from != nil {
		if err := from.fits(in.shape); err != nil {
			return undo(err)
		}
	}
	in.machine = len(share) == 0 && len(writable) == 0 // QEMU saves no VM with a 9p share mounted
	if in.ram, err = newRAM(guestMB); err != nil {
		return undo(setupErr("guest RAM", err))
	}
	var fill io.ReadCloser
	if from != nil {
		if fill, err = from.ram(); err != nil {
			return undo(err)
		}
		defer fill.Close()
	}
	cmd := cmdline(bs.accel, spec.Resources.MemoryMB<<20, in.pids, len(share) > 0, len(writable) > 0, networked)
	if d.cfg.OrphanGrace > 0 {
		cmd += fmt.Sprintf(" %s=%d", vm.ParamGrace, d.cfg.OrphanGrace.Milliseconds())
	}
	cfg := VMConfig{
		Kernel: d.kernel.vmlinux, Initrd: bs.initrd, Accel: bs.accel,
		VCPUs: in.shape.VCPUs, MemoryMB: guestMB, Cmdline: cmd,
		Disk: in.disk, Share: share, Writable: writable, Control: vmEnd, Console: con,
		Images: in.images, Incoming: from != nil, RAM: in.ram,
		Jail: JailSpec{UID: vmmUID, GID: vmmUID, Cgroup: in.cg, Dir: dir},
	}
	if d.cfg.OrphanGrace > 0 {
		cfg.Sockets = dir
	}
	t0 := time.Now()
	tPrepared := t0.Sub(tBegin) // root images, disk, cgroup, network, guest RAM
	if gw != nil {
		cfg.Network = gw.Link.Run
	}
	if fill != nil {
		cfg.RAMFill = fill
	}
	l := in.launcher()
	l.Seed, l.Restore = seed, from.dirOrNone()
	l.Wait = func() { _ = in.v.Wait() }
	l.Start = func(ctx context.Context, ctl *os.File) (int, error) {
		v, err := d.vmm.Start(ctx, cfg)
		closeImages(in.images) // the VMM holds them (and their locks) now
		if err != nil {
			if hostEnd != nil {
				hostEnd.Close()
			}
			return 0, err
		}
		in.v = v
		if hostEnd == nil {
			if hostEnd, err = dialUnix(ControlSocket(dir)); err != nil {
				return 0, fmt.Errorf("the VM's serial port: %w", err)
			}
		}
		if from != nil {
			from.tStarted = time.Since(tBegin)
			// The VM stays paused until its state is loaded and every digest matched.
			if err := from.load(ctx, v.(*qemuVM)); err != nil {
				hostEnd.Close()
				return 0, err
			}
			from.tLoaded = time.Since(tBegin)
			if in.link, err = vmlink.ResumeHost(hostEnd, ctl); err != nil {
				return 0, err
			}
			if err := v.Resume(ctx); err != nil {
				return 0, err
			}
		} else if in.link, err = vmlink.NewHost(hostEnd, ctl); err != nil {
			return 0, err
		}
		in.ks.link = in.link
		go d.logBoot(id, in.link, t0)
		return v.Pid(), nil
	}
	s, err := d.rt.Launch(ctx, id, spec, gw, l)
	closeImages(in.images)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, in.tail)
	}
	if err := in.cg.Set(limits); err != nil {
		driver.Discard(context.Background(), d.log, s)
		return nil, setupErr("cgroup CPU limit", err)
	}
	if from != nil {
		d.log.Debug("VM restored", "sandbox", id, "disk", from.tDisk, "vmmStarted", from.tStarted, "stateLoaded", from.tLoaded, "took", time.Since(tBegin))
	} else {
		d.log.Debug("VM booted", "sandbox", id, "prepared", tPrepared, "took", time.Since(tBegin))
	}
	return &Sandbox{hs: s, in: in}, nil
}

// writeOwner records this airlock process as the one that holds the VM in dir (Sweep).
func writeOwner(dir string) {
	if owner, err := procfs.OwnerLine(); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "owner"), owner, 0o600)
	}
}

// kernelStats reads the guest kernel's counters of the sandbox (host.Launcher.Kernel); a paused
// VM's are the last ones read.
type kernelStats struct {
	link   *vmlink.Host
	paused *atomic.Bool

	mu   sync.Mutex // guards last
	last host.KernelStats
}

func (k *kernelStats) read(ctx context.Context) (host.KernelStats, error) {
	if k.paused.Load() {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.last, nil
	}
	if k.link == nil {
		return host.KernelStats{}, errors.New("no link to the guest")
	}
	var st vmlink.Stats
	if err := k.link.Call(ctx, "stats", nil, &st); err != nil {
		return host.KernelStats{}, err
	}
	out := host.KernelStats{OOMKills: st.OOMKills, PidsHits: st.PidsHits, Pids: st.Pids, PidsLimit: st.PidsMax,
		MemoryBytes: st.MemoryBytes, MemoryPeakBytes: st.MemoryPeak, MemoryLimitBytes: st.MemoryMax,
		DiskUsedBytes: st.DiskUsed, DiskLimitBytes: st.DiskTotal, DiskFull: st.DiskFull}
	k.mu.Lock()
	k.last = out
	k.mu.Unlock()
	return out, nil
}

// logBoot logs the guest agent's hello.
func (d *Driver) logBoot(id string, link *vmlink.Host, t0 time.Time) {
	select {
	case h := <-link.Hello():
		d.log.Debug("guest up", "sandbox", id, "kernel", h.Kernel, "guestUptimeMs", h.BootMs, "phases", h.Phases, "sinceStart", time.Since(t0), "err", h.Error)
	case <-link.Done():
	}
}

// consoleTail is the end of a VM's console, for an error: what the guest said before it failed.
func consoleTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "; the guest's console: " + string(bytes.TrimSpace(b))
}

// Sandbox is a microvm sandbox: the host side of its init, without what a VM cannot offer (the
// host does not reach the guest's files: no FileRooter; the agent serves the files API,
// driver.FileServer, and scans the layer, driver.Layerer).
type Sandbox struct {
	hs *host.Sandbox
	in *vmInst
}

var (
	_ driver.Sandbox     = (*Sandbox)(nil)
	_ driver.Snapshotter = (*Sandbox)(nil)
	_ driver.Watcher     = (*Sandbox)(nil)
	_ driver.Pauser      = (*Sandbox)(nil)
	_ driver.Statser     = (*Sandbox)(nil)
	_ driver.Claimer     = (*Sandbox)(nil)
	_ driver.FileServer  = (*Sandbox)(nil)
	_ driver.Layerer     = (*Sandbox)(nil)
)

// ID implements driver.Sandbox.
func (s *Sandbox) ID() string { return s.hs.ID() }

// Exec implements driver.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return s.hs.Exec(ctx, req)
}

// Destroy implements driver.Sandbox: the VMM is killed, its files and cgroup removed.
func (s *Sandbox) Destroy(ctx context.Context) error { return s.hs.Destroy(ctx) }

// Done implements driver.Watcher: closed when the VM is gone (or its init).
func (s *Sandbox) Done() <-chan struct{} { return s.hs.Done() }

// Pause implements driver.Pauser: the VM's vCPUs and clocks are stopped (QMP stop), so its
// processes use no CPU and are not charged the pause.
func (s *Sandbox) Pause(ctx context.Context) error { return s.hs.Pause(ctx) }

// Resume implements driver.Pauser.
func (s *Sandbox) Resume(ctx context.Context) error { return s.hs.Resume(ctx) }

// Usage implements driver.Statser: CPU is the VMM's; memory, processes and disk the guest
// kernel's counts of the sandbox.
func (s *Sandbox) Usage(ctx context.Context) (driver.Usage, error) { return s.hs.Usage(ctx) }

// Snapshot implements driver.Snapshotter: the writable layer, as a tar stream the guest agent
// writes with the sandbox's cgroup frozen, and with mem the whole VM, saved just after
// (memory.go), between execs.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer, mem string) (bool, error) {
	return s.hs.Snapshot(ctx, w, mem)
}

// SavesMemory implements driver.Snapshotter: a VM without 9p shares (the operator's volumes),
// which QEMU refuses to save.
func (s *Sandbox) SavesMemory() bool { return s.in.machine }

// Claim implements driver.Claimer.
func (s *Sandbox) Claim(ctx context.Context, spec sandbox.Spec) error { return s.hs.Claim(ctx, spec) }

// Layer implements driver.Layerer. The writable layer is a disk of the guest's own kernel, which
// the host never mounts (an ext4 image a guest wrote is hostile input to the host's kernel): the
// guest agent scans it where it is mounted (vmlink.LayerScan) and the host reads the tree within
// fsdiff's bounds, refusing one no scan makes; the scans are compared on the host over the
// directories the root's image was made from (none for a VM adopted from another airlock
// process, whose lease of them is gone: an image file copied up then counts as created). A
// paused VM cannot answer: its scans fail with ErrConflict until it resumes.
func (s *Sandbox) Layer(context.Context) (driver.Layer, error) {
	return driver.Layer{Layout: guest.LayerLayout, Lowers: s.in.lowers, Scanner: s.in.scanLayer}, nil
}

// scanLayer has the guest agent scan the writable layer (driver.Layer.Scanner).
func (i *vmInst) scanLayer(ctx context.Context) (fsdiff.Tree, error) {
	if i.ks.paused.Load() {
		return fsdiff.Tree{}, fmt.Errorf("sandbox %s is paused, and its VM scans its layer: resume it first: %w", i.id, errdefs.ErrConflict)
	}
	return i.link.ScanLayer(ctx)
}

// VMMPid is the VMM's pid on the host.
func (s *Sandbox) VMMPid() int { return s.hs.InitPid() }
