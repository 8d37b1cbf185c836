package microvm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest/vm"
)

// Accelerators.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

// Machine is QEMU's machine with its options, as the level runs it (test/bench/microvm's raw
// boot too). No ACPI: its tables describe nothing a guest needs that the kernel's command line
// does not (QEMU adds each virtio-mmio device to it; airlock's guest kernel fails to load
// microvm's tables anyway), and finding CPUs and devices without it is quicker; the guest ends by
// a reset (the kernel's reboot=t), which -no-reboot makes QEMU's exit.
const Machine = "microvm,x-option-roms=off,isa-serial=on,rtc=on,acpi=off"

// qemu is the QEMU backend: `qemu-system-x86_64 -M microvm`, the kernel booted through its PVH
// entry (an uncompressed vmlinux), virtio over MMIO for the serial port, the disk and the share.
type qemu struct {
	path    string
	version string
	self    string // the airlock binary, re-executed as the jail (jail.go)
}

var _ VMM = (*qemu)(nil)

// Name implements VMM.
func (q *qemu) Name() string { return "qemu " + q.version }

// args is QEMU's command line for cfg, the control socket at descriptor ctlFd, the monitor at
// qmpFd, guest RAM at ramFd, the read-only images from imgFd on (in cfg.Images's order).
func (q *qemu) args(cfg VMConfig, ctlFd, qmpFd, ramFd, imgFd int) []string {
	accel, cpu := "tcg,thread=multi,tb-size=64", "max"
	if cfg.Accel == AccelKVM {
		accel, cpu = "kvm", "host"
	}
	mem := strconv.FormatInt(cfg.MemoryMB, 10)
	// A VM that outlives its airlock has its serial port and monitor listen (a socket given as
	// a descriptor): when one host goes, QEMU accepts the next.
	listen := ""
	if cfg.Sockets != "" {
		listen = ",server=on,wait=off"
	}
	a := []string{q.path,
		// Guest RAM is a memfd the driver made (VMConfig.RAM), shared: QEMU madvises its
		// private RAM for transparent huge pages, which a guest touching a page here and there
		// turns into 2 MiB of the host's memory each (an idle VM held 270 MiB of them); the
		// memfd's pages are the 4 KiB the guest touched. Being the driver's, it is saved and
		// restored beside QEMU's migration stream, which then carries the devices only
		// (x-ignore-shared: memory.go).
		"-object", "memory-backend-file,id=ram,share=on,mem-path=/proc/self/fd/" + strconv.Itoa(ramFd) + ",size=" + mem + "M",
		"-M", Machine + ",memory-backend=ram",
		"-accel", accel, "-cpu", cpu,
		"-smp", strconv.Itoa(cfg.VCPUs), "-m", mem,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// QEMU's own seccomp filter: no new processes, no privilege changes, no obsolete calls.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", cfg.Kernel, "-initrd", cfg.Initrd, "-append", cfg.Cmdline,
		"-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con",
		"-device", "virtio-serial-device",
		"-chardev", "socket,id=ctl,fd=" + strconv.Itoa(ctlFd) + listen,
		"-device", "virtserialport,chardev=ctl,name=" + vm.PortName,
		"-chardev", "socket,id=qmp,fd=" + strconv.Itoa(qmpFd) + listen, "-mon", "chardev=qmp,mode=control",
	}
	if cfg.Incoming {
		a = append(a, "-S", "-incoming", "defer")
	}
	if cfg.Disk != "" {
		a = append(a, "-drive", "id=disk,file="+cfg.Disk+",format=raw,if=none,cache=unsafe,discard=unmap",
			"-device", "virtio-blk-device,drive=disk,serial="+vm.SerialLayer)
	}
	// The images are opened by the level and passed as descriptors (an fd set each): an image
	// of an OCI image or a template holds files only root may read, and is root's alone.
	for i, img := range cfg.Images {
		id, fd := "ro"+strconv.Itoa(i), strconv.Itoa(imgFd+i)
		a = append(a, "-add-fd", "fd="+fd+",set="+fd,
			"-drive", "id="+id+",file=/dev/fdset/"+fd+",format=raw,if=none,readonly=on",
			"-device", "virtio-blk-device,drive="+id+",serial="+img.Serial)
	}
	if len(cfg.Share) > 0 {
		a = append(a, "-fsdev", "local,id=share,path="+shareRoot(cfg.Jail.Dir)+",readonly=on,security_model=none",
			"-device", "virtio-9p-device,fsdev=share,mount_tag="+vm.ShareTag)
	}
	if cfg.Network != nil {
		// User-mode networking: every connection the guest makes is a socket QEMU opens in
		// the sandbox's network namespace, so the namespace's firewall, DNS redirection,
		// transparent proxy and shaping police it exactly as they do a process there. No IPv6
		// (the namespace has none).
		a = append(a, "-netdev", "user,id=net0,ipv6=off,net="+vm.GuestNet+",host="+vm.GuestGateway,
			"-device", "virtio-net-device,netdev=net0")
	}
	if len(cfg.Writable) > 0 {
		a = append(a, "-fsdev", "local,id=rw,path="+writableRoot(cfg.Jail.Dir)+",security_model=none",
			"-device", "virtio-9p-device,fsdev=rw,mount_tag="+vm.WritableTag)
	}
	return a
}

