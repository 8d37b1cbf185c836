package microvm

import (
	"fmt"
	"path"
	"path/filepath"
	"time"

	"github.com/airlockrun/airlock/internal/cgroups"
)

// Settings is the "microvm" section of airlock's configuration file, as an operator writes it;
// package levels places it in the file and turns it into a Config. Validate's errors begin with
// the field's path inside the section.
type Settings struct {
	// QEMU is the VMM's binary; empty means qemu-system-x86_64 in PATH.
	QEMU string `json:"qemu"`
	// KernelDir holds the guest kernel (vmlinux) and its manifest.json, as `make deps` installs
	// them (scripts/microvm/build-kernel.sh). Default /usr/local/lib/airlock/microvm.
	KernelDir string `json:"kernelDir"`
	// Accelerator is kvm, tcg, or auto (default): KVM when a trial boot under it succeeds (once,
	// at the first sandbox; the verdict is kept in the state directory), QEMU's software CPU
	// otherwise.
	Accelerator string `json:"accelerator"`
	// CgroupParent is where the level makes each VMM's cgroup. Default "airlock-microvm".
	CgroupParent string `json:"cgroupParent"`
	// ImageDir is where the read-only images of the guests' roots are kept (the host template's,
	// about the size of the host's /usr), shared by every airlock on the host. Default
	// /var/cache/airlock/microvm.
	ImageDir string `json:"imageDir"`
	// GuestBinary is the statically linked binary every guest runs as its PID 1 and init. Empty
	// (the default): airlock-guest beside airlock when both come from the same build (make build
	// puts it there), else airlock itself, whose guests boot slower.
	GuestBinary string `json:"guestBinary"`
	// OrphanGraceSeconds is how long a VM outlives the daemon that made it (a crash, kill -9):
	// a daemon started again within it adopts the VM with its processes (0: the VM dies with its
	// daemon). Default 60, at most 3600.
	OrphanGraceSeconds int `json:"orphanGraceSeconds"`
}

// DefaultSettings returns the section's defaults.
func DefaultSettings() Settings {
	d := DefaultConfig()
	return Settings{KernelDir: d.KernelDir, Accelerator: d.Accelerator, CgroupParent: d.CgroupParent, ImageDir: d.ImageDir,
		OrphanGraceSeconds: int(d.OrphanGrace / time.Second)}
}

// Validate checks the section.
func (s Settings) Validate() error {
	switch s.Accelerator {
	case AccelAuto, AccelKVM, AccelTCG:
	default:
		return fmt.Errorf("accelerator must be auto, kvm or tcg (got %q)", s.Accelerator)
	}
	if !filepath.IsAbs(s.KernelDir) {
		return fmt.Errorf("kernelDir %q must be an absolute path", s.KernelDir)
	}
	if !filepath.IsAbs(s.ImageDir) {
		return fmt.Errorf("imageDir %q must be an absolute path", s.ImageDir)
	}
	if s.GuestBinary != "" && !filepath.IsAbs(s.GuestBinary) {
		return fmt.Errorf("guestBinary %q must be an absolute path", s.GuestBinary)
	}
	if g := s.OrphanGraceSeconds; g < 0 || g > 3600 {
		return fmt.Errorf("orphanGraceSeconds must be between 0 and 3600 (got %d)", g)
	}
	if err := cgroups.ValidParent(s.CgroupParent); err != nil {
		return fmt.Errorf("cgroupParent %q must be a relative cgroup path: %w", s.CgroupParent, err)
	}
	return nil
}

// Config returns the level's configuration for the airlock named instance (its network is
// attached by package levels).
func (s Settings) Config(instance string) Config {
	c := DefaultConfig()
	c.QEMU, c.KernelDir, c.Accelerator, c.ImageDir = s.QEMU, s.KernelDir, s.Accelerator, s.ImageDir
	c.GuestPath = s.GuestBinary
	c.CgroupParent = path.Join(s.CgroupParent, instance)
	c.OrphanGrace = time.Duration(s.OrphanGraceSeconds) * time.Second
	c.StateDir = StateDirOf(instance)
	return c
}

// StateDirOf is where the microvm level of the airlock named instance keeps its VMs' disks,
// shares and consoles, its initramfs and its accelerator verdict: under /run/airlock, one
// directory per instance.
func StateDirOf(instance string) string {
	return filepath.Join("/run/airlock/microvm", instance)
}
