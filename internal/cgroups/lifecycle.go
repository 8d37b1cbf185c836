package cgroups

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// Polls start short because freezing and dying usually take tens of
	// microseconds, and back off so a slow cgroup does not burn a CPU.
	minPoll = 50 * time.Microsecond
	maxPoll = 10 * time.Millisecond
	// resweepAfter is how long Kill waits for signalled processes to go
	// before signalling again, in case a pid was missed or reused.
	resweepAfter = 50 * time.Millisecond
	// freezeBudget bounds one freeze attempt inside Kill: a task stuck in
	// an uninterruptible sleep can keep a v1 cgroup FREEZING forever, and
	// killing unfrozen is better than not killing.
	freezeBudget = 100 * time.Millisecond
	// rmdirBudget bounds the EBUSY retries of Destroy, which can happen
	// while the kernel finishes tearing down exited tasks.
	rmdirBudget = time.Second
)

// Freeze stops every process in the cgroup and its children and waits until
// the kernel reports the cgroup frozen (v1 freezer.state FROZEN, v2
// cgroup.events "frozen 1"). If that does not happen before ctx is done the
// cgroup is thawed again and an error returned.
func (c *Cgroup) Freeze(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	if err := c.freeze(ctx); err != nil {
		if terr := c.Thaw(ctx); terr != nil {
			return fmt.Errorf("%w (and thaw failed: %w)", err, terr)
		}
		return err
	}
	return nil
}

func (c *Cgroup) freeze(ctx context.Context) error {
	p := c.at[freezerCtrl]
	if p.v2 {
		if err := c.write(freezerCtrl, "cgroup.freeze", "1", true); err != nil {
			return err
		}
		return c.poll(ctx, "freeze", func() (bool, error) {
			b, err := c.readFile(p.mount, "cgroup.events")
			if err != nil {
				return false, err
			}
			v, _ := keyed(b, "frozen")
			return v == 1, nil
		})
	}
	if err := c.write(freezerCtrl, "freezer.state", "FROZEN", true); err != nil {
		return err
	}
	n := 0
	return c.poll(ctx, "freeze", func() (bool, error) {
		b, err := c.readFile(p.mount, "freezer.state")
		if err != nil {
			return false, err
		}
		if string(bytes.TrimSpace(b)) == "FROZEN" {
			return true, nil
		}
		// Asking again makes the v1 freezer retry tasks it could not
		// freeze on the first pass (runc works around the same stalls).
		if n++; n%8 == 0 {
			return false, c.write(freezerCtrl, "freezer.state", "FROZEN", true)
		}
		return false, nil
	})
}

// Thaw resumes the cgroup's processes.
func (c *Cgroup) Thaw(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	if c.at[freezerCtrl].v2 {
		return c.write(freezerCtrl, "cgroup.freeze", "0", true)
	}
	return c.write(freezerCtrl, "freezer.state", "THAWED", true)
}

// Frozen reports whether the cgroup is frozen (or freezing): a cgroup a previous airlock process
// paused.
func (c *Cgroup) Frozen() (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	p := c.at[freezerCtrl]
	if p.v2 {
		b, err := c.readFile(p.mount, "cgroup.freeze")
		return string(bytes.TrimSpace(b)) == "1", err
	}
	b, err := c.readFile(p.mount, "freezer.state")
	return string(bytes.TrimSpace(b)) != "THAWED", err
}

// Kill kills every process in the cgroup and its nested children and waits,
// bounded by ctx, until none is left. An empty cgroup returns at once. On v2
// with cgroup.kill (5.14+) the kernel does the work atomically; otherwise
// each round freezes the cgroup, SIGKILLs every pid in it and thaws, so
// processes cannot fork or double-fork away between reading and killing.
// Kill refuses to run if the calling process is inside the cgroup.
func (c *Cgroup) Kill(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	pids, err := c.Procs()
	if err != nil || len(pids) == 0 {
		return err
	}
	useKillFile := c.v2 != "" && c.l.v2Kill
	killed := map[int]bool{}
	var lastSweep time.Time
	delay := minPoll
	self := os.Getpid()
	for {
		// Checked before anything else: freezing our own process would
		// hang it, and cgroup.kill would kill it.
		if slices.Contains(pids, self) {
			return fmt.Errorf("cgroup %s: kill: the calling process (pid %d) is inside", c.id, self)
		}
		again := time.Since(lastSweep) > resweepAfter
		for _, p := range pids {
			again = again || !killed[p]
		}
		if again {
			viaFile := false
			if useKillFile {
				// cgroup.kill covers the unified hierarchy only; should a
				// process sit in a v1 hierarchy alone (a half-done AddProc
				// on a hybrid host), later rounds fall back to signals.
				useKillFile = false
				werr := writeFile(c.v2+"/cgroup.kill", "1")
				if werr != nil && !isNotExist(werr) {
					return fmt.Errorf("cgroup %s: write %s/cgroup.kill: %w", c.id, c.v2, werr)
				}
				if viaFile = werr == nil; viaFile {
					for _, p := range pids {
						killed[p] = true
					}
				}
			}
			if !viaFile {
				if err := c.sweep(ctx, killed); err != nil {
					return err
				}
			}
			lastSweep, delay = time.Now(), minPoll
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("cgroup %s: kill: %d processes left: %w", c.id, len(pids), err)
		}
		delay = min(delay*2, maxPoll)
		if pids, err = c.Procs(); err != nil || len(pids) == 0 {
			return err
		}
	}
}

