package vm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest/vmlink"
)

// stats reads the sandbox's counters in the guest kernel: its cgroup's, and its disk's use.
func stats(p params) vmlink.Stats {
	var s vmlink.Stats
	s.OOMKills = keyed(filepath.Join(cgroupDir, "memory.events"), "oom_kill") + oomKills.Load()
	s.PidsHits = keyed(filepath.Join(cgroupDir, "pids.events"), "max")
	s.Pids = single(filepath.Join(cgroupDir, "pids.current"))
	s.PidsMax = p.pids
	s.MemoryBytes = single(filepath.Join(cgroupDir, "memory.current"))
	s.MemoryPeak = single(filepath.Join(cgroupDir, "memory.peak"))
	s.MemoryMax = p.memory
	if _, ok := p.disks[SerialLayer]; ok {
		var st unix.Statfs_t
		if unix.Statfs(LayerDir, &st) == nil {
			s.DiskTotal = int64(st.Blocks) * st.Bsize
			s.DiskUsed = int64(st.Blocks-st.Bfree) * st.Bsize
			s.DiskFull = st.Bavail*uint64(st.Bsize) < 64<<10
		}
	}
	return s
}

func single(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

func keyed(p, key string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
