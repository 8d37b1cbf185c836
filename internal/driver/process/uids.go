package process

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Every sandbox's user namespace maps its ids 0..65535 to a host range of its own, taken from the
// host-wide allocator (internal/uidalloc) when the sandbox is made and freed once nothing runs
// with its ids any more: two sandboxes — of this airlock or of another on the host — never act as
// the same host uid, so one that reaches another's files (through a host path) is a stranger to
// them. The range is one of the sandbox's host facts, so a restarted daemon adopts it with the
// sandbox.

// DefaultUIDRanges is the size of the default pool: 4096 ranges (268 million host ids from
// UIDBase), far more than a host runs sandboxes at once.
const DefaultUIDRanges = 4096

// newUIDPool returns the level's pool of uid ranges, and the instance name its records carry.
func newUIDPool(cfg Config) (*uidalloc.Pool, string, error) {
	dir := cfg.UIDDir
	if dir == "" {
		dir = uidalloc.DefaultDir
	}
	n := cfg.UIDRanges
	if n == 0 {
		n = DefaultUIDRanges
	}
	instance := cfg.Instance
	if instance == "" {
		instance = InstanceOf(cfg.StateDir)
	}
	p, err := uidalloc.New(dir, cfg.UIDBase, n)
	return p, instance, err
}

// InstanceOf names the airlock that keeps its state in dir: a short hash of the path, the same for
// every airlock process on that directory (a daemon and the one-shot runs on its data dir), and
// different for another directory.
func InstanceOf(dir string) string {
	h := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(h[:6])
}

// UIDs is the pool of host uid ranges the levels of this airlock allocate from; nil when it could
// not be set up (the level is then unavailable).
func (d *Driver) UIDs() *uidalloc.Pool { return d.uids }

// Instance names this airlock in the host-wide records it shares with other airlocks.
func (d *Driver) Instance() string { return d.instance }

// uidOwner is sandbox id's entry in the allocator's records.
func (d *Driver) uidOwner(id string) uidalloc.Owner {
	return uidalloc.Owner{Instance: d.instance, Level: sandbox.LevelProcess, Sandbox: id}
}

// UIDLeftovers lists the uid ranges still recorded for sandboxes of level in this airlock, and the
// processes that run with a uid of a range this driver process allocated for level and that no
// other sandbox holds now. With no sandbox of the level alive, both must be empty.
func (d *Driver) UIDLeftovers(level string) []string {
	if d.uids == nil {
		return nil
	}
	var out []string
	d.usedMu.Lock()
	used := make([]uidalloc.Range, 0, len(d.used[level]))
	for b := range d.used[level] {
		used = append(used, uidalloc.Range{Block: b})
	}
	d.usedMu.Unlock()
	held := map[int]bool{}
	for _, rec := range d.uids.Records(func(uidalloc.Record) bool { return true }) {
		held[rec.Block] = true
		if rec.Instance == d.instance && rec.Level == level {
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
func (d *Driver) AllocateUIDs(level, id, hold string) (uidalloc.Range, error) {
	if d.uids == nil {
		return uidalloc.Range{}, fmt.Errorf("uid ranges: %s", d.uidsErr)
	}
	o := d.uidOwner(id)
	o.Level, o.Hold = level, hold
	r, err := d.uids.Allocate(o)
	if err != nil {
		return r, err
	}
	d.usedMu.Lock()
	if d.used[level] == nil {
		d.used[level] = map[int]bool{}
	}
	d.used[level][r.Block] = true
	d.usedMu.Unlock()
	return r, nil
}

// ReleaseUIDs frees the range r of sandbox id of level; nothing may run with its ids any more.
// A failure is logged: the range then stays taken until a sweep finds it free.
func (d *Driver) ReleaseUIDs(level, id string, r uidalloc.Range) {
	o := d.uidOwner(id)
	o.Level = level
	if err := d.uids.Release(r, o); err != nil {
		d.log.Warn("could not free a sandbox's uid range", "sandbox", id, "range", r.String(), "err", err)
	}
}

// ReclaimUIDs frees the ranges recorded for sandbox id of level in which no process runs, after
// the sandbox was reclaimed. A range with a process left stays for a sweep.
func (d *Driver) ReclaimUIDs(level, id string) {
	if d.uids == nil {
		return
	}
	o := d.uidOwner(id)
	o.Level = level
	for _, r := range d.uids.Owned(o) {
		if pids := r.Pids(); len(pids) > 0 {
			d.log.Warn("a reclaimed sandbox's uid range still has processes; a sweep frees it later", "sandbox", id, "range", r.String(), "pids", pids)
			continue
		}
		d.ReleaseUIDs(level, id, r)
	}
}
