// Package vm is the guest agent of the microvm level: the PID 1 of a sandbox's virtual machine,
// the airlock binary as its initramfs's /init. It boots the guest — leaves the initramfs for a
// root of its own, mounts the root's read-only images, the host's shares (9p) and the writable
// disk, makes the sandbox's cgroup of the guest kernel (memory, processes) —
// then starts airlock's init (internal/guest/pid1), the same init every level runs, in fresh
// namespaces and that cgroup, and bridges init's control socket to the host over the VM's serial
// port (internal/guest/vmlink). The host side of init drives it from there as on any level.
//
// It trusts the host, and nothing in the sandbox: init locks the sandbox down as everywhere
// else, and the agent is out of its reach (another PID namespace, another mount namespace, root
// of the guest while commands run without capabilities).
package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
)

// Arg0 is the name the kernel starts the agent under (rdinit=/init).
const Arg0 = "/init"

// Paths of the guest, after the agent left the initramfs.
const (
	// TemplateDir is where the host template's image is mounted (read-only): sandbox path P of
	// the template is TemplateDir+P. EtcDir is the generated /etc's.
	TemplateDir = "/tpl"
	EtcDir      = "/tpl-etc"
	// RootImageDir is where the image of a root of its own (an OCI image's layers, stacked, or
	// an operator's template) is mounted, read-only: init lays the writable layer over it.
	RootImageDir = "/img"
	// ShareDir is where the host's read-only share (the operator's read-only volumes) is
	// mounted: host path P is ShareDir+P.
	ShareDir = "/host"
	// LayerDir is where the agent mounts the writable disk too, to read its use.
	LayerDir = "/layer"
	// LayerDevice is the writable disk's device node as the agent names it for init: the agent
	// finds the disk by its serial (SerialLayer) and makes this node of it.
	LayerDevice = "/dev/airlock-layer"
	// PortName is the name of the serial port the link runs on.
	PortName = "airlock"
	// ShareTag is the 9p mount tag of the host's read-only share.
	ShareTag = "airlock"
	// WritableDir and WritableTag are the writable share's (the operator's read-write volumes).
	WritableDir = "/host-rw"
	WritableTag = "airlock-rw"
	// GuestNet, GuestAddr and GuestGateway are the guest's network (QEMU's user-mode network).
	GuestNet     = "10.0.2.0/24"
	GuestAddr    = "10.0.2.15/24"
	GuestGateway = "10.0.2.2"
	// cgroupDir is the sandbox's cgroup in the guest kernel.
	cgroupDir = "/sys/fs/cgroup/sandbox"
)

// The serials of the VM's disks, by which the agent tells them apart.
const (
	SerialLayer    = "airlock-layer"    // the writable layer (ext4)
	SerialTemplate = "airlock-template" // the host template's image (erofs)
	SerialEtc      = "airlock-etc"      // the generated /etc's image (erofs)
	SerialRoot     = "airlock-root"     // an image's or a template's root (erofs)
)

// Kernel command line parameters the host sets (Params).
const (
	ParamMemory = "airlock.mem"      // bytes the sandbox's cgroup may use
	ParamPids   = "airlock.pids"     // tasks the sandbox's cgroup may have
	ParamShare  = "airlock.share"    // 1: the host's read-only share is there
	ParamRW     = "airlock.writable" // 1: the writable share is there
	ParamNet    = "airlock.net"      // 1: the guest has a network card
	// ParamGrace is how many ms the guest outlives its host (a daemon killed): the agent waits
	// that long for a new host to take the VM over (vmlink.AdoptHost), then powers it off.
	ParamGrace = "airlock.grace"
)

// IsAgent reports whether this process is a microvm guest's PID 1.
func IsAgent() bool { return os.Getpid() == 1 && len(os.Args) > 0 && os.Args[0] == Arg0 }

// Run boots the guest, serves the link until init or the host is gone, and ends the VM.
// It never returns.
func Run() {
	err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock guest agent:", err)
	}
	unix.Sync()
	// A reset, which QEMU (-no-reboot) takes as the end: without ACPI (the microvm machine is
	// run without it) a power-off would only halt the CPUs and leave QEMU running.
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	select {}
}

