package container

import (
	"encoding/json"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// initCaps are what airlock's init needs to lock itself down and then start, and signal,
// commands as the sandbox's user (see pid1's lockdown); no command ever has any.
var initCaps = []string{"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL", "CAP_CHOWN"}

// guestInitCaps are gVisor's: init also mounts the sandbox kernel's pids cgroup (see
// host.Launcher.GuestPids).
var guestInitCaps = append(initCaps[:len(initCaps):len(initCaps)], "CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE")

// maskedPaths and readonlyPaths are Docker's: /proc files about the host's kernel and hardware
// are hidden, and /proc's knobs are read-only.
var (
	maskedPaths = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
		// The host's (under runc): its boot parameters, its boot's id, its physical memory map.
		"/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/iomem"}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// ociSpec is the runtime spec of a sandbox: airlock's init as its process, the root the bundle
// assembled, a fresh /proc and /dev, the cgroup limits, and the namespaces.
func ociSpec(rt *runtime, id, cgroupParent string, spec sandbox.Spec, b *bundle, networked bool, pidsLimit int64, uids uidalloc.Range) *specs.Spec {
	nofile := uint64(spec.Resources.MaxOpenFiles)
	ids := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uids.First(), Size: uidalloc.Size}}
	caps := initCaps
	if rt.name == sandbox.RuntimeRunsc {
		caps = guestInitCaps
	}
	s := &specs.Spec{
		Version:  specs.Version,
		Hostname: guest.Hostname,
		Root:     &specs.Root{Path: b.rootfs},
		Process: &specs.Process{
			Args: []string{"airlock-init"},
			Env:  []string{"PATH=/.airlock", "GOMAXPROCS=1", "GOTRACEBACK=none"},
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile}},
			NoNewPrivileges: true,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=64k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			// gVisor puts a tmpfs of its own on /tmp unless the spec mounts something there: bind
			// the layer's, so /tmp counts toward diskMb on both runtimes.
			{Destination: "/tmp", Type: "bind", Source: filepath.Join(b.base, "tmp"), Options: []string{"rbind", "nosuid", "nodev"}},
			// Shared memory is written memory: it lives in the capped layer.
			{Destination: "/dev/shm", Type: "bind", Source: filepath.Join(b.layer, "shm"), Options: []string{"rbind", "nosuid", "nodev"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/" + cgroupParent + "/" + id,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: ptr(memoryLimit(rt, spec.Resources.MemoryMB<<20))},
				CPU: &specs.LinuxCPU{
					Period: ptr(uint64(100_000)),
					Quota:  ptr(int64(spec.Resources.CPU * 100_000)),
				},
			},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
				{Type: specs.UserNamespace}, {Type: specs.CgroupNamespace},
			},
			UIDMappings:   ids,
			GIDMappings:   ids,
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	if b.control != "" {
		s.Process.Env = append(s.Process.Env, guest.ControlEnv+"="+controlSocket)
	}
	if pidsLimit > 0 {
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: pidsLimit}
	}
	if !networked {
		// Loopback only. (A networked sandbox stays in the namespace airlock made and started
		// the runtime in.)
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	return s
}

func writeSpec(dir string, s *specs.Spec) error {
	b, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

func ptr[T any](v T) *T { return &v }

// memoryLimit is the runtime cgroup's memory limit for a sandbox of memory bytes: gVisor's has
// headroom for its sentry, and airlock enforces the sandbox's own limit inside (see
// host.GuestHeadroom).
func memoryLimit(rt *runtime, memory int64) int64 {
	if rt.name == sandbox.RuntimeRunsc {
		return memory + host.GuestHeadroom(memory)
	}
	return memory
}
