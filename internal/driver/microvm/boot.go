package microvm

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
)

// bootSetup is what every VM of this process boots with, decided at the first one.
type bootSetup struct {
	initrd string
	held   *os.File // initrd, share-locked for as long as this process may boot VMs from it
	accel  string
	why    string
}

// trialWait bounds the trial boot under KVM: a KVM that boots the guest does so in well under a
// second; one that cannot (a nested or paravirtualised KVM without what a stock kernel needs)
// crawls, then fails much later.
const trialWait = 20 * time.Second

// accelFile keeps the verdict of the trial boot in the state directory (a tmpfs: it goes with
// the host's kernel at a reboot).
const accelFile = "accelerator.json"

// accelVerdict is the accelerator as far as it is known without booting: forced by the
// configuration, no /dev/kvm, or a verdict kept from an earlier trial boot.
type verdict struct {
	Accel   string `json:"accel"`
	Why     string `json:"why"`
	Key     string `json:"key"` // what the trial ran on: the host kernel, QEMU, the guest kernel
	Decided bool   `json:"-"`
}

func (d *Driver) accelKey() string {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	q := ""
	if d.vmm != nil {
		q = d.vmm.version
	}
	return unix.ByteSliceToString(uts.Release[:]) + "/" + q + "/" + d.kernel.VmlinuxSha256
}

func (d *Driver) known() verdict {
	switch d.cfg.Accelerator {
	case AccelKVM:
		return verdict{Accel: AccelKVM, Why: "set by the configuration (microvm.accelerator)", Decided: true}
	case AccelTCG:
		return verdict{Accel: AccelTCG, Why: "set by the configuration (microvm.accelerator); QEMU's software CPU", Decided: true}
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return verdict{Accel: AccelTCG, Why: "no /dev/kvm on this host: QEMU's software CPU (TCG), several times slower", Decided: true}
	}
	var v verdict
	if b, err := os.ReadFile(filepath.Join(d.cfg.StateDir, accelFile)); err == nil && json.Unmarshal(b, &v) == nil && v.Key == d.accelKey() {
		v.Decided = true
		return v
	}
	return verdict{Accel: "kvm?", Why: "/dev/kvm is there; a trial boot at the first sandbox decides whether KVM can run the guest (else TCG)"}
}

// accelVerdict is the accelerator and why, for Capabilities.
func (d *Driver) accelVerdict() (string, string) {
	d.bootMu.Lock()
	b := d.boot
	d.bootMu.Unlock()
	if b != nil {
		return b.accel, b.why
	}
	v := d.known()
	return v.Accel, v.Why
}

// Initramfs is the initramfs the VMs boot with, once the first VM was made ("" before).
func (d *Driver) Initramfs() string {
	d.bootMu.Lock()
	defer d.bootMu.Unlock()
	if d.boot == nil {
		return ""
	}
	return d.boot.initrd
}

// setup builds the initramfs and decides the accelerator, once.
func (d *Driver) setup(ctx context.Context) (*bootSetup, error) {
	d.bootMu.Lock()
	defer d.bootMu.Unlock()
	if d.boot != nil {
		return d.boot, nil
	}
	initrd, held, err := holdInitramfs(d.cfg.StateDir, d.guest)
	if err != nil {
		return nil, err
	}
	go pruneInitramfs(d.cfg.StateDir, initrd, d.log)
	b := &bootSetup{initrd: initrd, held: held}
	v := d.known()
	if !v.Decided {
		v = d.trial(ctx, initrd)
		if data, err := json.Marshal(v); err == nil {
			_ = os.WriteFile(filepath.Join(d.cfg.StateDir, accelFile), data, 0o644)
		}
		d.log.Info("microvm accelerator decided by a trial boot", "accelerator", v.Accel, "why", v.Why)
	}
	b.accel, b.why = v.Accel, v.Why
	d.boot = b
	d.capsMu.Lock()
	defer d.capsMu.Unlock()
	for i, ch := range d.caps.Checks {
		if ch.Name == "accelerator" {
			d.caps.Checks[i].Detail = b.accel + ": " + b.why
		}
	}
	d.caps.Detail = "accelerator " + b.accel + ": " + b.why
	for i, f := range d.caps.Features {
		if strings.HasPrefix(f, "accelerator:") {
			d.caps.Features[i] = "accelerator:" + b.accel
		}
	}
	return b, nil
}