// params are the agent's settings from the kernel command line.
type params struct {
	memory, pids    int64
	grace           int64 // ms
	share, writable bool
	net             bool
	disks           map[string]string // the disks found, device node by serial
}

func readParams() (params, error) {
	var p params
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return p, err
	}
	for _, f := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case ParamMemory:
			p.memory, err = strconv.ParseInt(v, 10, 64)
		case ParamPids:
			p.pids, err = strconv.ParseInt(v, 10, 64)
		case ParamGrace:
			p.grace, err = strconv.ParseInt(v, 10, 64)
		case ParamShare:
			p.share = v == "1"
		case ParamRW:
			p.writable = v == "1"
		case ParamNet:
			p.net = v == "1"
		}
		if err != nil {
			return p, fmt.Errorf("kernel command line %s: %w", f, err)
		}
	}
	return p, nil
}

func run() error {
	phases := map[string]int64{"agent": uptimeMs()}
	if err := mountEarly(); err != nil {
		return err
	}
	p, err := readParams()
	if err != nil {
		return err
	}
	if err := leaveInitramfs(); err != nil {
		return err
	}
	if p.disks, err = findDisks(); err != nil {
		return err
	}
	for _, m := range []struct{ serial, dir string }{{SerialTemplate, TemplateDir}, {SerialEtc, EtcDir}, {SerialRoot, RootImageDir}} {
		if dev, ok := p.disks[m.serial]; ok {
			if err := unix.Mount(dev, m.dir, "erofs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
				return fmt.Errorf("mount %s (%s): %w", m.serial, dev, err)
			}
		}
	}
	if p.share {
		if err := unix.Mount(ShareTag, ShareDir, "9p", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV,
			"trans=virtio,version=9p2000.L,cache=loose,msize=262144"); err != nil {
			return fmt.Errorf("mount the host's share: %w", err)
		}
	}
	if p.writable {
		if err := unix.Mount(WritableTag, WritableDir, "9p", unix.MS_NOSUID|unix.MS_NODEV,
			"trans=virtio,version=9p2000.L,cache=none,msize=262144"); err != nil {
			return fmt.Errorf("mount the host's writable share: %w", err)
		}
	}
	if dev, ok := p.disks[SerialLayer]; ok {
		// Init mounts the layer by the name its configuration gives.
		if err := os.Symlink(dev, LayerDevice); err != nil {
			return err
		}
		if err := unix.Mount(dev, LayerDir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "noinit_itable"); err != nil {
			return fmt.Errorf("mount the writable disk %s: %w", dev, err)
		}
	}
	phases["mounts"] = uptimeMs()
	if err := network(p.net); err != nil {
		return err
	}
	phases["network"] = uptimeMs()
	cg, err := sandboxCgroup(p.memory, p.pids)
	if err != nil {
		return err
	}
	defer unix.Close(cg)
	// The guest's OOM killer picks in the sandbox's cgroup; the agent is never its pick. The
	// guest's RAM is small, so its kernel would refuse a large allocation outright, where the
	// host's would let the cgroup's limit end it: memory is overcommitted, as on a big host,
	// and a memory bomb meets the sandbox's limit.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0)
	if err := os.WriteFile("/proc/sys/vm/overcommit_memory", []byte("1"), 0); err != nil {
		return fmt.Errorf("overcommit: %w", err)
	}
	port, err := openPort(PortName)
	if err != nil {
		return err
	}
	agentEnd, initEnd, err := controlPair()
	if err != nil {
		return err
	}
	cmd, err := startInit(initEnd, cg)
	initEnd.Close()
	if err != nil {
		return err
	}
	go watchOOM(p.memory, cmd.Process.Pid)
	link, err := vmlink.NewGuest(port, agentEnd)
	if err != nil {
		return err
	}
	link.Grace = time.Duration(p.grace) * time.Millisecond
	files := &fileServer{link: link, initPid: cmd.Process.Pid}
	link.Rewrite = func(b []byte, fds []int) ([]byte, []int, error) { return rewrite(b, fds, files.configured) }
	link.Handle = func(kind string, body json.RawMessage) (any, error) {
		if out, ok, err := files.handle(kind, body); ok {
			return out, err
		}
		switch kind {
		case "stats":
			return stats(p), nil
		case "layer", vmlink.LayerScan:
			var b vmlink.StreamBody
			if err := json.Unmarshal(body, &b); err != nil {
				return nil, err
			}
			w, err := link.SendStream(b.Stream)
			if err != nil {
				return nil, err
			}
			if kind == vmlink.LayerScan {
				return nil, scanLayer(w, p)
			}
			return nil, writeLayer(w, p)
		}
		return nil, fmt.Errorf("unknown call %q", kind)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	if err := link.Hello(vmlink.Hello{Kernel: unix.ByteSliceToString(uts.Release[:]), BootMs: uptimeMs(), Phases: phases}); err != nil {
		return err
	}
	go func() {
		_ = cmd.Wait() // init exited: the sandbox is over
		link.Close()
	}()
	link.Run()
	return nil
}

// mountEarly mounts what finding devices and leaving the initramfs need.
func mountEarly() error {
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fs, unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	return nil
}

// leaveInitramfs makes a tmpfs the root, as switch_root does: init's pivot_root cannot leave
// the initramfs (rootfs) itself. The agent's binary stays reachable as /proc/self/exe.
func leaveInitramfs() error {
	const newRoot = "/.root"
	if err := os.Mkdir(newRoot, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,mode=0755"); err != nil {
		return fmt.Errorf("mount the guest's root: %w", err)
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "host", "host-rw", "layer", "run", "tpl", "tpl-etc", "img"} {
		if err := os.Mkdir(filepath.Join(newRoot, d), 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if err := unix.Mount(d, newRoot+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s: %w", d, err)
		}
	}
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the guest's root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// sandboxCgroup makes the sandbox's cgroup of the guest kernel with its limits, and returns its
// directory's descriptor (init is started into it).
func sandboxCgroup(memory, pids int64) (int, error) {
	if err := unix.Mount("cgroup2", "/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return -1, fmt.Errorf("mount the guest's cgroups: %w", err)
	}
	if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory +pids"), 0); err != nil {
		return -1, fmt.Errorf("guest cgroup controllers: %w", err)
	}
	if err := os.Mkdir(cgroupDir, 0o755); err != nil {
		return -1, err
	}
	set := map[string]string{}
	if memory > 0 {
		set["memory.max"] = strconv.FormatInt(memory, 10)
		set["memory.swap.max"] = "0"
	}
	if pids > 0 {
		set["pids.max"] = strconv.FormatInt(pids, 10)
	}
	for f, v := range set {
		// Never created: a file the kernel does not offer (memory.swap.max without swap) is
		// one limit fewer to set, where creating it in cgroupfs would be refused (EACCES).
		if err := writeExisting(filepath.Join(cgroupDir, f), v); err != nil && !errors.Is(err, os.ErrNotExist) {
			return -1, fmt.Errorf("guest cgroup %s: %w", f, err)
		}
	}
	return unix.Open(cgroupDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// writeExisting writes v to the file at path, which must exist.
func writeExisting(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openPort opens the virtio serial port named name.
func openPort(name string) (*os.File, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ports, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, p := range ports {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == name {
				dev := "/dev/" + filepath.Base(filepath.Dir(p))
				return os.OpenFile(dev, os.O_RDWR, 0)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no virtio serial port named %q", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findDisks names the VM's disks by their serials: the virtio block driver probed them when it
// was loaded, so they are all there.
func findDisks() (map[string]string, error) {
	out := map[string]string{}
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil, fmt.Errorf("disks: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "vd") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "serial"))
		if err != nil {
			continue
		}
		out[strings.TrimSpace(string(b))] = "/dev/" + e.Name()
	}
	return out, nil
}

func controlPair() (agent, init *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "airlock-control"), os.NewFile(uintptr(fds[1]), "airlock-control-init"), nil
}

// startInit starts airlock's init as PID 1 of new PID, mount, UTS and IPC namespaces, in the
// sandbox's cgroup, with ctl as its control socket.
func startInit(ctl *os.File, cgroup int) (*exec.Cmd, error) {
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{guest.Arg0},
		Env:        []string{"PATH=/usr/bin:/bin"},
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{ctl},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
			UseCgroupFD: true,
			CgroupFD:    cgroup,
		},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	return cmd, nil
}

func uptimeMs() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return ts.Nano() / 1e6
}
