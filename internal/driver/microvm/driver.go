// Package microvm is the `microvm` isolation level: every sandbox is a virtual machine of its
// own, with its own kernel (built from Debian's pinned source with what a guest uses built in:
// scripts/microvm/build-kernel.sh), run by QEMU's
// microvm machine under KVM or, where KVM cannot run it, QEMU's software CPU (TCG). The guest's
// PID 1 is the airlock binary (internal/guest/vm), which starts airlock's own init, and the host
// drives that init over the VM's serial port (internal/guest/vmlink) exactly as on the other
// levels (host.Runtime.Launch): execs, streams, terminals, timeouts, limits events, pause.
//
// The VM's root is the host template: the host's system directories come in read-only through
// a 9p share assembled for the VM alone, inside the jailed VMM's own mount namespace, and init
// builds the root from them as at the process level, on a writable layer that is an ext4 disk of
// diskMb (writes past it get ENOSPC). Memory, processes and open files are limited inside the
// guest (its RAM, a cgroup of its kernel, init's rlimit); CPU and the VMM's own memory by a host
// cgroup around the VMM, which runs as the sandbox's own unprivileged uid (vmm.go, jail.go).
package microvm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Config is the microvm level's configuration; Settings.Config makes it from the file's section.
type Config struct {
	// QEMU is the VMM's binary; empty means qemu-system-x86_64 in PATH.
	QEMU string
	// KernelDir holds vmlinux and manifest.json (make deps).
	KernelDir string
	// Accelerator is AccelAuto (a trial boot decides), AccelKVM or AccelTCG.
	Accelerator string
	// CgroupParent is where each VMM's cgroup is made.
	CgroupParent string
	// StateDir holds the VMs' files (disks, consoles), the initramfs and the accelerator verdict.
	StateDir string
	// ImageDir is the host-wide cache of the guests' read-only root images (rootimage.go),
	// shared by every airlock on the host: the images are named by their content.
	ImageDir string
	// InitPath is the airlock binary re-executed on the host as each VMM's jail and the root
	// images' builder. Empty: this executable.
	InitPath string
	// GuestPath is the binary every guest runs as its PID 1 and its sandbox's init
	// (guestbin.go); it must be statically linked: the initramfs has no libraries. Empty:
	// airlock-guest beside InitPath when it is of the same build, else InitPath.
	GuestPath string
	// Network attaches sandboxes whose egress policy is not "none" (nil: only "none").
	Network *egress.Service
	// Images gives sandboxes made from an OCI image their layers (nil: images unavailable).
	Images driver.Images
	// OrphanGrace, when positive, makes VMs adoptable (adopt.go): a VM outlives the airlock
	// process that made it by this much, for the next one to take it over (Adopt); 0: the VM
	// dies with its airlock.
	OrphanGrace time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{KernelDir: "/usr/local/lib/airlock/microvm", Accelerator: AccelAuto,
		CgroupParent: "airlock-microvm", StateDir: StateDirOf("default"), ImageDir: "/var/cache/airlock/microvm",
		OrphanGrace: time.Minute}
}

// Driver is the microvm level.
type Driver struct {
	cfg     Config
	log     *slog.Logger
	rt      *host.Runtime // init's host side: seccomp filter, uid ranges, host template, Launch
	capsMu  sync.Mutex    // guards caps: the first VM's setup fills in the accelerator
	caps    driver.Capabilities
	cgroups *cgroups.Layout
	vmm     *qemu
	kernel  kernelInfo
	guest   string // the guest binary (guestbin.go)

	bootMu sync.Mutex // guards boot: the initramfs and the accelerator, decided at the first VM
	boot   *bootSetup

	roots *rootImages // the guests' read-only roots
}

var (
	_ driver.Driver   = (*Driver)(nil)
	_ driver.Restorer = (*Driver)(nil)
)

// kernelInfo is the installed guest kernel, from its manifest.
type kernelInfo struct {
	Package       string `json:"package"`
	Version       string `json:"version"`
	Release       string `json:"release"`
	VmlinuxSha256 string `json:"vmlinuxSha256"`
	vmlinux       string
}

