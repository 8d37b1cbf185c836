package cgroups

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"golang.org/x/sys/unix"
)

// Resources are the limits Set applies; a zero field means unlimited.
type Resources struct {
	CPU         float64 // vCPUs, enforced as a CFS quota over a 100 ms period
	MemoryBytes int64   // memory limit; swap is capped so it cannot be used to exceed it
	Pids        int64   // maximum number of processes and threads
}

// cfsPeriod is the kernel's default CFS period in µs; using it means a
// fresh v1 cgroup needs only cpu.cfs_quota_us written.
const cfsPeriod = 100000

// Set applies r. On a freshly created cgroup, unlimited fields are skipped
// because the kernel defaults already are unlimited.
func (c *Cgroup) Set(r Resources) error {
	if c.err != nil {
		return c.err
	}
	// The CPU bound keeps the quota arithmetic far from int64 overflow.
	if !(r.CPU >= 0 && r.CPU <= 1<<20) || r.MemoryBytes < 0 || r.Pids < 0 {
		return fmt.Errorf("cgroup %s: invalid resources %+v", c.id, r)
	}
	pristine := c.pristine.Swap(false)
	if r.CPU > 0 || !pristine {
		if err := c.setCPU(r.CPU, pristine); err != nil {
			return err
		}
	}
	if r.MemoryBytes > 0 || !pristine {
		if err := c.setMemory(r.MemoryBytes); err != nil {
			return err
		}
	}
	if r.Pids > 0 || !pristine {
		val := "max"
		if r.Pids > 0 {
			val = strconv.FormatInt(r.Pids, 10)
		}
		if err := c.write(pidsCtrl, "pids.max", val, r.Pids > 0); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroup) setCPU(cpus float64, pristine bool) error {
	quota := int64(-1)
	if cpus > 0 {
		// The kernel rejects quotas below 1 ms.
		quota = max(int64(math.Round(cpus*cfsPeriod)), 1000)
	}
	if c.at[cpuCtrl].v2 {
		val := "max " + strconv.Itoa(cfsPeriod)
		if quota > 0 {
			val = strconv.FormatInt(quota, 10) + " " + strconv.Itoa(cfsPeriod)
		}
		return c.write(cpuCtrl, "cpu.max", val, cpus > 0)
	}
	if !pristine {
		if err := c.write(cpuCtrl, "cpu.cfs_period_us", strconv.Itoa(cfsPeriod), cpus > 0); err != nil {
			return err
		}
	}
	return c.write(cpuCtrl, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10), cpus > 0)
}

func (c *Cgroup) setMemory(limit int64) error {
	if c.at[memoryCtrl].v2 {
		val, swap := "max", "max"
		if limit > 0 {
			val, swap = strconv.FormatInt(limit, 10), "0"
		}
		if err := c.write(memoryCtrl, "memory.max", val, limit > 0); err != nil {
			return err
		}
		// memory.swap.max is absent without swap accounting; then there
		// is no swap to escape into either.
		if err := c.write(memoryCtrl, "memory.swap.max", swap, false); err != nil && !isNotExist(err) {
			return err
		}
		return nil
	}
	// v1 demands memory.limit_in_bytes <= memory.memsw.limit_in_bytes at
	// every step, so the order depends on the direction of the change.
	val := "-1"
	if limit > 0 {
		val = strconv.FormatInt(limit, 10)
	}
	memsw := func() error {
		// memsw files exist only with swap accounting (swapaccount=1).
		err := c.write(memoryCtrl, "memory.memsw.limit_in_bytes", val, false)
		if err != nil && isNotExist(err) {
			return nil
		}
		return err
	}
	if limit <= 0 {
		if err := memsw(); err != nil {
			return err
		}
		return c.write(memoryCtrl, "memory.limit_in_bytes", val, false)
	}
	err := c.write(memoryCtrl, "memory.limit_in_bytes", val, true)
	if errors.Is(err, unix.EINVAL) {
		// Raising the limit above the current memsw limit: memsw first.
		if err := memsw(); err != nil {
			return err
		}
		return c.write(memoryCtrl, "memory.limit_in_bytes", val, true)
	}
	if err != nil {
		return err
	}
	return memsw()
}

// write writes val to file in the directory of controller k. If the
// controller is unavailable, that is an error only when required (a limit
// was asked for), otherwise the write is skipped.
func (c *Cgroup) write(k ctrl, file, val string, required bool) error {
	dir := c.at[k].mount
	if dir == "" {
		if required {
			return fmt.Errorf("cgroup %s: %s controller not available", c.id, k)
		}
		return nil
	}
	p := dir + "/" + file
	if err := writeFile(p, val); err != nil {
		return fmt.Errorf("cgroup %s: write %s: %w", c.id, p, err)
	}
	return nil
}