// sweep freezes the cgroup if it can, SIGKILLs every process in it and
// thaws it, recording the signalled pids in killed.
func (c *Cgroup) sweep(ctx context.Context, killed map[int]bool) error {
	canFreeze := c.at[freezerCtrl].mount != ""
	if canFreeze {
		fctx, cancel := context.WithTimeout(ctx, freezeBudget)
		// A failed or slow freeze is tolerated: the signals below still
		// make progress and Kill's loop sweeps again.
		_ = c.freeze(fctx)
		cancel()
	}
	pids, err := c.Procs()
	self := os.Getpid()
	for _, p := range pids {
		if err != nil {
			break
		}
		if p == self {
			err = fmt.Errorf("cgroup %s: kill: the calling process (pid %d) is inside", c.id, p)
			break
		}
		// ESRCH: it exited (or a frozen-then-killed task finished dying).
		if kerr := unix.Kill(p, unix.SIGKILL); kerr != nil && kerr != unix.ESRCH {
			err = fmt.Errorf("cgroup %s: kill %d: %w", c.id, p, kerr)
		}
		killed[p] = true
	}
	if canFreeze {
		// SIGKILLed tasks in a v1 frozen cgroup only die once thawed.
		if terr := c.Thaw(ctx); terr != nil && !isNotExist(terr) && err == nil {
			err = terr
		}
	}
	return err
}

// poll calls done until it reports true, backing off between calls, and
// fails once ctx is done.
func (c *Cgroup) poll(ctx context.Context, what string, done func() (bool, error)) error {
	delay := minPoll
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("cgroup %s: %s: %w", c.id, what, err)
		}
		delay = min(delay*2, maxPoll)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Destroy kills the cgroup's processes and removes its directories in every
// hierarchy, nested children first. A cgroup that is already gone, wholly or
// in some hierarchies, is not an error, so Destroy can be called twice.
func (c *Cgroup) Destroy(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	// Fast path: the kernel refuses to rmdir a cgroup that has processes
	// or children, so a successful rmdir proves that hierarchy empty
	// without reading anything, and an empty sandbox costs one rmdir per
	// hierarchy. The freezer's directory is last in c.dirs, so it is still
	// there for Kill if a hierarchy turns out busy.
	rest := c.dirs
	for len(rest) > 0 {
		err := unix.Rmdir(rest[0])
		if err == unix.EBUSY || err == unix.ENOTEMPTY {
			break
		}
		if err != nil && err != unix.ENOENT {
			return fmt.Errorf("cgroup %s: rmdir %s: %w", c.id, rest[0], err)
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return nil
	}
	if err := c.Kill(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(rmdirBudget)
	for _, dir := range rest {
		if err := c.rmTree(ctx, dir, deadline); err != nil {
			return err
		}
	}
	return nil
}

// rmTree removes dir, trying rmdir first so that the common case (no child
// cgroups) costs one syscall, and removing children only on EBUSY.
func (c *Cgroup) rmTree(ctx context.Context, dir string, deadline time.Time) error {
	delay := minPoll
	for {
		err := unix.Rmdir(dir)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EBUSY && err != unix.ENOTEMPTY {
			return fmt.Errorf("cgroup %s: rmdir %s: %w", c.id, dir, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: rmdir %s: %w", c.id, dir, err)
		}
		kids, lerr := subdirs(dir)
		if lerr != nil {
			return fmt.Errorf("cgroup %s: list %s: %w", c.id, dir, lerr)
		}
		for _, k := range kids {
			if err := c.rmTree(ctx, dir+"/"+k, deadline); err != nil {
				return err
			}
		}
		if len(kids) > 0 {
			continue
		}
		if serr := sleepCtx(ctx, delay); serr != nil {
			return fmt.Errorf("cgroup %s: rmdir %s: %w (%w)", c.id, dir, err, serr)
		}
		delay = min(delay*2, maxPoll)
	}
}
