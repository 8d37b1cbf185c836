// Command microvm measures the microvm isolation level, side by side in one run:
//
//   - boot to ready (cold): the level's Create of a default sandbox (disk made and formatted,
//     VMM jailed and started, guest kernel booted, the guest agent's images, share and disk,
//     init's root built and locked down, ready for an exec) against a raw
//     `qemu-system-x86_64 -M microvm` boot of the same kernel and the same initramfs (the same
//     agent) until the agent's hello arrives on the serial port — no jail, disk or share. The
//     rounds alternate the two in a random order, so drift of the host lands on both. Targets
//     (issue 26, under TCG): p50 ≤ 2.5 s, and airlock/raw ≤ 1.2.
//   - exec round trip on a ready sandbox: `true` and `python3 -c 'print(1)'`, microvm beside the
//     process level, with the factor.
//   - memory per idle VM: the QEMU process's RSS after the sandbox is ready and has idled.
//   - restore from a memory snapshot: the level's Restore of a VM saved with its memory (a
//     counter running in it), until the restored sandbox is ready for an exec. Target ≤ 1 s
//     under TCG.
//   - claim from a warm pool through the daemon: `airlock serve` (the binary -airlock) with a
//     pool of microvm sandboxes; a create through the Go SDK that the pool answers, on the
//     clock until the sandbox is returned ready; the pool refills off the clock. Target ≤ 20 ms.
//
// A missed target is printed as NOT MET; only errors exit non-zero. As root, from the
// repository root (this program is itself every VM's /init, so it is built static, as make does):
//
//	CGO_ENABLED=0 go run ./test/bench/microvm [-n 10] [-execs 20] [-airlock bin/airlock] [-kernel-dir DIR] [-json FILE]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/entry"
	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/test/bench/stats"
)

const (
	targetBootP50    = 2500.0 // ms, under TCG
	targetRatio      = 1.2
	targetRestoreP50 = 1000.0 // ms, under TCG
	targetClaimP50   = 20.0   // ms
)

func main() {
	entry.Roles()
	n := flag.Int("n", 10, "boot rounds (each: one airlock create, one raw qemu boot)")
	execs := flag.Int("execs", 20, "exec round trips per command and level")
	jsonOut := flag.String("json", "", "write the figures as JSON to this file")
	airlock := flag.String("airlock", "bin/airlock", "the airlock binary the daemon of the pool measure runs (make build)")
	kernelDir := flag.String("kernel-dir", "", "the guest kernel's directory (default: the configuration's)")
	flag.Parse()
	if err := run(*n, *execs, *airlock, *kernelDir, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "bench microvm:", err)
		os.Exit(1)
	}
}

type report struct {
	Accelerator string                   `json:"accelerator"`
	Boot        map[string]stats.Summary `json:"boot"`
	BootRatio   float64                  `json:"bootRatioP50"`
	Exec        map[string]stats.Summary `json:"exec"`
	IdleRSSMB   float64                  `json:"idleVmmRssMb"`
	Restore     stats.Summary            `json:"restoreWithMemory"`
	RestoreMB   float64                  `json:"memoryImageMb"`
	Claim       stats.Summary            `json:"poolClaim"`
}