// shareRoot and writableRoot are where a jail assembles its shares, in its own mount namespace.
func shareRoot(dir string) string    { return dir + "/share" }
func writableRoot(dir string) string { return dir + "/share-rw" }

// Start implements VMM: the airlock binary starts as the jail (in new namespaces), waits until it
// is in its cgroup, assembles the share, drops to the jail's uid and executes QEMU.
func (q *qemu) Start(ctx context.Context, cfg VMConfig) (VM, error) {
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer goR.Close()
	defer goW.Close()
	ctl := cfg.Control
	var qmpOurs, qmpTheirs *os.File
	if cfg.Sockets != "" {
		if ctl, err = listenUnix(ControlSocket(cfg.Sockets)); err != nil {
			return nil, err
		}
		defer ctl.Close()
		qmpTheirs, err = listenUnix(MonitorSocket(cfg.Sockets))
	} else {
		qmpOurs, qmpTheirs, err = streamPair()
	}
	if err != nil {
		return nil, err
	}
	defer qmpTheirs.Close()
	fail := func(err error) (VM, error) {
		if qmpOurs != nil {
			qmpOurs.Close()
		}
		return nil, err
	}
	// Descriptors of the jail: 3 the go-ahead, 4 the control socket, 5 the monitor, 6 guest
	// RAM, from 7 the images, then what to lay into guest RAM first.
	files := []*os.File{goR, ctl, qmpTheirs, cfg.RAM}
	for _, img := range cfg.Images {
		f := img.File
		if f == nil {
			if f, err = os.Open(img.Path); err != nil {
				return fail(fmt.Errorf("image %s: %w", img.Path, err))
			}
			defer f.Close()
		}
		files = append(files, f)
	}
	jc := jailConfig{Args: q.args(cfg, 4, 5, 6, 7), UID: cfg.Jail.UID, GID: cfg.Jail.GID, Groups: cfg.Jail.Groups,
		KVM: cfg.Accel == AccelKVM, Dir: cfg.Jail.Dir, RAMSize: cfg.MemoryMB << 20}
	var fillW *os.File
	if cfg.RAMFill != nil {
		jc.RAMFill = len(files) + 3
		fillR, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		defer fillR.Close()
		fillW = w
		files = append(files, fillR)
	}
	if len(cfg.Share) > 0 {
		jc.Share, jc.Mounts = shareRoot(cfg.Jail.Dir), cfg.Share
	}
	if len(cfg.Writable) > 0 {
		jc.Writable, jc.WritableMounts = writableRoot(cfg.Jail.Dir), cfg.Writable
	}
	jc.Detached = cfg.Sockets != ""
	spec, err := json.Marshal(jc)
	if err != nil {
		return fail(err)
	}
	cmd := &exec.Cmd{
		Path:       q.self,
		Args:       []string{jailArg0, string(spec)},
		Env:        []string{},
		Stdout:     cfg.Console,
		Stderr:     cfg.Console,
		ExtraFiles: files,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET,
			// Until the jail drops to its uid (which clears it), it dies with its maker; a VM
			// that outlives it (Sockets) is not set again, and runs in a session of its own,
			// out of reach of its maker's process group and terminal.
			Pdeathsig: syscall.SIGKILL,
			Setsid:    jc.Detached,
		},
	}
	if cfg.Network != nil {
		cmd.SysProcAttr.Cloneflags &^= syscall.CLONE_NEWNET
		err = cfg.Network(cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		if fillW != nil {
			fillW.Close()
		}
		return fail(fmt.Errorf("start the VMM's jail: %w", err))
	}
	if qmpOurs == nil {
		// The listening socket queues the connection until QEMU accepts it.
		if qmpOurs, err = dialUnix(MonitorSocket(cfg.Sockets)); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if fillW != nil {
				fillW.Close()
			}
			return nil, fmt.Errorf("the VMM's monitor: %w", err)
		}
	}
	v := &qemuVM{pid: cmd.Process.Pid, proc: cmd.Process, cmd: cmd, qmp: newQMP(qmpOurs)}
	if fillW != nil {
		// The jail lays it into guest RAM, in the VM's cgroup, before it executes QEMU.
		v.filled = make(chan error, 1)
		go func() {
			_, err := io.Copy(fillW, cfg.RAMFill)
			fillW.Close()
			v.filled <- err
		}()
	}
	if cfg.Jail.Cgroup != nil {
		if err := cfg.Jail.Cgroup.AddProc(cmd.Process.Pid); err != nil {
			_ = v.Kill()
			_ = v.Wait()
			return nil, fmt.Errorf("place the VMM in its cgroup: %w", err)
		}
	}
	if _, err := goW.Write([]byte{1}); err != nil {
		_ = v.Kill()
		_ = v.Wait()
		return nil, fmt.Errorf("start the VMM: %w", err)
	}
	return v, nil
}