// trial boots the guest once under KVM and reports whether it came up.
func (d *Driver) trial(ctx context.Context, initrd string) verdict {
	key := d.accelKey()
	tcg := func(why string) verdict {
		return verdict{Accel: AccelTCG, Why: why + ": QEMU's software CPU (TCG)", Key: key, Decided: true}
	}
	hostEnd, vmEnd, err := streamPair()
	if err != nil {
		return tcg("trial boot under KVM: " + err.Error())
	}
	ctlHost, ctlInit, err := seqPair()
	if err != nil {
		hostEnd.Close()
		vmEnd.Close()
		return tcg("trial boot under KVM: " + err.Error())
	}
	defer ctlHost.Close()
	jailDir, err := os.MkdirTemp(d.cfg.StateDir, ".trial-")
	if err != nil {
		hostEnd.Close()
		vmEnd.Close()
		return tcg("trial boot under KVM: " + err.Error())
	}
	defer os.RemoveAll(jailDir)
	con, err := os.CreateTemp(d.cfg.StateDir, ".trial-console-*")
	if err != nil {
		hostEnd.Close()
		vmEnd.Close()
		return tcg("trial boot under KVM: " + err.Error())
	}
	defer os.Remove(con.Name())
	defer con.Close()
	said := func() string {
		b, _ := os.ReadFile(con.Name())
		if l := strings.Split(strings.TrimSpace(string(b)), "\n"); len(l) > 0 && l[len(l)-1] != "" {
			return "; QEMU said: " + l[len(l)-1]
		}
		return ""
	}
	const trialMB = 256
	ram, err := newRAM(trialMB)
	if err != nil {
		hostEnd.Close()
		vmEnd.Close()
		return tcg("trial boot under KVM: " + err.Error())
	}
	defer ram.Close()
	cfg := VMConfig{Kernel: d.kernel.vmlinux, Initrd: initrd, Accel: AccelKVM, VCPUs: 1, MemoryMB: trialMB, RAM: ram,
		Cmdline: cmdline(AccelKVM, 0, 0, false, false, false), Control: vmEnd, Console: con,
		Jail: JailSpec{UID: 65534, GID: 65534, Dir: jailDir}}
	t0 := time.Now()
	v, err := d.vmm.Start(ctx, cfg)
	vmEnd.Close()
	if err != nil {
		hostEnd.Close()
		return tcg("trial boot under KVM failed to start: " + err.Error() + said())
	}
	link, err := vmlink.NewHost(hostEnd, ctlInit)
	if err != nil {
		_ = v.Kill()
		_ = v.Wait()
		return tcg("trial boot under KVM: " + err.Error())
	}
	defer func() {
		link.Close()
		_ = v.Kill()
		_ = v.Wait()
	}()
	select {
	case h := <-link.Hello():
		return verdict{Accel: AccelKVM, Why: fmt.Sprintf("a trial boot under KVM reached the guest agent in %v", time.Since(t0).Round(time.Millisecond)) + " (guest kernel " + h.Kernel + ")", Key: key, Decided: true}
	case <-link.Done():
		_ = v.Wait()
		return tcg("a trial boot under KVM failed (the VM exited" + said() + ")")
	case <-time.After(trialWait):
		return tcg(fmt.Sprintf("a trial boot under KVM did not reach the guest agent in %v (a KVM that cannot run a stock guest kernel)", trialWait))
	case <-ctx.Done():
		return tcg("the trial boot under KVM was cut short: " + ctx.Err().Error())
	}
}

// KernelCmdline is the guest kernel's command line for accel without the sandbox's parameters:
// what a raw boot of the same kernel and initramfs needs to be comparable (test/bench/microvm).
func KernelCmdline(accel string) string { return cmdline(accel, 0, 0, false, false, false) }

// cmdline is the guest kernel's command line. Under TCG the microvm machine needs the TSC
// declared (tsc_early_khz, tsc=reliable), or the kernel hangs calibrating it.
func cmdline(accel string, memory, pids int64, share, writable, net bool) string {
	a := []string{"console=ttyS0", "quiet", "loglevel=3", "panic=-1", "rdinit=" + vm.Arg0,
		"i8042.noaux", "i8042.nokbd", "cryptomgr.notests", "random.trust_cpu=on",
		// Initcalls a sandbox has no use for, and the slowest under TCG (initcall_debug: kprobe
		// tracing's 0.67 s, BPF's devmap 0.13 s).
		"initcall_blacklist=init_kprobe_trace,dev_map_init",
		// Huge pages in a small guest only make the host back 2 MiB for each page touched.
		"transparent_hugepage=never",
		// The agent ends the VM by a reset, through a triple fault: there is no ACPI to power
		// off with (qemu.go), and no keyboard controller.
		"reboot=t"}
	if accel == AccelTCG {
		a = append(a, "tsc_early_khz=2000000", "tsc=reliable")
	}
	if memory > 0 {
		a = append(a, fmt.Sprintf("%s=%d", vm.ParamMemory, memory))
	}
	if pids > 0 {
		a = append(a, fmt.Sprintf("%s=%d", vm.ParamPids, pids))
	}
	if share {
		a = append(a, vm.ParamShare+"=1")
	}
	if writable {
		a = append(a, vm.ParamRW+"=1")
	}
	if net {
		a = append(a, vm.ParamNet+"=1")
	}
	return strings.Join(a, " ")
}

// streamPair is a connected stream socket pair: the host's end of a VM's serial port and the
// VM's.
func streamPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "airlock-serial"), os.NewFile(uintptr(fds[1]), "airlock-serial-vm"), nil
}

// seqPair is a connected SOCK_SEQPACKET pair.
func seqPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "airlock-control"), os.NewFile(uintptr(fds[1]), "airlock-control-init"), nil
}

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
