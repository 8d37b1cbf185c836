package host

import (
	"fmt"
	"os"
	"strings"

	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Every sandbox's user namespace maps its ids 0..65535 to a host range of its own, taken from the
// host-wide allocator (internal/uidalloc) when the sandbox is made and freed once nothing runs
// with its ids any more: two sandboxes — of this airlock or of another on the host — never act as
// the same host uid, so one that reaches another's files (through a host path) is a stranger to
// them. The range is one of the sandbox's host facts, so a restarted daemon adopts it with the
// sandbox.

// newUIDPool returns the pool of uid ranges, and the instance name its records carry.
func newUIDPool(cfg Config) (*uidalloc.Pool, string, error) {
	dir := cfg.UIDDir
	if dir == "" {
		dir = uidalloc.DefaultDir
	}
	n := cfg.UIDRanges
	if n == 0 {
		n = uidalloc.DefaultRanges
	}
	instance := cfg.Instance
	if instance == "" {
		instance = uidalloc.InstanceOf(cfg.StateDir)
	}
	p, err := uidalloc.New(dir, cfg.UIDBase, n)
	return p, instance, err
}

// UIDs is the pool of host uid ranges the levels of this airlock allocate from; nil when it could
// not be set up (Checks says why).
func (rt *Runtime) UIDs() *uidalloc.Pool { return rt.uids }

// Instance names this airlock in the host-wide records it shares with other airlocks.
func (rt *Runtime) Instance() string { return rt.instance }

// uidOwner is the entry of sandbox id of level in the allocator's records.
func (rt *Runtime) uidOwner(level, id string) uidalloc.Owner {
	return uidalloc.Owner{Instance: rt.instance, Level: level, Sandbox: id}
}

// UIDLeftovers lists the uid ranges still recorded for sandboxes of level in this airlock, and the
// processes that run with a uid of a range this airlock process allocated for level and that no
// other sandbox holds now. With no sandbox of the level alive, both must be empty.
func (rt *Runtime) UIDLeftovers(level string) []string {
	if rt.uids == nil {
		return nil
	}
	var out []string
	rt.usedMu.Lock()
	used := make([]uidalloc.Range, 0, len(rt.used[level]))
	for b := range rt.used[level] {
		used = append(used, uidalloc.Range{Block: b})
	}
	rt.usedMu.Unlock()
	held := map[int]bool{}
	for _, rec := range rt.uids.Records(func(uidalloc.Record) bool { return true }) {
		held[rec.Block] = true
		if rec.Instance == rt.instance && rec.Level == level {
			out = append(out, fmt.Sprintf("uid range %v of sandbox %s", rec.Range, rec.Sandbox))
		}
	}
	for _, r := range used {
		if held[r.Block] {
			continue // listed above, or another airlock's sandbox runs in it now
		}
		for _, pid := range r.Pids() {
			out = append(out, fmt.Sprintf("process %d (%s) in uid range %v", pid, procfs.Comm(pid), r))
		}
	}
	return out
}

// AllocateUIDs takes a range for sandbox id of level, its record kept while hold (if not "")
// exists.
func (rt *Runtime) AllocateUIDs(level, id, hold string) (uidalloc.Range, error) {
	if rt.uids == nil {
		return uidalloc.Range{}, fmt.Errorf("uid ranges: %w", rt.uidsErr)
	}
	o := rt.uidOwner(level, id)
	o.Hold = hold
	r, err := rt.uids.Allocate(o)
	if err != nil {
		return r, err
	}
	rt.usedMu.Lock()
	if rt.used[level] == nil {
		rt.used[level] = map[int]bool{}
	}
	rt.used[level][r.Block] = true
	rt.usedMu.Unlock()
	return r, nil
}

// ReleaseUIDs frees the range r of sandbox id of level; nothing may run with its ids any more.
// A failure is logged: the range then stays taken until a sweep finds it free.
func (rt *Runtime) ReleaseUIDs(level, id string, r uidalloc.Range) {
	o := rt.uidOwner(level, id)
	if err := rt.uids.Release(r, o); err != nil {
		rt.log.Warn("could not free a sandbox's uid range", "sandbox", id, "range", r.String(), "err", err)
	}
}

// ReclaimUIDs frees the ranges recorded for sandbox id of level in which no process runs, after
// the sandbox was reclaimed. A range with a process left stays for a sweep.
func (rt *Runtime) ReclaimUIDs(level, id string) {
	if rt.uids == nil {
		return
	}
	o := rt.uidOwner(level, id)
	for _, r := range rt.uids.Owned(o) {
		if pids := r.Pids(); len(pids) > 0 {
			rt.log.Warn("a reclaimed sandbox's uid range still has processes; a sweep frees it later", "sandbox", id, "range", r.String(), "pids", pids)
			continue
		}
		rt.ReleaseUIDs(level, id, r)
	}
}

// AdoptUIDs makes this process the holder of range r of sandbox id of level, whose init (pid) a
// gone airlock process started, after checking that init's user namespace maps exactly that range.
func (rt *Runtime) AdoptUIDs(level, id string, pid int, r uidalloc.Range) error {
	m, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
	if want := fmt.Sprint(0, r.First(), uidalloc.Size); err != nil || strings.Join(strings.Fields(string(m)), " ") != want {
		return fmt.Errorf("sandbox %s: init's uid map is %q, not the recorded %q", id, strings.TrimSpace(string(m)), want)
	}
	return rt.AdoptUIDRange(level, id, r)
}

// AdoptUIDRange makes this process the holder of range r of sandbox id of level, whose level
// checked that the sandbox's processes are that range's (a VM's VMM runs as its first uid, with
// no user namespace).
func (rt *Runtime) AdoptUIDRange(level, id string, r uidalloc.Range) error {
	if rt.uids == nil {
		return fmt.Errorf("sandbox %s: uid ranges: %w", id, rt.uidsErr)
	}
	if err := rt.uids.Adopt(r, rt.uidOwner(level, id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	rt.usedMu.Lock()
	if rt.used[level] == nil {
		rt.used[level] = map[int]bool{}
	}
	rt.used[level][r.Block] = true
	rt.usedMu.Unlock()
	return nil
}
