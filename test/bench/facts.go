package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
)

// hostFacts are the host properties that move startup numbers the most; printing them next to
// the table keeps results from different machines comparable.
type hostFacts struct {
	Kernel         string `json:"kernel"`
	Cgroup         string `json:"cgroup"`
	RCUExpedited   string `json:"rcu_expedited"`
	NProc          int    `json:"nproc"`
	AirlockVersion string `json:"airlock_version"`
	BwrapVersion   string `json:"bwrap_version"`
	UnshareVersion string `json:"unshare_version"`
}

// Filesystem magics from linux/magic.h: what is mounted at /sys/fs/cgroup tells v1 from v2.
const (
	cgroup2Magic = 0x63677270
	tmpfsMagic   = 0x01021994
)

func gatherFacts(t tools) hostFacts {
	return hostFacts{
		Kernel:         readTrim("/proc/sys/kernel/osrelease"),
		Cgroup:         cgroupLayout(),
		RCUExpedited:   readTrim("/sys/kernel/rcu_expedited"),
		NProc:          runtime.NumCPU(),
		AirlockVersion: firstLine(t.Airlock, "version"),
		BwrapVersion:   firstLine(t.Bwrap, "--version"),
		UnshareVersion: firstLine(t.Unshare, "--version"),
	}
}

// cgroupLayout matters because airlock's cgroup setup costs more on v1: there it writes the
// process into cgroup.procs of each controller hierarchy, and every such move takes
// cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period (shortened by
// /sys/kernel/rcu_expedited, hence that fact too).
func cgroupLayout() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	switch int64(st.Type) {
	case cgroup2Magic:
		return "v2 (unified)"
	case tmpfsMagic:
		var u syscall.Statfs_t
		if syscall.Statfs("/sys/fs/cgroup/unified", &u) == nil && int64(u.Type) == cgroup2Magic {
			return "v1 (hybrid: v2 also at /sys/fs/cgroup/unified)"
		}
		return "v1"
	}
	return "unknown"
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unavailable"
	}
	return strings.TrimSpace(string(b))
}

func firstLine(prog string, args ...string) string {
	out, err := exec.Command(prog, args...).CombinedOutput()
	if err != nil {
		return "unavailable (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}