// New probes the host once. It never fails: a host without QEMU or the guest kernel yields a
// driver whose Capabilities say why. rt is the host side of airlock's init, shared by the levels
// of one airlock process.
func New(cfg Config, rt *host.Runtime, log *slog.Logger) *Driver {
	def := DefaultConfig()
	if cfg.KernelDir == "" {
		cfg.KernelDir = def.KernelDir
	}
	if cfg.Accelerator == "" {
		cfg.Accelerator = AccelAuto
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = def.CgroupParent
	}
	if cfg.StateDir == "" {
		cfg.StateDir = def.StateDir
	}
	if cfg.ImageDir == "" {
		cfg.ImageDir = def.ImageDir
	}
	if cfg.InitPath == "" {
		cfg.InitPath, _ = os.Executable()
	}
	d := &Driver{cfg: cfg, log: log, rt: rt}
	d.caps = d.probe()
	return d
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return sandbox.LevelMicroVM }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities {
	d.capsMu.Lock()
	defer d.capsMu.Unlock()
	c := d.caps
	c.Checks = slices.Clone(c.Checks)
	c.Features = slices.Clone(c.Features)
	return c
}

// ImageDir is where the level keeps the guests' root images.
func (d *Driver) ImageDir() string { return d.cfg.ImageDir }

// StateDir is where the level keeps its VMs' files.
func (d *Driver) StateDir() string { return d.cfg.StateDir }

func (d *Driver) probe() driver.Capabilities {
	c := driver.Capabilities{Level: sandbox.LevelMicroVM}
	check := func(name string, required, ok bool, detail string) {
		c.Checks = append(c.Checks, driver.Check{Name: name, OK: ok, Detail: detail, Required: required})
	}
	noInit := d.rt.Missing()
	check("init", true, len(noInit) == 0, map[bool]string{true: "airlock's init, seccomp filter and /etc template", false: strings.Join(noInit, "; ")}[len(noInit) == 0])
	if layout, err := cgroups.Detect(); err == nil && len(layout.Missing()) == 0 {
		d.cgroups = layout
	}
	check("cgroups", true, d.cgroups != nil, map[bool]string{true: "each VMM runs in a cgroup of its own (CPU quota, memory)", false: "no usable cgroup controllers"}[d.cgroups != nil])
	guestPath, which := guestBinary(d.cfg.GuestPath, d.cfg.InitPath)
	d.guest = guestPath
	static, why := staticBinary(guestPath)
	check("guest binary", true, static, why+", "+which+" (the guest's PID 1 and init; the initramfs has no libraries)")
	if guestPath == d.cfg.InitPath {
		d.log.Info("microvm guests run the airlock binary itself", "why", which)
	}
	path := d.cfg.QEMU
	if path == "" {
		path, _ = exec.LookPath("qemu-system-x86_64")
	}
	if path == "" {
		check("qemu", true, false, "qemu-system-x86_64 not found (fix: make deps, or apt-get install qemu-system-x86)")
	} else if v, err := qemuVersion(path); err != nil {
		check("qemu", true, false, path+": "+err.Error())
	} else {
		d.vmm = &qemu{path: path, version: v, self: d.cfg.InitPath}
		check("qemu", true, true, path+" (QEMU "+v+", machine microvm)")
	}
	if k, err := readKernel(d.cfg.KernelDir); err != nil {
		check("guest kernel", true, false, err.Error()+" (fix: make deps, which runs scripts/microvm/build-kernel.sh)")
	} else {
		d.kernel = k
		check("guest kernel", true, true, fmt.Sprintf("%s %s (%s), in %s", k.Package, k.Version, k.Release, d.cfg.KernelDir))
	}
	_, mkfsErr := exec.LookPath("mkfs.ext4")
	check("mkfs.ext4", true, mkfsErr == nil, map[bool]string{true: "formats each sandbox's writable disk", false: "mkfs.ext4 not found (fix: apt-get install e2fsprogs)"}[mkfsErr == nil])
	erofs, erofsErr := exec.LookPath("mkfs.erofs")
	check("mkfs.erofs", true, erofsErr == nil, map[bool]string{true: "builds the read-only images of the guests' roots in " + d.cfg.ImageDir, false: "mkfs.erofs not found (fix: make deps, or apt-get install erofs-utils)"}[erofsErr == nil])
	d.roots = newRootImages(d.cfg.ImageDir, d.cfg.InitPath, erofs, d.log)
	if erofsErr == nil {
		go d.roots.collect() // what the cache holds that nothing uses any more
	}
	accel, why := d.accelVerdict()
	check("accelerator", false, true, accel+": "+why)
	c.Detail = "accelerator " + accel + ": " + why
	var missing []string
	for _, ch := range c.Checks {
		if ch.Required && !ch.OK {
			missing = append(missing, ch.Name+": "+ch.Detail)
		}
	}
	c.Available = len(missing) == 0
	if !c.Available {
		c.Reason = strings.Join(missing, "; ")
		c.Fix = "make deps (QEMU and the guest kernel), run as root with cgroups, and use a statically linked airlock (CGO_ENABLED=0)"
	}
	c.Features = []string{"accelerator:" + accel, "kernel:" + d.kernel.Release, "guest:" + filepath.Base(d.guest), "limits:cpu,memory,pids,nofile,disk,timeout", "network:none", driver.FeatureSnapshotFilesystem, driver.FeatureSnapshotMemory}
	if d.cfg.Network != nil {
		c.Features = append(c.Features, "network:restricted", "network:open")
	}
	return c
}

