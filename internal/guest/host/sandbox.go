package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Sandbox is one live sandbox whose PID 1 is airlock's init, in its own cgroup, whichever level
// made it (Launch, Adopt). It lives until Destroy and runs any number of execs, one after another
// or at the same time; background processes and files persist between them.
type Sandbox struct {
	id      string
	rt      *Runtime
	spec    sandbox.Spec
	proc    *os.Process // init: a child of this process, or an adopted one's (Adopt)
	ctl     *conn
	cg      *cgroups.Cgroup
	events  *cgroups.EventReader // the cgroup's limit-event counters, sampled around every exec
	pid     int                  // init's pid on the host
	created time.Time
	gw      *egress.Gateway // the sandbox's network; nil for egress "none" (loopback only)
	l       *Launcher       // how the level runs init
	layer   *os.File        // init's clone of the writable layer, once a snapshot asked for it
	uids    uidalloc.Range  // the host ids the sandbox's ids 0..65535 are mapped to

	mu       sync.Mutex // guards waiters, and delivery to them (see readLoop); and rejoined
	waiters  map[string]chan *guest.Message
	rejoined chan struct{} // closed, and replaced, whenever init dials its control socket again

	token string       // what init presents when it dials its control socket again (Launcher.Control)
	gate  sync.RWMutex // held shared by every exec, exclusively by a snapshot with memory

	stateMu   sync.Mutex // guards paused and destroyed, and orders Pause, Resume and Destroy
	paused    bool
	destroyed bool

	done   chan struct{} // closed when the control socket is gone (init exited or Destroy)
	exited chan struct{} // closed when init has been reaped

	destroyOnce sync.Once
	destroyErr  error
}

var (
	_ driver.Sandbox       = (*Sandbox)(nil)
	_ driver.Watcher       = (*Sandbox)(nil)
	_ driver.Pauser        = (*Sandbox)(nil)
	_ driver.Statser       = (*Sandbox)(nil)
	_ driver.FileRooter    = (*Sandbox)(nil)
	_ driver.Networker     = (*Sandbox)(nil)
	_ driver.Claimer       = (*Sandbox)(nil)
	_ driver.EgressProxier = (*Sandbox)(nil)
)

// ID implements driver.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// InitPid is the host pid of the sandbox's init (its PID 1).
func (s *Sandbox) InitPid() int { return s.pid }

// Cgroup is the sandbox's cgroup.
func (s *Sandbox) Cgroup() *cgroups.Cgroup { return s.cg }

// Done implements driver.Watcher: it is closed when init's end of the control socket is gone,
// which is when init has exited — by itself (killed from the host, or a cgroup kill after an exec
// wedged, see Exec) or by Destroy. Destroy is still needed afterwards: it removes the cgroup.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// readLoop routes init's messages to the exec waiting for them.
func (s *Sandbox) readLoop() {
	defer close(s.done)
	buf := make([]byte, guest.MaxReply)
	for {
		m, err := s.ctl.recv(buf)
		if errors.Is(err, guest.ErrMalformed) {
			s.rt.log.Warn("dropped a malformed message from init", "sandbox", s.id, "err", err)
			continue
		}
		if err != nil && s.rejoin() {
			continue
		}
		if err != nil {
			// Tell a Create still waiting for "ready" that init is gone; execs watch s.done.
			s.mu.Lock()
			if ch, ok := s.waiters[""]; ok {
				select {
				case ch <- nil:
				default:
				}
			}
			s.mu.Unlock()
			return
		}
		// Delivered under the lock, so that an exec that unregisters (and drains its channel)
		// never misses a message carrying a descriptor it must close.
		s.mu.Lock()
		ch, ok := s.waiters[m.ID]
		if ok {
			select {
			case ch <- m:
			default: // a waiter gets started, exited and a resize's ack at a time (its server waits for each); anything more is noise
				ok = false
			}
		}
		s.mu.Unlock()
		if !ok {
			m.CloseFiles()
		}
	}
}

