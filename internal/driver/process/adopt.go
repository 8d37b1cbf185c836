package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// A daemon that dies (a crash, kill -9, an upgrade) leaves its sandboxes' inits without a driver.
// With Config.OrphanGrace set, each init also holds a listening socket in the state dir; it keeps
// the sandbox through the grace and hands it to whoever connects: the restarted daemon, which
// verifies that the pid is still that init (start time, cgroup) and that it answers.

var (
	_ driver.Adopter    = (*Driver)(nil)
	_ driver.HostFacter = (*Sandbox)(nil)
)

// hostFacts are what a later driver needs to find a sandbox's init again.
type hostFacts struct {
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22: tells a reused pid apart
	Socket    string `json:"socket"`
	NetSlot   *int   `json:"netSlot,omitempty"` // the network pool slot, for networked sandboxes
	// UIDs is the host uid range of the sandbox's ids (absent in the facts of an airlock from
	// before ranges were per sandbox: such a sandbox is not adopted).
	UIDs *uidalloc.Range `json:"uids,omitempty"`
}

// adoptSocket is where sandbox id's init listens for a new driver.
func (d *Driver) adoptSocket(id string) string { return filepath.Join(d.cfg.StateDir, "run", id) }

// listenAdopt makes the socket init will listen on. Only host root can reach it (0700 directory).
func (d *Driver) listenAdopt(id string) (*os.File, error) {
	dir := filepath.Join(d.cfg.StateDir, "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("adopt socket: %w", err)
	}
	path := d.adoptSocket(id)
	os.Remove(path)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("adopt socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("adopt socket %s: %w", path, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("adopt socket: %w", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// HostFacts implements driver.HostFacter: init's pid and start time, and its adoption socket
// (empty when the sandbox is not adoptable).
func (s *Sandbox) HostFacts() json.RawMessage {
	f := hostFacts{Pid: s.pid, UIDs: &s.uids}
	f.StartTime, _ = procfs.StartTime(s.pid)
	if s.d.cfg.OrphanGrace > 0 {
		f.Socket = s.d.adoptSocket(s.id)
	}
	if s.gw != nil {
		f.NetSlot = &s.gw.Link.Slot
	}
	b, _ := json.Marshal(f)
	return b
}

// adoptPing bounds how long an adopted init has to answer.
const adoptPing = 2 * time.Second

// Adopt implements driver.Adopter: it takes over sandbox id, made by an airlock process that is
// gone, from the facts its Sandbox reported (HostFacts). It fails, changing nothing, unless the
// pid is still that sandbox's init (same start time, inside the sandbox's cgroup) and init
// answers (a frozen, i.e. paused, sandbox cannot: it is adopted paused without the question).
func (d *Driver) Adopt(ctx context.Context, id string, spec sandbox.Spec, host json.RawMessage) (driver.Sandbox, error) {
	var f hostFacts
	if err := json.Unmarshal(host, &f); err != nil || f.Pid <= 0 || f.Socket == "" {
		return nil, fmt.Errorf("sandbox %s: no adoption facts recorded", id)
	}
	if !procfs.Alive(f.Pid, f.StartTime) {
		return nil, fmt.Errorf("sandbox %s: init (pid %d) is gone", id, f.Pid)
	}
	cg := d.cgroups.Open(d.cfg.CgroupParent, id)
	if procs, err := cg.Procs(); err != nil || !slices.Contains(procs, f.Pid) {
		return nil, fmt.Errorf("sandbox %s: pid %d is not in the sandbox's cgroup", id, f.Pid)
	}
	// A frozen init cannot count its grace (alive.go): past it, the sandbox is not adopted.
	frozen, _ := cg.Frozen()
	if gone, late := d.orphanedTooLong(); frozen && late {
		return nil, fmt.Errorf("sandbox %s: paused, and orphaned for %v, past its grace of %v", id, gone.Round(time.Millisecond), d.cfg.OrphanGrace)
	}
	if err := d.adoptUIDs(id, f); err != nil {
		return nil, err
	}
	proc, err := os.FindProcess(f.Pid) // holds a pidfd: signals cannot reach a reused pid
	if err != nil {
		return nil, err
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: f.Socket, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: connect to init: %w", id, err)
	}
	s := &Sandbox{id: id, d: d, spec: spec, proc: proc, ctl: newUnixConn(c), cg: cg, pid: f.Pid, uids: *f.UIDs, created: time.Now(),
		waiters: map[string]chan *guest.Message{}, done: make(chan struct{}), exited: make(chan struct{})}
	pidfd, err := unix.PidfdOpen(f.Pid, 0)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	go func() {
		// Not our child: its end is seen through a pidfd, which becomes readable when it exits.
		defer close(s.exited)
		defer unix.Close(pidfd)
		for {
			_, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, -1)
			if err != unix.EINTR {
				return
			}
		}
	}()
	if s.events, err = cg.OpenEvents(); err != nil {
		s.abandon()
		return nil, err
	}
	if f.NetSlot != nil {
		if d.cfg.Network == nil {
			s.abandon()
			return nil, fmt.Errorf("sandbox %s: networked, and this process has no network service", id)
		}
		if s.gw, err = d.cfg.Network.Adopt(id, f.Pid, *f.NetSlot, spec.Network); err != nil {
			s.abandon()
			return nil, fmt.Errorf("sandbox %s: network: %w", id, err)
		}
	}
	s.paused = frozen
	pong := make(chan *guest.Message, 1)
	s.waiters["adopt"] = pong
	go s.readLoop()
	if !frozen {
		if err := s.ctl.send(&guest.Message{Kind: guest.MsgPing, ID: "adopt"}); err != nil {
			s.abandon()
			return nil, fmt.Errorf("sandbox %s: init does not answer: %w", id, err)
		}
		select {
		case m := <-pong:
			if m == nil || m.Kind != guest.MsgPong {
				s.abandon()
				return nil, fmt.Errorf("sandbox %s: init does not answer", id)
			}
		case <-time.After(adoptPing):
			s.abandon()
			return nil, fmt.Errorf("sandbox %s: init did not answer within %v", id, adoptPing)
		case <-ctx.Done():
			s.abandon()
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	delete(s.waiters, "adopt")
	s.mu.Unlock()
	d.log.Info("sandbox adopted", "sandbox", id, "pid", f.Pid, "paused", frozen)
	return s, nil
}

// Abandon lets go of the sandbox without ending it, as the death of the airlock process that
// made it would: an adoptable sandbox (Config.OrphanGrace) then waits for a driver to Adopt it.
// Another level's tests play a daemon's crash with it.
func (s *Sandbox) Abandon() { s.ctl.close() }

// abandon lets go of a half-adopted sandbox without touching it: whoever tries next (or the
// grace) decides its fate.
func (s *Sandbox) abandon() {
	if s.gw != nil {
		s.gw.Release()
	}
	s.ctl.close()
	if s.events != nil {
		s.events.Close()
	}
}

// adoptUIDs makes this process the holder of the uid range the facts name, after checking that
// init's user namespace maps exactly that range. A sandbox whose facts name no range (made by an
// older airlock, whose sandboxes shared one) is not adopted: it is reclaimed, as it would be were
// it not adoptable.
func (d *Driver) adoptUIDs(id string, f hostFacts) error {
	if f.UIDs == nil {
		return fmt.Errorf("sandbox %s: no uid range of its own recorded", id)
	}
	if d.uids == nil {
		return fmt.Errorf("sandbox %s: uid ranges: %v", id, d.uidsErr)
	}
	m, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", f.Pid))
	if want := fmt.Sprint(0, f.UIDs.First(), uidalloc.Size); err != nil || strings.Join(strings.Fields(string(m)), " ") != want {
		return fmt.Errorf("sandbox %s: init's uid map is %q, not the recorded %q", id, strings.TrimSpace(string(m)), want)
	}
	if err := d.uids.Adopt(*f.UIDs, d.uidOwner(id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}