// readKernel reads the guest kernel's manifest and checks that its files are there.
func readKernel(dir string) (kernelInfo, error) {
	var k kernelInfo
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return k, fmt.Errorf("no guest kernel in %s", dir)
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	k.vmlinux = filepath.Join(dir, "vmlinux")
	if _, err := os.Stat(k.vmlinux); err != nil {
		return k, fmt.Errorf("guest kernel: %w", err)
	}
	return k, nil
}

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	if c := d.Capabilities(); !c.Available {
		return nil, fmt.Errorf("microvm level: %s: %w", c.Reason, errdefs.ErrUnavailable)
	}
	if spec.Network.EgressPolicy != sandbox.EgressNone && d.cfg.Network == nil {
		return nil, errdefs.Unavailable("network.egressPolicy", "%q needs airlock's network service, which this process has not configured", spec.Network.EgressPolicy)
	}
	boot, err := d.setup(ctx)
	if err != nil {
		return nil, fmt.Errorf("microvm level: %w: %w", err, errdefs.ErrSetup)
	}
	return d.start(ctx, id, spec, boot, nil, nil)
}

// Restore implements driver.Restorer: without mem, a new VM whose init extracts the snapshot's
// layer onto its fresh disk before anything runs; with mem, the saved VM itself, its processes
// going on where they were (memory.go). The layer is then read to its end only, for its digest:
// the saved disk holds the same files.
func (d *Driver) Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	if c := d.Capabilities(); !c.Available {
		return nil, fmt.Errorf("microvm level: %s: %w", c.Reason, errdefs.ErrUnavailable)
	}
	var from *memRestore
	if mem != "" {
		m, err := readManifest(mem)
		if err != nil {
			return nil, err
		}
		from = &memRestore{dir: mem, m: m}
	}
	boot, err := d.setup(ctx)
	if err != nil {
		return nil, fmt.Errorf("microvm level: %w: %w", err, errdefs.ErrSetup)
	}
	if from == nil {
		return d.start(ctx, id, spec, boot, layer, nil)
	}
	drained := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, layer)
		drained <- err
	}()
	sb, err := d.start(ctx, id, spec, boot, nil, from)
	if derr := <-drained; derr != nil {
		if sb != nil {
			driver.Discard(context.Background(), d.log, sb)
		}
		return nil, fmt.Errorf("restore the snapshot's layer: %w", derr)
	}
	return sb, err
}
