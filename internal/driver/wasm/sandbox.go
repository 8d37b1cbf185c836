package wasm

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
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

// Sandbox is one wasm sandbox as the daemon holds it: its jail (a process-level sandbox whose
// writable layer is the store) and, while it is in use, the worker that runs its commands.
type Sandbox struct {
	d    *Driver
	id   string
	jail *host.Sandbox

	ctx    context.Context // cancelled by Destroy: every exec ends
	cancel context.CancelFunc

	// gate is held shared by every exec and exclusively by a snapshot, which is taken between
	// commands.
	gate sync.RWMutex

	startMu sync.Mutex // held while a worker starts, so that one starts at a time

	mu        sync.Mutex // guards the fields below
	spec      sandbox.Spec
	running   int
	destroyed bool
	w         *worker     // the worker, nil when none runs
	active    int         // execs on w
	idle      *time.Timer // retires w when it has been idle for the driver's WorkerIdle
}

var (
	_ driver.Sandbox     = (*Sandbox)(nil)
	_ driver.FileRooter  = (*Sandbox)(nil)
	_ driver.Layerer     = (*Sandbox)(nil)
	_ driver.Snapshotter = (*Sandbox)(nil)
	_ driver.Statser     = (*Sandbox)(nil)
	_ driver.Claimer     = (*Sandbox)(nil)
	_ driver.HostFacter  = (*Sandbox)(nil)
	_ driver.Watcher     = (*Sandbox)(nil)
)

// open returns the sandbox on its jail.
func (d *Driver) open(id string, spec sandbox.Spec, jail *host.Sandbox) *Sandbox {
	s := &Sandbox{d: d, id: id, jail: jail, spec: spec}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// ID implements driver.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// Jail is the process-level sandbox the sandbox's worker runs in.
func (s *Sandbox) Jail() *host.Sandbox { return s.jail }

// Done implements driver.Watcher: the jail ended (its init was killed).
func (s *Sandbox) Done() <-chan struct{} { return s.jail.Done() }

// WorkerPid is the host pid of the sandbox's worker, 0 when none runs.
func (s *Sandbox) WorkerPid() int {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	if w == nil || !w.alive() {
		return 0
	}
	return findWorker(s.jail.InitPid())
}

// hostFacts is what a later airlock needs to take a sandbox over: its jail's.
type hostFacts struct {
	Jail json.RawMessage `json:"jail"`
}

// HostFacts implements driver.HostFacter.
func (s *Sandbox) HostFacts() json.RawMessage {
	b, _ := json.Marshal(hostFacts{Jail: s.jail.HostFacts()})
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

// FileRoot implements driver.FileRooter: the guest's root in the jail's store, and the host ids
// of the jail's user, whose files the guest's are.
func (s *Sandbox) FileRoot() (*os.File, int, int, error) {
	if err := s.live("file root"); err != nil {
		return nil, 0, 0, err
	}
	root, uid, gid, err := s.jail.FileRoot()
	if err != nil {
		return nil, 0, 0, err
	}
	defer root.Close()
	// Beneath the jail's root, and no symlink on the way: the jail's own directories, which
	// nothing of the guest can change.
	fd, err := unix.Openat2(int(root.Fd()), jailRoot[1:], &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("file root of sandbox %s: %w", s.id, err)
	}
	return os.NewFile(uintptr(fd), "sandbox "+s.id+" root"), uid, gid, nil
}

// Layer implements driver.Layerer: the store in the jail's writable layer, read live.
func (s *Sandbox) Layer(ctx context.Context) (driver.Layer, error) {
	if err := s.live("layer"); err != nil {
		return driver.Layer{}, err
	}
	l, err := s.jail.Layer(ctx)
	if err != nil {
		return driver.Layer{}, err
	}
	return driver.Layer{Dir: storeIn(l), Layout: LayerLayout}, nil
}

// storeIn is the store's directory in the jail's layer as the host reads it.
func storeIn(l driver.Layer) string {
	for _, top := range l.Layout.Top {
		if l.Layout.At[top] == "/" {
			return l.Dir + "/" + top + jailStore
		}
	}
	return l.Dir + jailStore
}

// Snapshot implements driver.Snapshotter. It is taken between commands, so the store is one
// instant's: while one runs it is a conflict.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer, _ string) (bool, error) {
	if !s.gate.TryLock() {
		return false, fmt.Errorf("snapshot: sandbox %s has commands running; a wasm sandbox is saved between commands: %w", s.id, errdefs.ErrConflict)
	}
	defer s.gate.Unlock()
	l, err := s.Layer(ctx)
	if err != nil {
		return false, err
	}
	root, base, _, err := s.jail.FileRoot() // base: the host id of the jail's user, its uid 0
	if err != nil {
		return false, err
	}
	root.Close()
	_, err = snapshot.WriteLayer(w, l.Dir, snapshot.WriteOptions{Layout: LayerLayout,
		SandboxID: func(host int) (int, bool) { return host - base, host >= base && host-base <= snapshot.MaxID }})
	return false, err
}

// SavesMemory implements driver.Snapshotter: nothing runs between commands, so there is no memory
// to save.
func (s *Sandbox) SavesMemory() bool { return false }

// Usage implements driver.Statser: the jail's cgroup (the worker, the guests' memory, the store's
// pages) and layer. Processes are the running commands.
func (s *Sandbox) Usage(ctx context.Context) (driver.Usage, error) {
	u, err := s.jail.Usage(ctx)
	if err != nil {
		return u, err
	}
	s.mu.Lock()
	u.Pids, u.PidsLimit = int64(s.running), s.spec.Resources.MaxProcesses
	s.mu.Unlock()
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

// acquire returns the running worker, starting one if none runs, counted as in use.
func (s *Sandbox) acquire(ctx context.Context) (*worker, error) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	if s.destroyed {
		s.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s is destroyed: %w", s.id, errdefs.ErrConflict)
	}
	if s.w != nil && s.w.alive() {
		s.active++
		if s.idle != nil {
			s.idle.Stop()
		}
		w := s.w
		s.mu.Unlock()
		return w, nil
	}
	s.w = nil
	s.mu.Unlock()
	w, err := s.startWorker(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		go w.stop()
		return nil, fmt.Errorf("sandbox %s is destroyed: %w", s.id, errdefs.ErrConflict)
	}
	s.w, s.active = w, 1
	return w, nil
}

// release counts an exec out of w; the last one out starts w's idle time.
func (s *Sandbox) release(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != w {
		return
	}
	if s.active--; s.active > 0 {
		return
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	s.idle = time.AfterFunc(s.d.cfg.WorkerIdle, func() { s.retire(w) })
}

// retire stops w if it is still the sandbox's worker and still idle.
func (s *Sandbox) retire(w *worker) {
	s.mu.Lock()
	if s.w != w || s.active > 0 {
		s.mu.Unlock()
		return
	}
	s.w = nil
	s.mu.Unlock()
	w.stop()
}

// Destroy implements driver.Sandbox: the worker is killed (running commands end with it), then
// the jail is destroyed, and the store with its layer.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.mu.Lock()
	s.destroyed = true
	w := s.w
	s.w = nil
	if s.idle != nil {
		s.idle.Stop()
	}
	s.mu.Unlock()
	s.cancel()
	if w != nil {
		w.stop()
	}
	// Wait for the execs to let go of the store.
	s.gate.Lock()
	defer s.gate.Unlock()
	return s.jail.Destroy(ctx)
}
