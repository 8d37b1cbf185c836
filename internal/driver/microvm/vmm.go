package microvm

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/airlockrun/airlock/internal/cgroups"
)

// VMM is a virtual machine monitor the level runs its sandboxes' VMs with. QEMU is the one built
// (qemu.go): it runs everywhere, under KVM or its own software CPU (TCG). A Firecracker or Cloud
// Hypervisor backend (KVM hosts only, a REST API on a unix socket) fits behind the same few
// calls.
type VMM interface {
	// Name says which VMM and version.
	Name() string
	// Start starts a VM as cfg says, jailed, and returns once its process runs (not once the
	// guest booted: the guest agent's hello says that).
	Start(ctx context.Context, cfg VMConfig) (VM, error)
	// Attach takes over the VM of process pid, which a gone airlock process started with
	// VMConfig.Sockets set to sockets: its monitor is connected again.
	Attach(pid int, sockets string) (VM, error)
}

// VM is one running virtual machine.
type VM interface {
	// Pid is the VMM process's pid on the host.
	Pid() int
	// Wait waits for the VMM process to exit and reaps it.
	Wait() error
	// Kill ends the VMM process at once.
	Kill() error
	// Pause stops the vCPUs and the guest's clocks; Resume starts them again.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}

// VMConfig describes one VM.
type VMConfig struct {
	Kernel, Initrd, Cmdline string
	Accel                   string // AccelKVM or AccelTCG
	VCPUs                   int
	MemoryMB                int64
	// Disk, when set, is a raw disk image, the guest's writable layer (serial vm.SerialLayer).
	Disk string
	// Images are read-only disk images, each with the serial the guest finds it by.
	Images []Image
	// RAM is the guest's RAM: a memfd of MemoryMB, which the level keeps to save it. RAMFill,
	// when set, is guest RAM saved by a snapshot (memory.go's extents), laid into RAM before the
	// VMM starts, by the VMM's jail in the VM's cgroup, so the pages are charged to the VM.
	RAM     *os.File
	RAMFill io.Reader
	// Incoming says the VM does not boot: it waits, paused, for its state (a migration stream
	// its monitor is given: memory.go).
	Incoming bool
	// Share, when not empty, are host paths offered to the guest read-only, as one 9p share
	// (tag guest/vm.ShareTag) built for this VM alone, each at its own path in it.
	Share []ShareMount
	// Writable, when not empty, are host paths the guest may write (the operator's read-write
	// volumes), as a second share (tag guest/vm.WritableTag); the VMM writes as its own uid.
	Writable []ShareMount
	// Control is the VM's end of a connected stream socket: the guest's serial port named
	// guest/vm.PortName. Console receives the guest's console (its kernel's messages).
	Control, Console *os.File
	// Sockets, when set instead of Control, is a directory where the VM's serial port and
	// monitor listen, as unix sockets only root can reach (ControlSocket, MonitorSocket): the VM
	// outlives the process that started it (no parent-death signal, a session of its own), and
	// a later airlock process connects to them again (Attach, adopt.go).
	Sockets string
	// Network, when set, gives the guest a network card whose traffic leaves through sockets
	// of the VMM in the network namespace that Network starts the VMM in (it calls start on a
	// thread inside it): the sandbox's, behind its egress gateway. Otherwise the VMM gets a
	// network namespace of its own, with nothing in it.
	Network func(start func() error) error
	// Jail is how the VMM process is confined.
	Jail JailSpec
}

// Image is a read-only disk of a VM.
type Image struct {
	Path   string `json:"path"`
	Serial string `json:"serial"`
	// File, when set, is the image opened (and locked in use: imagelock.go); the VMM gets it.
	File *os.File `json:"-"`
}

// ControlSocket and MonitorSocket are where a VM started with VMConfig.Sockets listens.
func ControlSocket(dir string) string { return filepath.Join(dir, "ctl.sock") }
func MonitorSocket(dir string) string { return filepath.Join(dir, "qmp.sock") }

// ShareMount is one host path in a VM's share, seen at the same path in it; Empty covers Dst
// with an empty directory instead (the host's /usr/local).
type ShareMount struct {
	Src, Dst string
	Dir      bool
	Empty    bool
}

// JailSpec is the VMM process's confinement: its own unprivileged uid and gid, a cgroup it is placed
// in before it runs, its own mount, PID, IPC, UTS and network namespaces, and Dir, an empty
// directory where its share is assembled inside its own mount namespace.
type JailSpec struct {
	UID, GID int
	Groups   []int // supplementary groups
	Cgroup   *cgroups.Cgroup
	Dir      string
}