func run(n, execs int, airlock, kernelDir, jsonOut string) error {
	data, err := os.MkdirTemp("", "airlock-bench-microvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	cfg := levels.Default()
	cfg.DataDir = data
	if kernelDir != "" {
		cfg.MicroVM.KernelDir = kernelDir
	}
	// The guests run airlock-guest, as the daemon's do with make build's binaries.
	if cfg.MicroVM.GuestBinary, err = filepath.Abs(filepath.Join(filepath.Dir(airlock), microvm.GuestName)); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := levels.Registry(cfg, nil, nil, log)
	mv, err := reg.Lookup(sandbox.LevelMicroVM)
	if err != nil {
		return err
	}
	proc, err := reg.Lookup(sandbox.LevelProcess)
	if err != nil {
		return err
	}
	d := mv.(*microvm.Driver)
	defer os.RemoveAll(d.StateDir())

	// The root images (the host template's is made once for the host, about a minute here)
	// and a first sandbox outside the clock: the initramfs is built and the accelerator decided.
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err = d.WarmImages(wctx)
	cancel()
	if err != nil {
		return fmt.Errorf("root images: %w", err)
	}
	first, err := create(d)
	if err != nil {
		return fmt.Errorf("first sandbox: %w", err)
	}
	_ = first.Destroy(context.Background())
	caps := d.Capabilities()
	accel := ""
	for _, f := range caps.Features {
		if a, ok := strings.CutPrefix(f, "accelerator:"); ok {
			accel = a
		}
	}
	initrd := d.Initramfs()
	if initrd == "" {
		return fmt.Errorf("no initramfs in %s", d.StateDir())
	}
	qemuPath, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return err
	}
	fmt.Printf("microvm boot to ready, %d rounds, accelerator %s, load %s\n", n, accel, loadavg())
	var air, raw []time.Duration
	for i := 0; i < n; i++ {
		order := []string{"airlock", "raw"}
		if rand.IntN(2) == 0 {
			order = []string{"raw", "airlock"}
		}
		for _, who := range order {
			if who == "raw" {
				t, err := rawBoot(qemuPath, accel, cfg.MicroVM.KernelDir, initrd)
				if err != nil {
					return fmt.Errorf("raw boot: %w", err)
				}
				raw = append(raw, t)
				continue
			}
			t0 := time.Now()
			sb, err := create(d)
			if err != nil {
				return err
			}
			air = append(air, time.Since(t0))
			if err := sb.Destroy(context.Background()); err != nil {
				return err
			}
		}
	}
	r := report{Accelerator: accel, Boot: map[string]stats.Summary{"airlock": stats.Summarize(air), "raw qemu": stats.Summarize(raw)}, Exec: map[string]stats.Summary{}}
	r.BootRatio = r.Boot["airlock"].P50 / r.Boot["raw qemu"].P50
	fmt.Printf("  %-10s p50 %7.0f ms  p90 %7.0f ms  min %7.0f ms\n", "airlock", r.Boot["airlock"].P50, r.Boot["airlock"].P90, r.Boot["airlock"].Min)
	fmt.Printf("  %-10s p50 %7.0f ms  p90 %7.0f ms  min %7.0f ms\n", "raw qemu", r.Boot["raw qemu"].P50, r.Boot["raw qemu"].P90, r.Boot["raw qemu"].Min)
	fmt.Printf("  boot p50 %.0f ms (target ≤ %.0f: %s), airlock/raw %.2f (target ≤ %.1f: %s)\n",
		r.Boot["airlock"].P50, targetBootP50, met(r.Boot["airlock"].P50 <= targetBootP50), r.BootRatio, targetRatio, met(r.BootRatio <= targetRatio))

	// Exec round trips on ready sandboxes of both levels.
	vmSb, err := create(d)
	if err != nil {
		return err
	}
	defer func() { _ = vmSb.Destroy(context.Background()) }()
	procSb, err := createOn(proc)
	if err != nil {
		return err
	}
	defer func() { _ = procSb.Destroy(context.Background()) }()
	for _, c := range []struct{ name, cmd string }{{"true", "true"}, {"python3 print(1)", "python3 -c 'print(1)'"}} {
		for _, lv := range []struct {
			name string
			sb   driver.Sandbox
		}{{"microvm", vmSb}, {"process", procSb}} {
			var ts []time.Duration
			for i := 0; i < execs+2; i++ {
				t, err := execOnce(lv.sb, c.cmd)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", c.name, lv.name, err)
				}
				if i >= 2 { // two warm-ups
					ts = append(ts, t)
				}
			}
			r.Exec[c.name+" on "+lv.name] = stats.Summarize(ts)
		}
		vmP, prP := r.Exec[c.name+" on microvm"].P50, r.Exec[c.name+" on process"].P50
		fmt.Printf("exec %-18s microvm p50 %7.1f ms  process p50 %6.1f ms  factor %.1f×\n", c.name, vmP, prP, vmP/prP)
	}
	time.Sleep(3 * time.Second)
	r.IdleRSSMB = float64(rssKiB(vmSb.(*microvm.Sandbox).VMMPid())) / 1024
	fmt.Printf("memory of an idle VM: QEMU RSS %.0f MiB (default memoryMb 2048)\n", r.IdleRSSMB)

	restores, size, err := measureRestore(d, n)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	r.Restore, r.RestoreMB = stats.Summarize(restores), float64(size)/(1<<20)
	fmt.Printf("restore with memory (%.0f MiB saved), %d rounds: p50 %7.0f ms  p90 %7.0f ms  min %7.0f ms (target ≤ %.0f: %s)\n",
		r.RestoreMB, len(restores), r.Restore.P50, r.Restore.P90, r.Restore.Min, targetRestoreP50, met(r.Restore.P50 <= targetRestoreP50))

	claims, err := measureClaims(airlock, cfg.MicroVM.KernelDir, n)
	if err != nil {
		return fmt.Errorf("pool claims: %w", err)
	}
	r.Claim = stats.Summarize(claims)
	fmt.Printf("claim from a warm pool through the daemon, %d rounds: p50 %6.1f ms  p90 %6.1f ms  min %6.1f ms (target ≤ %.0f: %s)\n",
		len(claims), r.Claim.P50, r.Claim.P90, r.Claim.Min, targetClaimP50, met(r.Claim.P50 <= targetClaimP50))
	if jsonOut != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		return os.WriteFile(jsonOut, b, 0o644)
	}
	return nil
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

