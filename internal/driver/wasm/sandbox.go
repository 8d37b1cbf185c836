package wasm

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// site is the site directory of the guest's Python (see site/airlock-cwd.pth).
//
//go:embed site
var site embed.FS

// Guest paths of the read-only parts every sandbox sees.
const (
	guestPythonLib = "/usr/local/lib"                       // the interpreter's standard library, from python/lib
	guestSite      = "/usr/local/lib/python3/dist-packages" // site, above; site.py reads it
)

// Sandbox is one wasm sandbox: a store and the execs running on it.
type Sandbox struct {
	d     *Driver
	id    string
	dir   string // the store: a tmpfs of diskMb
	root  string // dir/root: the guest's "/"
	mem   *memoryCap
	files *openFiles
	// mounts is the guest filesystem; fsc is the same for wazero.
	mounts mounts
	fsc    wazero.FSConfig

	ctx    context.Context // cancelled by Destroy: every exec ends
	cancel context.CancelFunc

	// gate is held shared by every exec and exclusively by a snapshot, which is taken between
	// commands.
	gate sync.RWMutex

	mu        sync.Mutex // guards the fields below
	spec      sandbox.Spec
	running   int
	cpu       time.Duration // CPU time of every exec so far
	destroyed bool
}

var (
	_ driver.Sandbox     = (*Sandbox)(nil)
	_ driver.FileRooter  = (*Sandbox)(nil)
	_ driver.Layerer     = (*Sandbox)(nil)
	_ driver.Snapshotter = (*Sandbox)(nil)
	_ driver.Statser     = (*Sandbox)(nil)
	_ driver.Claimer     = (*Sandbox)(nil)
	_ driver.HostFacter  = (*Sandbox)(nil)
)

