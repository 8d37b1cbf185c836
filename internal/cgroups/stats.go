package cgroups

import (
	"fmt"
	"time"
)

// Stats is a snapshot of a cgroup's usage and limit events, covering nested
// child cgroups too. Fields whose controller is unavailable stay zero.
type Stats struct {
	MemoryCurrentBytes int64         // v1 memory.usage_in_bytes; v2 memory.current
	MemoryPeakBytes    int64         // v1 memory.max_usage_in_bytes; v2 memory.peak (5.19+), else current
	CPUUsage           time.Duration // v1 cpuacct.usage; v2 cpu.stat usage_usec
	ThrottledPeriods   int64         // CFS periods in which the quota ran out
	Throttled          time.Duration // total time spent throttled
	Pids               int64         // pids.current
	OOMKills           int64         // processes killed by the OOM killer in this cgroup
	MemoryLimitHits    int64         // v1 memory.failcnt; v2 memory.events "max"
	PidsLimitHits      int64         // forks refused by pids.max (pids.events "max")
}

// Stats reads the cgroup's counters.
func (c *Cgroup) Stats() (Stats, error) {
	var s Stats
	if c.err != nil {
		return s, c.err
	}
	if err := c.memoryStats(&s); err != nil {
		return s, err
	}
	if err := c.cpuStats(&s); err != nil {
		return s, err
	}
	if dir := c.at[pidsCtrl].mount; dir != "" {
		var err error
		if s.Pids, err = c.readInt(dir, "pids.current"); err != nil {
			return s, err
		}
		// On v2 the kernel counts the event in the cgroup whose limit was
		// hit and its ancestors; on v1 only in the cgroup that tried to
		// fork, which may be a nested child, so v1 sums the subtree.
		if s.PidsLimitHits, err = c.eventSum(dir, "pids.events", "max", !c.at[pidsCtrl].v2); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (c *Cgroup) memoryStats(s *Stats) error {
	p := c.at[memoryCtrl]
	if p.mount == "" {
		return nil
	}
	var err error
	if p.v2 {
		if s.MemoryCurrentBytes, err = c.readInt(p.mount, "memory.current"); err != nil {
			return err
		}
		s.MemoryPeakBytes = s.MemoryCurrentBytes
		b, err := c.readOptional(p.mount, "memory.peak")
		if err != nil {
			return err
		}
		if b != nil {
			if s.MemoryPeakBytes, err = parseInt(b); err != nil {
				return fmt.Errorf("cgroup %s: parse %s/memory.peak: %w", c.id, p.mount, err)
			}
		}
		if b, err = c.readFile(p.mount, "memory.events"); err != nil {
			return err
		}
		s.OOMKills, _ = keyed(b, "oom_kill")
		s.MemoryLimitHits, _ = keyed(b, "max")
		return nil
	}
	if s.MemoryCurrentBytes, err = c.readInt(p.mount, "memory.usage_in_bytes"); err != nil {
		return err
	}
	if s.MemoryPeakBytes, err = c.readInt(p.mount, "memory.max_usage_in_bytes"); err != nil {
		return err
	}
	if s.MemoryLimitHits, err = c.readInt(p.mount, "memory.failcnt"); err != nil {
		return err
	}
	// With swap accounting the kernel charges memory+swap first, and a
	// failure there is counted in memsw.failcnt alone, not in failcnt.
	b, err := c.readOptional(p.mount, "memory.memsw.failcnt")
	if err != nil {
		return err
	}
	if b != nil {
		n, err := parseInt(b)
		if err != nil {
			return fmt.Errorf("cgroup %s: parse %s/memory.memsw.failcnt: %w", c.id, p.mount, err)
		}
		s.MemoryLimitHits += n
	}
	// v1 counts an OOM kill only in the victim's own cgroup, which may be
	// a nested child. The oom_kill line exists since 4.13.
	s.OOMKills, err = c.eventSum(p.mount, "memory.oom_control", "oom_kill", true)
	return err
}

// eventSum returns the "key N" value of a flat keyed file in dir, summed
// over all nested child cgroups too when tree is set. A missing file or key
// (an older kernel) counts as zero.
func (c *Cgroup) eventSum(dir, file, key string, tree bool) (int64, error) {
	b, err := c.readOptional(dir, file)
	if err != nil {
		return 0, err
	}
	n, _ := keyed(b, key)
	if !tree {
		return n, nil
	}
	kids, err := subdirs(dir)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: list %s: %w", c.id, dir, err)
	}
	for _, k := range kids {
		m, err := c.eventSum(dir+"/"+k, file, key, true)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

func (c *Cgroup) cpuStats(s *Stats) error {
	acct, cpu := c.at[cpuacctCtrl], c.at[cpuCtrl]
	if acct.mount != "" && !acct.v2 {
		ns, err := c.readInt(acct.mount, "cpuacct.usage")
		if err != nil {
			return err
		}
		s.CPUUsage = time.Duration(ns)
	}
	if cpu.mount != "" && !cpu.v2 {
		b, err := c.readFile(cpu.mount, "cpu.stat")
		if err != nil {
			return err
		}
		s.ThrottledPeriods, _ = keyed(b, "nr_throttled")
		ns, _ := keyed(b, "throttled_time")
		s.Throttled = time.Duration(ns)
	}
	if !acct.v2 && !cpu.v2 {
		return nil
	}
	// On v2 cpu.stat is a core file carrying usage_usec even without the
	// cpu controller; the throttling lines need the controller.
	b, err := c.readFile(c.v2, "cpu.stat")
	if err != nil {
		return err
	}
	if acct.v2 {
		us, _ := keyed(b, "usage_usec")
		s.CPUUsage = time.Duration(us) * time.Microsecond
	}
	if cpu.v2 {
		s.ThrottledPeriods, _ = keyed(b, "nr_throttled")
		us, _ := keyed(b, "throttled_usec")
		s.Throttled = time.Duration(us) * time.Microsecond
	}
	return nil
}

func (c *Cgroup) readFile(dir, file string) ([]byte, error) {
	b, err := readFile(dir + "/" + file)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: read %s/%s: %w", c.id, dir, file, err)
	}
	return b, nil
}

// readOptional is readFile for files newer kernels added; absent gives nil.
func (c *Cgroup) readOptional(dir, file string) ([]byte, error) {
	b, err := readFile(dir + "/" + file)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: read %s/%s: %w", c.id, dir, file, err)
	}
	return b, nil
}

func (c *Cgroup) readInt(dir, file string) (int64, error) {
	b, err := c.readFile(dir, file)
	if err != nil {
		return 0, err
	}
	n, err := parseInt(b)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: parse %s/%s: %w", c.id, dir, file, err)
	}
	return n, nil
}