// Attach implements VMM: the VM of pid (its pidfd held, so that a reused pid is never signalled)
// with its monitor connected again.
func (q *qemu) Attach(pid int, sockets string) (VM, error) {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil, err
	}
	f, err := dialUnix(MonitorSocket(sockets))
	if err != nil {
		return nil, fmt.Errorf("the VMM's monitor: %w", err)
	}
	return &qemuVM{pid: pid, proc: proc, qmp: newQMP(f)}, nil
}

// qemuVM is a running QEMU.
type qemuVM struct {
	pid  int
	proc *os.Process
	cmd  *exec.Cmd // nil for a VM another airlock process started (Attach)
	qmp  *qmp
	// filled reports the copy of VMConfig.RAMFill to the jail, when there is one.
	filled chan error
}

func (v *qemuVM) Pid() int { return v.pid }

// Wait implements VM; a VM this process did not start is watched through its pidfd.
func (v *qemuVM) Wait() error {
	var err error
	if v.cmd != nil {
		err = v.cmd.Wait()
	} else {
		err = waitPidfd(v.pid)
	}
	v.qmp.close()
	return err
}

func (v *qemuVM) Kill() error { return v.proc.Kill() }

// status is the VM's run state as QEMU says it ("running", "paused", "postmigrate", ...).
func (v *qemuVM) status(ctx context.Context) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	err := v.qmp.call(ctx, "query-status", nil, &st)
	return st.Status, err
}

// waitPidfd waits until process pid, not a child of this one, has exited.
func waitPidfd(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			return err
		}
	}
}

// listenUnix makes a listening stream socket at path, which only root can reach.
func listenUnix(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	os.Remove(path)
	err = unix.Bind(fd, &unix.SockaddrUnix{Name: path})
	if err == nil {
		err = unix.Chmod(path, 0o600)
	}
	if err == nil {
		err = unix.Listen(fd, 2)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// dialUnix connects to the stream socket at path; the file is pollable (deadlines, and a close
// ends a read).
func dialUnix(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EAGAIN || try == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond) // the backlog is full: the VMM accepts one at a time
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Pause implements VM: QMP stop, which also stops the guest's clocks, so the guest's processes
// are not charged the time they spent stopped.
func (v *qemuVM) Pause(ctx context.Context) error { return v.qmp.do(ctx, "stop") }

// Resume implements VM: QMP cont.
func (v *qemuVM) Resume(ctx context.Context) error { return v.qmp.do(ctx, "cont") }

// qemuVersion asks the binary at path for its version ("7.2.22").
func qemuVersion(path string) (string, error) {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", err
	}
	f := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("%s --version: %q", path, out)
}