// open returns the sandbox on the store of id, which exists.
func (d *Driver) open(id string, spec sandbox.Spec) (*Sandbox, error) {
	d.rt.start() // an adopted sandbox's first exec should not wait for the whole compile
	dir := d.dir(id)
	s := &Sandbox{
		d: d, id: id, dir: dir, root: filepath.Join(dir, "root"), spec: spec,
		mem:   newMemoryCap(uint64(spec.Resources.MemoryMB) << 20),
		files: &openFiles{limit: spec.Resources.MaxOpenFiles},
	}
	if err := s.buildMounts(); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// buildMounts lays out the guest's filesystem: the store as "/", writable beneath the workdir and
// writableDirs; the interpreter's library and airlock's site read-only; the spec's host mounts.
func (s *Sandbox) buildMounts() error {
	spec := s.spec
	writable := writableDirs(spec)
	var binds []mount
	for i, b := range spec.Binds {
		if fi, err := os.Stat(b.Host); err != nil || !fi.IsDir() {
			return errdefs.Invalid(fmt.Sprintf("binds[%d]", i), "host path %s bound at %s is not a directory (the wasm level binds directories only)", b.Host, b.Path)
		}
		c := newConfinedFS(b.Host, b.Path, nil, spec.Filesystem.Blocked, s.files)
		if !b.ReadOnly {
			c.writable = []string{"/"}
		}
		c.readOnly = spec.Filesystem.ReadOnly
		binds = append(binds, mount{b.Path, c})
	}
	root := newConfinedFS(s.root, "/", writable, spec.Filesystem.Blocked, s.files)
	root.readOnly = spec.Filesystem.ReadOnly
	siteFS, _ := fs.Sub(site, "site")
	ms := mounts{
		{"/", root},
		{guestSite, &sysfs.AdaptFS{FS: siteFS}},
	}
	if s.d.rt.python.err == nil {
		lib := filepath.Join(s.d.rt.python.dir, "lib")
		ms = append(ms, mount{guestPythonLib, &sysfs.ReadFS{FS: sysfs.DirFS(lib)}})
	}
	s.mounts = append(ms, binds...).sorted()
	fsc := wazero.NewFSConfig()
	// Shortest first: the guest's libc picks the longest preopen that prefixes a path, whatever
	// the order, but "/" first keeps it fd 3, as programs that assume it expect.
	for i := len(s.mounts) - 1; i >= 0; i-- {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(s.mounts[i].fs, s.mounts[i].at)
	}
	s.fsc = fsc
	return nil
}

// ID implements driver.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// HostFacts implements driver.HostFacter: the store, which a later airlock adopts.
func (s *Sandbox) HostFacts() json.RawMessage {
	b, _ := json.Marshal(hostFacts{Dir: s.dir})
	return b
}

// Claim implements driver.Claimer: a pooled wasm sandbox takes its claimant's environment,
// timeouts, name and metadata; the rest of the spec is its shape, which the pool matched. A
// network cannot be added (the level has none).
func (s *Sandbox) Claim(_ context.Context, spec sandbox.Spec) error {
	if err := checkSpec(spec); err != nil {
		return fmt.Errorf("claim: %w: %w", err, errdefs.ErrConflict)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec.Environment, s.spec.Timeout, s.spec.Name, s.spec.Metadata = spec.Environment, spec.Timeout, spec.Name, spec.Metadata
	return nil
}

// FileRoot implements driver.FileRooter: the guest's root in the store. Files the guest makes
// belong to the airlock process (host root), and so do those the files API makes.
func (s *Sandbox) FileRoot() (*os.File, int, int, error) {
	if err := s.live("file root"); err != nil {
		return nil, 0, 0, err
	}
	fd, err := unix.Open(s.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("file root of sandbox %s: %w", s.id, err)
	}
	return os.NewFile(uintptr(fd), "sandbox "+s.id+" root"), 0, 0, nil
}

// Layer implements driver.Layerer: the store, read live.
func (s *Sandbox) Layer(context.Context) (driver.Layer, error) {
	if err := s.live("layer"); err != nil {
		return driver.Layer{}, err
	}
	return driver.Layer{Dir: s.dir, Layout: LayerLayout}, nil
}

// Snapshot implements driver.Snapshotter. It is taken between commands, so the store is one
// instant's: while one runs it is a conflict.
func (s *Sandbox) Snapshot(_ context.Context, w io.Writer, _ string) (bool, error) {
	if !s.gate.TryLock() {
		return false, fmt.Errorf("snapshot: sandbox %s has commands running; a wasm sandbox is saved between commands: %w", s.id, errdefs.ErrConflict)
	}
	defer s.gate.Unlock()
	if err := s.live("snapshot"); err != nil {
		return false, err
	}
	_, err := snapshot.WriteLayer(w, s.dir, snapshot.WriteOptions{Layout: LayerLayout})
	return false, err
}

// SavesMemory implements driver.Snapshotter: nothing runs between commands, so there is no memory
// to save.
func (s *Sandbox) SavesMemory() bool { return false }

// Usage implements driver.Statser. Memory is the linear memory of the running commands' modules
// and the store's pages (a tmpfs is memory), as a cgroup counts a sandbox's tmpfs; CPU the time of
// the threads that ran the commands.
func (s *Sandbox) Usage(context.Context) (driver.Usage, error) {
	used, peak := s.mem.reading()
	var st unix.Statfs_t
	var store int64
	if err := unix.Statfs(s.dir, &st); err == nil {
		store = int64((st.Blocks - st.Bfree) * uint64(st.Bsize))
	}
	s.mu.Lock()
	u := driver.Usage{
		CPUTime: s.cpu, MemoryBytes: int64(used) + store, MemoryPeakBytes: int64(peak) + store, MemoryLimitBytes: int64(s.mem.limit),
		Pids: int64(s.running), PidsLimit: s.spec.Resources.MaxProcesses, DiskLimitBytes: s.spec.Resources.DiskMB << 20,
	}
	s.mu.Unlock()
	u.DiskUsedBytes = store
	return u, nil
}

// live fails once the sandbox is destroyed.
func (s *Sandbox) live(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("%s: sandbox %s is destroyed: %w", what, s.id, errdefs.ErrConflict)
	}
	return nil
}

// Destroy implements driver.Sandbox: running commands are stopped (their modules closed), then
// the store is unmounted and removed.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.mu.Lock()
	s.destroyed = true
	s.mu.Unlock()
	s.cancel()
	// Commands end at their next instruction; wait for them to let go of the store.
	s.gate.Lock()
	defer s.gate.Unlock()
	return s.d.Reclaim(ctx, s.id)
}
