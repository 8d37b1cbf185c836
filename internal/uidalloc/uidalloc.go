// Package uidalloc hands out host uid ranges: 65536 host uids (and the same gids) to every live
// sandbox, disjoint across every airlock process on the host — daemons and one-shot runs alike —
// so that no two sandboxes ever act as the same host uid.
//
// The allocation lives on the host, not in any one airlock: one record file per range in a
// directory on tmpfs (DefaultDir), created with an exclusive link, so that two processes can never
// both take a range, and gone at reboot, when no sandbox survives either. The record names its
// owner (the airlock instance, the level, the sandbox, and the airlock process with its start
// time). Ranges are blocks of Size ids aligned to Size, named by their block number, so that
// airlocks configured with different pools still agree on which ids a record covers.
//
// Release frees a range when its sandbox is gone; Adopt makes a restarted daemon the owner of its
// sandboxes' ranges again; Sweep frees the ranges whose owner process is gone and in which no
// process runs any more (nor does the owner's hold path exist).
package uidalloc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/procfs"
)

// Size is the number of ids in a range: a sandbox's ids 0..65535.
const Size = 65536

// DefaultBase is where the default pool starts: host id 2000000000, far above the ids of any
// host's users.
const DefaultBase = 2_000_000_000

// DefaultRanges is the size of the default pool: 4096 ranges (268 million host ids from the
// base), far more than a host runs sandboxes at once.
const DefaultRanges = 4096

// InstanceOf names the airlock that keeps its state in dir: a short hash of the path, the same for
// every airlock process on that directory (a daemon and the one-shot runs on its data dir), and
// different for another directory. Records name their owner's instance (Owner.Instance).
func InstanceOf(dir string) string {
	h := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(h[:6])
}

// DefaultDir is where every airlock on a host keeps its records. It must be the same directory for
// all of them (that is what makes their ranges disjoint) and on a file system that a reboot
// empties.
const DefaultDir = "/run/airlock/uids"

// maxBlock is the last block a pool may use: the one after it would hold uid 2^32-1, which the
// kernel reserves (-1, "no id").
const maxBlock = 1<<32/Size - 2

// Range is one block of Size host ids: sandbox id n is host id First()+n.
type Range struct {
	Block int `json:"block"`
}

// First is the range's first host id, the one sandbox id 0 maps to.
func (r Range) First() uint32 { return uint32(r.Block) * Size }

// HostID is the host id of sandbox id id.
func (r Range) HostID(id int) int { return int(r.First()) + id }

// SandboxID is the sandbox id of host id host, if the range holds it.
func (r Range) SandboxID(host int) (int, bool) {
	id := host - int(r.First())
	return id, id >= 0 && id < Size
}

// Pids returns the host processes (zombies aside) with a uid in the range.
func (r Range) Pids() []int {
	var live []int
	for _, pid := range procfs.PidsInUIDRange(uint64(r.First()), uint64(r.First())+Size) {
		if !procfs.Zombie(pid) {
			live = append(live, pid)
		}
	}
	return live
}

func (r Range) String() string {
	return fmt.Sprintf("%d-%d", r.First(), uint64(r.First())+Size-1)
}

// Owner says whose a range is.
type Owner struct {
	// Instance names the airlock (a daemon and the one-shot runs on its data dir).
	Instance string `json:"instance"`
	// Level and Sandbox name the sandbox (its level instance id) within it.
	Level   string `json:"level"`
	Sandbox string `json:"sandbox"`
	// Hold, when set, is a path whose existence keeps the range in use even after its owner
	// process is gone (a container's bundle, which holds files of the range's ids until it is
	// reclaimed).
	Hold string `json:"hold,omitempty"`
}

// Record is a range's record: its owner, and the airlock process that holds it for the owner.
type Record struct {
	Range
	Owner
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"` // the process's start time (procfs.StartTime)
}

// same reports whether rec is o's.
func (rec Record) same(o Owner) bool {
	return rec.Instance == o.Instance && rec.Level == o.Level && rec.Sandbox == o.Sandbox
}

// ErrExhausted is returned when every range of a pool is in use.
var ErrExhausted = fmt.Errorf("every host uid range of the pool is in use: %w", errdefs.ErrServiceUnavailable)