func create(d driver.Driver) (driver.Sandbox, error) { return createOn(d) }

func createOn(d driver.Driver) (driver.Sandbox, error) {
	spec := sandbox.Spec{Isolation: d.Name()}
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return d.Create(ctx, sandbox.NewID("sbx_"), spec)
}

func execOnce(sb driver.Sandbox, cmd string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{"/bin/sh", "-c", cmd}, Capture: true})
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	return time.Since(t0), nil
}

// rawBoot boots the kernel and initramfs with QEMU directly and times it to the agent's hello.
func rawBoot(qemu, accel, kernelDir, initrd string) (time.Duration, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	hostEnd, vmEnd := os.NewFile(uintptr(fds[0]), "serial"), os.NewFile(uintptr(fds[1]), "serial-vm")
	seq, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	ctlHost, ctlInit := os.NewFile(uintptr(seq[0]), "ctl"), os.NewFile(uintptr(seq[1]), "ctl-init")
	defer ctlHost.Close()
	a, c := "tcg,thread=multi,tb-size=64", "max"
	if accel == microvm.AccelKVM {
		a, c = "kvm", "host"
	}
	cmdline := microvm.KernelCmdline(accel)
	cmd := exec.Command(qemu, "-M", microvm.Machine, "-accel", a, "-cpu", c,
		"-smp", "1", "-m", strconv.Itoa(2048+160), "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", filepath.Join(kernelDir, "vmlinux"), "-initrd", initrd, "-append", cmdline,
		"-device", "virtio-serial-device", "-chardev", "socket,id=ctl,fd=3", "-device", "virtserialport,chardev=ctl,name="+vm.PortName)
	cmd.ExtraFiles = []*os.File{vmEnd}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	vmEnd.Close()
	link, err := vmlink.NewHost(hostEnd, ctlInit)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, err
	}
	defer func() {
		link.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	select {
	case <-link.Hello():
		return time.Since(t0), nil
	case <-link.Done():
		return 0, fmt.Errorf("the VM ended before its agent said hello")
	case <-time.After(60 * time.Second):
		return 0, fmt.Errorf("no hello in 60 s")
	}
}

func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