// alive reports whether init has not been reaped, so that its pid still names it. A check after
// opening something under /proc/<pid> proves the thing opened was init's.
func (s *Sandbox) alive() bool {
	// os.Process signals through a pidfd: once init is reaped this fails, whoever has its pid.
	return s.proc.Signal(syscall.Signal(0)) == nil
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ended returns an error if the sandbox can no longer run anything.
func (s *Sandbox) ended(what string) error {
	select {
	case <-s.done:
		return fmt.Errorf("%s: sandbox %s has ended: %w", what, s.id, errdefs.ErrConflict)
	default:
		return nil
	}
}

// freezeTimeout bounds a Pause whose ctx has no deadline: a task in an uninterruptible sleep can
// keep a cgroup v1 freezer from ever reporting FROZEN.
const freezeTimeout = 10 * time.Second

// Pause implements driver.Pauser: every process of the sandbox, init included, is frozen by the
// cgroup freezer, and Pause returns once the kernel reports the cgroup frozen; from then on the
// sandbox uses no CPU. While paused, Exec refuses new commands (ErrConflict). A command that was
// running stops where it is; should its deadline pass before Resume, Exec's fallback kills the
// whole cgroup — the sandbox ends (Done closes) — because a frozen init cannot kill it.
func (s *Sandbox) Pause(ctx context.Context) error {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.destroyed {
		return fmt.Errorf("pause: sandbox %s is destroyed: %w", s.id, errdefs.ErrConflict)
	}
	if err := s.ended("pause"); err != nil {
		return err
	}
	if s.paused {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	defer cancel()
	if s.l.Pause != nil {
		if err := s.l.Pause(ctx); err != nil {
			return fmt.Errorf("pause sandbox %s: %w", s.id, err)
		}
	} else if err := s.cg.Freeze(ctx); err != nil { // it thaws again if the kernel does not get there in time
		return fmt.Errorf("pause sandbox %s: %w", s.id, err)
	}
	s.paused = true
	return nil
}

// Resume implements driver.Pauser: the sandbox's processes continue where they stopped.
func (s *Sandbox) Resume(ctx context.Context) error {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.destroyed {
		return fmt.Errorf("resume: sandbox %s is destroyed: %w", s.id, errdefs.ErrConflict)
	}
	if !s.paused {
		return nil
	}
	if s.l.Resume != nil {
		if err := s.l.Resume(ctx); err != nil {
			return fmt.Errorf("resume sandbox %s: %w", s.id, err)
		}
	} else if err := s.cg.Thaw(ctx); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", s.id, err)
	}
	s.paused = false
	return nil
}

func (s *Sandbox) isPaused() bool {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.paused
}

// Usage implements driver.Statser. CPU, memory and pids are the cgroup's: they include init
// (a few MiB, and pids counts its threads; PidsLimit is the limit the kernel enforces,
// maxProcesses plus the guest.InitTasks reserved for them), or the sandbox kernel's count when
// init keeps one (Launcher.GuestPids). Disk is the writable layer's, network the sandbox's
// interfaces but loopback.
func (s *Sandbox) Usage(ctx context.Context) (driver.Usage, error) {
	if err := s.ended("usage"); err != nil {
		return driver.Usage{}, err
	}
	st, err := s.cg.Stats()
	if err != nil {
		return driver.Usage{}, fmt.Errorf("usage of sandbox %s: %w", s.id, err)
	}
	r := s.spec.Resources
	u := driver.Usage{
		CPUTime:          st.CPUUsage,
		MemoryBytes:      st.MemoryCurrentBytes,
		MemoryPeakBytes:  st.MemoryPeakBytes,
		MemoryLimitBytes: r.MemoryMB << 20,
		Pids:             st.Pids,
		PidsLimit:        s.l.PidsLimit,
	}
	if s.l.GuestPids > 0 && !s.isPaused() {
		// A paused sandbox's init cannot answer; it then shows the host's count.
		if g, err := s.guestStats(ctx); err == nil {
			u.Pids, u.PidsLimit = g.Pids, g.PidsMax
		}
	}
	if s.l.Kernel != nil {
		k, err := s.l.Kernel(ctx)
		if err != nil {
			return driver.Usage{}, fmt.Errorf("usage of sandbox %s: its kernel: %w", s.id, err)
		}
		u.MemoryBytes, u.MemoryPeakBytes, u.Pids, u.PidsLimit = k.MemoryBytes, k.MemoryPeakBytes, k.Pids, k.PidsLimit
		u.DiskUsedBytes, u.DiskLimitBytes = k.DiskUsedBytes, k.DiskLimitBytes
		u.NetRxBytes, u.NetTxBytes = procfs.NetBytes(s.pid)
		return u, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(s.layerPath(), &fs); err == nil && s.alive() {
		u.DiskLimitBytes = int64(fs.Blocks) * fs.Bsize
		u.DiskUsedBytes = int64(fs.Blocks-fs.Bfree) * fs.Bsize
	}
	u.NetRxBytes, u.NetTxBytes = procfs.NetBytes(s.pid)
	return u, nil
}

// FileRoot implements driver.FileRooter: init's root directory as the host reaches it through
// /proc, i.e. the sandbox's root as its processes see it, mounts included. The ids are the host's
// for the sandbox's user (its user namespace maps sandbox id n to host id n of its own range).
//
// Host root can read and write existing files through it, but creating a file or directory in
// the writable layer needs the caller's filesystem ids to be these (setfsuid/setfsgid on a locked
// thread, which also makes it act with that user's permissions): the layer is a tmpfs of the
// sandbox's user namespace, and the kernel refuses to create an inode owned by an id that
// namespace cannot map — host root — with EOVERFLOW. Creating as root and chowning afterwards
// does not work.
func (s *Sandbox) FileRoot() (*os.File, int, int, error) {
	if err := s.ended("file root"); err != nil {
		return nil, 0, 0, err
	}
	p := s.rootPath()
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("file root of sandbox %s: open %s: %w", s.id, p, err)
	}
	if !s.alive() {
		unix.Close(fd)
		return nil, 0, 0, fmt.Errorf("file root: sandbox %s has ended: %w", s.id, errdefs.ErrConflict)
	}
	id := s.hostID(0)
	if s.spec.User != sandbox.UserRoot {
		id = s.hostID(sandbox.AgentUID)
	}
	return os.NewFile(uintptr(fd), "sandbox "+s.id+" root"), id, id, nil
}

// Destroy implements driver.Sandbox: init is killed (the kernel then kills every process of its PID
// namespace, and the mount namespace with the writable layer goes with the last of them), then the
// cgroup is killed and removed, which also catches anything that left the namespace. A paused
// sandbox is thawed after the kill: a task frozen by the v1 freezer dies only once thawed, and it
// does so without running again.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroyOnce.Do(func() {
		t0 := time.Now()
		defer func() {
			s.rt.log.Debug("sandbox destroyed", "sandbox", s.id, "took", time.Since(t0), "err", s.destroyErr)
		}()
		s.stateMu.Lock()
		defer s.stateMu.Unlock()
		s.destroyed = true
		if s.ctl != nil { // nil when Launch failed before making it
			s.ctl.close()
		}
		if s.l.Control != nil {
			s.l.Control.Close()
		}
		if s.proc != nil {
			// Should the kill or the thaw fail, the cgroup's Kill below freezes, kills and thaws
			// everything in it on its own.
			_ = s.proc.Kill()
			if s.paused {
				_ = s.cg.Thaw(ctx)
			}
			select {
			case <-s.exited:
			case <-ctx.Done():
			}
		}
		if s.events != nil {
			s.events.Close()
		}
		if s.layer != nil {
			s.layer.Close()
		}
		if s.l.Teardown != nil {
			s.destroyErr = s.l.Teardown(ctx)
		}
		var cgErr error
		if s.cg != nil { // nil when Create failed before making it
			cgErr = s.cg.Destroy(ctx)
			s.destroyErr = errors.Join(s.destroyErr, cgErr)
		}
		if s.gw != nil {
			s.destroyErr = errors.Join(s.destroyErr, s.gw.Close())
		}
		if s.l.Gone != nil {
			// Clean: init is reaped (or never ran), and the cgroup, which holds everything init
			// started, is killed and gone — nothing runs with the sandbox's ids any more.
			s.l.Gone(cgErr == nil && (s.proc == nil || closed(s.exited)))
		}
	})
	return s.destroyErr
}