// Pool is the ranges an airlock allocates from: blocks first..first+n-1, within the records of
// the host's directory (which other airlocks' pools may share or overlap).
type Pool struct {
	dir   string
	first int
	n     int
	pid   int
	start uint64 // this process's start time
}

// New returns the pool of ranges ranges starting at the first block at or above host id base, with
// its records in dir.
func New(dir string, base uint32, ranges int) (*Pool, error) {
	if err := Check(base, ranges); err != nil {
		return nil, err
	}
	first := firstBlock(base)
	start, err := procfs.StartTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("uid pool: %w", err)
	}
	return &Pool{dir: dir, first: first, n: ranges, pid: os.Getpid(), start: start}, nil
}

// Check says whether a pool of ranges ranges from host id base fits the host's ids.
func Check(base uint32, ranges int) error {
	first := firstBlock(base)
	if base < Size {
		return fmt.Errorf("uid pool: base %d: host ids 0-65535 are never mapped into a sandbox", base)
	}
	if ranges < 1 || first+ranges-1 > maxBlock {
		return fmt.Errorf("uid pool: %d ranges from host id %d do not fit below 2^32-1 (at most %d)", ranges, first*Size, max(maxBlock-first+1, 0))
	}
	return nil
}

// firstBlock is the first block at or above host id base.
func firstBlock(base uint32) int { return int((uint64(base) + Size - 1) / Size) }

// Dir is the directory of the records.
func (p *Pool) Dir() string { return p.dir }

func (p *Pool) path(r Range) string { return filepath.Join(p.dir, strconv.Itoa(r.Block)) }

// Allocate takes a free range of the pool for o. It tries the blocks from a random one on, so that
// a range just freed is seldom handed out again at once; when all are taken it sweeps once and
// tries again, then fails with ErrExhausted.
func (p *Pool) Allocate(o Owner) (Range, error) {
	if err := p.mkdir(); err != nil {
		return Range{}, err
	}
	for try := 0; try < 2; try++ {
		if try > 0 && len(p.Sweep()) == 0 {
			break
		}
		from := rand.IntN(p.n)
		for i := range p.n {
			r := Range{Block: p.first + (from+i)%p.n}
			err := p.create(r, o)
			if err == nil {
				return r, nil
			}
			if !errors.Is(err, fs.ErrExist) {
				return Range{}, fmt.Errorf("uid pool: %w", err)
			}
		}
	}
	return Range{}, fmt.Errorf("%d ranges from host id %d: %w", p.n, p.first*Size, ErrExhausted)
}

// mkdir makes the records' directory (0700) and its missing parents 0711: /run/airlock is also
// where the container level keeps its bundles, which runc's user-namespace root must be able to
// pass through.
func (p *Pool) mkdir() error {
	if _, err := os.Stat(p.dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p.dir), 0o711); err != nil {
		return fmt.Errorf("uid pool: %w", err)
	}
	if err := os.Mkdir(p.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("uid pool: %w", err)
	}
	return nil
}

// create makes r's record for o, failing with fs.ErrExist if r has one: the record is written
// whole under a temporary name, then linked to its own, which no two processes can both do.
func (p *Pool) create(r Range, o Owner) error {
	tmp, err := p.writeTemp(r, o)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Link(tmp, p.path(r))
}

