package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Largest returns the process with the largest resident set of those /proc lists, skip excepted
// (a process excludes itself), or 0 when there is none. Inside a sandbox, /proc lists the
// sandbox's processes: airlock's init picks the one to kill at the sandbox's memory limit with it.
func Largest(skip int) int {
	ents, _ := os.ReadDir("/proc")
	victim, most := 0, int64(-1)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == skip {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/statm")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		if rss, err := strconv.ParseInt(f[1], 10, 64); err == nil && rss > most {
			victim, most = pid, rss
		}
	}
	return victim
}

// Comm is process pid's command name (/proc/PID/comm), "" when it cannot be read.
func Comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