// thaw thaws the sandbox's cgroup after what froze it (op) is done; a failure leaves the
// sandbox frozen, which op's caller cannot undo, so it is logged.
func (s *Sandbox) thaw(ctx context.Context, op string) {
	if err := s.cg.Thaw(ctx); err != nil {
		s.rt.log.Error("sandbox left frozen", "sandbox", s.id, "after", op, "err", err)
	}
}

// Claim implements driver.Claimer. The sandbox was made with its warm pool's spec, whose
// environment holds only its image's (the pool's own environment is never set); the claimant's
// goes over it. The policy changes before the spec does, so that a refused policy leaves the
// sandbox as it was.
func (s *Sandbox) Claim(ctx context.Context, spec sandbox.Spec) error {
	if (s.gw != nil) != (spec.Network.EgressPolicy != sandbox.EgressNone) {
		return fmt.Errorf("sandbox %s: a claim cannot add or remove a network: %w", s.id, errdefs.ErrConflict)
	}
	if s.gw != nil {
		if err := s.gw.Update(spec.Network); err != nil {
			return err
		}
	}
	env := maps.Clone(s.spec.Environment)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, spec.Environment)
	spec.Environment = env
	s.spec = spec
	return nil
}

// EgressProxy implements driver.EgressProxier: the explicit proxy of the sandbox's network.
func (s *Sandbox) EgressProxy() (string, bool) {
	if s.gw == nil {
		return "", false
	}
	return s.gw.ProxyURL(), true
}

// UpdateNetwork implements driver.Networker: the new policy is in force when it returns. A
// sandbox made with egress "none" has no network to change.
func (s *Sandbox) UpdateNetwork(ctx context.Context, n sandbox.Network) error {
	if s.gw == nil {
		return fmt.Errorf("sandbox %s was created with egressPolicy none and has no network to change; create it with egressPolicy restricted (an empty allowlist reaches nothing) to change its policy later: %w", s.id, errdefs.ErrConflict)
	}
	return s.gw.Update(n)
}
