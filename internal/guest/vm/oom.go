package vm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox at its memory limit in its own small guest does not always meet the kernel's OOM
// killer: everything it ran is charged to its cgroup, the host's files it runs from included
// (the share's page cache), so at the limit the kernel keeps reclaiming those pages and reading
// them back, making just enough progress never to declare OOM — a thrash that under TCG lasts
// minutes. The agent ends it as the OOM killer would: when the cgroup sits at its limit and its
// tasks spend most of their time stalled on memory (PSI), it kills the largest process but init.
// Its kills count with the kernel's in the sandbox's OOM kills.

const (
	oomPoll   = 100 * time.Millisecond
	oomWindow = 5              // polls: the stall is measured over half a second
	oomStall  = 0.5            // the share of the window the sandbox's tasks were stalled
	oomNear   = int64(4 << 20) // how close to the limit counts as at it
)

// oomKills counts the processes the agent killed.
var oomKills atomic.Int64

// watchOOM runs until the process ends, killing in the sandbox's cgroup when it thrashes at
// limit (memory bytes). init is never the pick.
func watchOOM(limit int64, init int) {
	if limit <= 0 {
		return
	}
	var stalls []int64 // the cumulative "some" stall, in µs, at each poll
	for range time.Tick(oomPoll) {
		cur := single(filepath.Join(cgroupDir, "memory.current"))
		some := stallTotal(filepath.Join(cgroupDir, "memory.pressure"))
		stalls = append(stalls, some)
		if len(stalls) > oomWindow+1 {
			stalls = stalls[1:]
		}
		if cur < limit-oomNear || len(stalls) <= oomWindow || some < 0 {
			continue
		}
		stalled := float64(stalls[len(stalls)-1]-stalls[0]) / float64(oomWindow*oomPoll.Microseconds())
		if stalled < oomStall {
			continue
		}
		if victim := largest(init); victim > 0 && unix.Kill(victim, unix.SIGKILL) == nil {
			oomKills.Add(1)
			stalls = stalls[:0]
		}
	}
}

// stallTotal is the "some" line's total of a PSI file: µs during which a task was stalled.
func stallTotal(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "some ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return -1
}

// largest is the process of the sandbox's cgroup (and those under it) with the largest
// resident set, but init.
func largest(init int) int {
	best, bestRSS := 0, int64(-1)
	_ = filepath.WalkDir(cgroupDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, s := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(s)
			if pid <= 0 || pid == init {
				continue
			}
			if rss := rssOf(pid); rss > bestRSS {
				best, bestRSS = pid, rss
			}
		}
		return nil
	})
	return best
}

func rssOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}