// writeTemp writes r's record for o, held by this process, to a temporary file of the directory.
func (p *Pool) writeTemp(r Range, o Owner) (string, error) {
	b, err := json.Marshal(Record{Range: r, Owner: o, Pid: p.pid, Start: p.start})
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(p.dir, ".new-")
	if err != nil {
		return "", err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// Adopt makes this process the holder of range r for o, whose airlock process is gone (a
// restarted daemon taking its sandboxes over). It fails if the range is another owner's; a
// missing record (the directory was emptied) is made again.
func (p *Pool) Adopt(r Range, o Owner) error {
	if err := p.mkdir(); err != nil {
		return err
	}
	unlock, err := p.lock()
	if err != nil {
		return err
	}
	defer unlock()
	rec, _, err := p.read(r)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := p.create(r, o); err != nil {
			return fmt.Errorf("uid range %v: %w", r, err)
		}
		return nil
	case err != nil:
		return err
	case !rec.same(o):
		return fmt.Errorf("uid range %v belongs to sandbox %s of airlock %s, not %s: %w", r, rec.Sandbox, rec.Instance, o.Sandbox, errdefs.ErrConflict)
	}
	tmp, err := p.writeTemp(r, o)
	if err != nil {
		return fmt.Errorf("uid range %v: %w", r, err)
	}
	if err := os.Rename(tmp, p.path(r)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("uid range %v: %w", r, err)
	}
	return nil
}

// Release frees range r, if it is o's. Its sandbox must be gone: nothing may run with its ids.
func (p *Pool) Release(r Range, o Owner) error {
	unlock, err := p.lock()
	if err != nil {
		return err
	}
	defer unlock()
	rec, _, err := p.read(r)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !rec.same(o) {
		return fmt.Errorf("uid range %v belongs to sandbox %s of airlock %s, not %s: %w", r, rec.Sandbox, rec.Instance, o.Sandbox, errdefs.ErrConflict)
	}
	if err := os.Remove(p.path(r)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("uid range %v: %w", r, err)
	}
	return nil
}

// Records returns the host's records (of every airlock) that match keep.
func (p *Pool) Records(keep func(Record) bool) []Record { return Records(p.dir, keep) }

// Records returns the records in dir that match keep.
func Records(dir string, keep func(Record) bool) []Record {
	p := &Pool{dir: dir}
	ents, _ := os.ReadDir(dir)
	var out []Record
	for _, e := range ents {
		b, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		rec, _, err := p.read(Range{Block: b})
		if err == nil && keep(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// Owned returns the ranges recorded for sandbox o.
func (p *Pool) Owned(o Owner) []Range {
	var out []Range
	for _, rec := range p.Records(func(rec Record) bool { return rec.same(o) }) {
		out = append(out, rec.Range)
	}
	return out
}

// Sweep frees the ranges of the host (whatever pool allocated them) that nobody holds: their
// holder process is gone, no process runs with a uid of theirs, and their hold path, if any, does
// not exist. It returns them.
func (p *Pool) Sweep() []Range {
	var candidates []Record
	raw := map[int][]byte{}
	ents, _ := os.ReadDir(p.dir)
	for _, e := range ents {
		b, err := strconv.Atoi(e.Name())
		if err != nil {
			// A record being written whose writer died before it removed it.
			if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), ".new-") && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(filepath.Join(p.dir, e.Name()))
			}
			continue
		}
		rec, data, err := p.read(Range{Block: b})
		if err != nil || procfs.Alive(rec.Pid, rec.Start) || len(rec.Pids()) > 0 {
			continue
		}
		if rec.Hold != "" {
			if _, err := os.Lstat(rec.Hold); err == nil {
				continue
			}
		}
		candidates = append(candidates, rec)
		raw[b] = data
	}
	if len(candidates) == 0 {
		return nil
	}
	unlock, err := p.lock()
	if err != nil {
		return nil
	}
	defer unlock()
	var freed []Range
	for _, rec := range candidates {
		// Still the record examined: not adopted meanwhile (a release or an adoption is the
		// only change a record of a gone holder can see, and both take the lock).
		if _, data, err := p.read(rec.Range); err != nil || !bytes.Equal(data, raw[rec.Block]) {
			continue
		}
		if os.Remove(p.path(rec.Range)) == nil {
			freed = append(freed, rec.Range)
		}
	}
	slices.SortFunc(freed, func(a, b Range) int { return a.Block - b.Block })
	return freed
}

// read returns r's record and its bytes.
func (p *Pool) read(r Range) (Record, []byte, error) {
	data, err := os.ReadFile(p.path(r))
	if err != nil {
		return Record{}, nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return Record{}, nil, fmt.Errorf("uid range record %s: %w", p.path(r), err)
	}
	rec.Range = r
	return rec, data, nil
}

// lock takes the directory's lock, which orders every change to an existing record (Adopt,
// Release, Sweep) across processes; creating one needs no lock.
func (p *Pool) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(p.dir, ".lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("uid pool: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("uid pool: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
