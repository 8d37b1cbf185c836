package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/uidalloc"
)

// rawGlobal are airlock's global flags for each runtime, with the benchmark's own state dir.
func (w *world) rawGlobal(rt string) []string {
	args := []string{"--root", w.path("raw-root", rt)}
	if rt == "runsc" {
		args = append(args, "--platform", "systrap", "--network", "none", "--overlay2", "none", "--host-uds", "open")
	}
	return args
}

func rtPath(rt string) string {
	if rt == "runsc" {
		return runscPath
	}
	return runcPath
}

// rawRunner runs a new container of the bundle in the foreground and, if the runtime left state
// behind, deletes it, all on the clock.
func (w *world) rawRunner(rt, bundle, want string) runner {
	name := "raw-" + rt
	return runner{Name: name, run: func() (time.Duration, error) {
		id := fmt.Sprintf("rawbench-%s-%d", rt, w.id.Add(1))
		argv := append([]string{rtPath(rt)}, w.rawGlobal(rt)...)
		argv = append(argv, "run", "--bundle", bundle)
		if rt == "runc" {
			argv = append(argv, "--no-new-keyring")
		}
		argv = append(argv, id)
		start := time.Now()
		_, _, err := w.timed(name, argv, want)
		if err == nil && w.rawKnown(rt, id) {
			w.rawDeletes.Add(1)
			del := append(append([]string{rtPath(rt)}, w.rawGlobal(rt)...), "delete", "--force", id)
			if out, derr := exec.Command(del[0], del[1:]...).CombinedOutput(); derr != nil {
				err = fmt.Errorf("%s: %w: %s", strings.Join(del, " "), derr, out)
			}
		}
		return time.Since(start), err
	}}
}

// rawKnown reports whether the runtime still has state for container id (runc keeps a
// directory per container, runsc files named after it).
func (w *world) rawKnown(rt, id string) bool {
	m, _ := filepath.Glob(filepath.Join(w.path("raw-root", rt), "*"+id+"*"))
	return len(m) > 0
}

// rawBundle prepares, once, a bundle that runs wl directly: the host's /usr bound read-only
// with the merged-/usr links, a minimal /etc, and a spec like airlock's for runtime rt.
func (w *world) rawBundle(rt string, wl workload) (string, error) {
	dir := w.path("raw", rt+"-"+wl.Name)
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"usr", "etc", "proc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if t, err := os.Readlink("/" + l); err == nil {
			if err := os.Symlink(t, filepath.Join(root, l)); err != nil {
				return "", err
			}
		}
	}
	for _, f := range []string{"ld.so.cache", "passwd", "group"} {
		b, err := os.ReadFile("/etc/" + f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(root, "etc", f), b, 0o644); err != nil {
			return "", err
		}
	}
	usr := filepath.Join(root, "usr")
	if err := unix.Mount("/usr", usr, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("bind /usr: %w", err)
	}
	if err := unix.Mount("", usr, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return "", fmt.Errorf("remount /usr read-only: %w", err)
	}
	b, err := json.MarshalIndent(rawSpec(rt, root, wl.Argv, w.uids), "", "\t")
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
}

// rawSpec is internal/driver/container's spec with the workload as the process instead of
// airlock's init: same namespaces and id mapping, cgroup limits, rlimit, masked and read-only
// paths, no capabilities, no new privileges, the sandbox user. The differences are the ones a
// hand-written bundle has: /tmp and /dev/shm are the runtime's tmpfs rather than a bind of a
// host-side layer capped at diskMb; the root is the bundle's directory rather than a tmpfs
// layer; there is no seccomp filter (airlock's init installs its own).
func rawSpec(rt, root string, argv []string, uids uidalloc.Range) *specs.Spec {
	m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uids.First(), Size: uidalloc.Size}}
	s := &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: root, Readonly: true},
		Process: &specs.Process{
			Args:            argv,
			Env:             []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"},
			Cwd:             "/",
			User:            specs.User{UID: agentUID, GID: agentUID},
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile}},
			NoNewPrivileges: true,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=64k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "nodev", "noexec", "mode=1777"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/" + rawCgroup + "/" + rt,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: ptr(int64(memoryMB) << 20)},
				CPU:    &specs.LinuxCPU{Period: ptr(uint64(100_000)), Quota: ptr(int64(cpuQuota))},
			},
			// airlock's container level maps ids on both runtimes (container.runtime.userns).
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace}, {Type: specs.UserNamespace}, {Type: specs.CgroupNamespace},
			},
			UIDMappings: m, GIDMappings: m,
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	if rt == "runc" {
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: maxProcs}
	}
	return s
}

func ptr[T any](v T) *T { return &v }
