package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// A daemon that dies (a crash, kill -9, an upgrade) leaves its sandboxes' inits without a host.
// An adoptable sandbox's init (guest.Config.OrphanGraceMs) also holds a listening socket
// (Launcher.Socket); it keeps the sandbox through the grace and hands it to whoever connects: the
// restarted daemon, which checks that the pid is still that init (start time, cgroup, uid map),
// connects, and takes the sandbox over with Adopt.

var _ driver.HostFacter = (*Sandbox)(nil)

// Facts are what a later host needs to find a sandbox's init again (HostFacts).
type Facts struct {
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22: tells a reused pid apart
	Socket    string `json:"socket"`
	NetSlot   *int   `json:"netSlot,omitempty"` // the network pool slot, for networked sandboxes
	// UIDs is the host uid range of the sandbox's ids (absent in the facts of an airlock from
	// before ranges were per sandbox: such a sandbox is not adopted).
	UIDs *uidalloc.Range `json:"uids,omitempty"`
}

// HostFacts implements driver.HostFacter: init's pid and start time, and its adoption socket
// (empty when the sandbox is not adoptable).
func (s *Sandbox) HostFacts() json.RawMessage {
	f := Facts{Pid: s.pid, UIDs: &s.uids, Socket: s.l.Socket}
	f.StartTime, _ = procfs.StartTime(s.pid)
	if s.gw != nil {
		f.NetSlot = &s.gw.Link.Slot
	}
	b, _ := json.Marshal(f)
	return b
}

// Adoption is a sandbox an airlock process that is gone started, as the level found it again:
// its init's pid (checked to be that init, in Cgroup, with the UIDs mapped), a connection to
// init's adoption socket, and its network, adopted already (nil for egress "none").
type Adoption struct {
	Pid     int
	Conn    *net.UnixConn
	Cgroup  *cgroups.Cgroup
	UIDs    uidalloc.Range
	Gateway *egress.Gateway
	// Paused says the cgroup is frozen: init cannot answer, and the sandbox is adopted paused.
	Paused bool
}

// adoptPing bounds how long an adopted init has to answer.
const adoptPing = 2 * time.Second

// Adopt takes over sandbox id of a.Pid, which runs as l says, once init answers on a.Conn (a
// frozen, i.e. paused, sandbox cannot: it is adopted without the question). On error it lets go of
// what it was given (Conn, Gateway) without touching the sandbox: whoever tries next (or the
// grace) decides its fate.
func (rt *Runtime) Adopt(ctx context.Context, id string, spec sandbox.Spec, a Adoption, l Launcher) (*Sandbox, error) {
	proc, err := os.FindProcess(a.Pid) // holds a pidfd: signals cannot reach a reused pid
	if err != nil {
		return nil, rt.release(a, err)
	}
	s := &Sandbox{id: id, rt: rt, spec: spec, l: &l, proc: proc, ctl: newUnixConn(a.Conn), cg: a.Cgroup, pid: a.Pid, uids: a.UIDs,
		gw: a.Gateway, created: time.Now(), paused: a.Paused,
		waiters: map[string]chan *guest.Message{}, done: make(chan struct{}), exited: make(chan struct{}), rejoined: make(chan struct{})}
	// Not our child: its end is seen through a pidfd, which becomes readable when it exits.
	if err := watchExit(a.Pid, s.exited); err != nil {
		return nil, rt.release(a, fmt.Errorf("sandbox %s: %w", id, err))
	}
	if s.events, err = a.Cgroup.OpenEvents(); err != nil {
		s.abandon()
		return nil, err
	}
	pong := make(chan *guest.Message, 1)
	s.waiters["adopt"] = pong
	go s.readLoop()
	if !a.Paused {
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
	return s, nil
}

// release lets go of an adoption that failed before its sandbox was made, and returns err.
func (rt *Runtime) release(a Adoption, err error) error {
	if a.Gateway != nil {
		if gerr := a.Gateway.Release(); gerr != nil {
			rt.log.Warn("release the network of a failed adoption", "pid", a.Pid, "err", gerr)
		}
	}
	a.Conn.Close()
	return err
}

// Abandon lets go of the sandbox without ending it, as the death of the airlock process that
// made it would: an adoptable sandbox then waits for a host to Adopt it. Tests play a daemon's
// crash with it.
func (s *Sandbox) Abandon() { s.ctl.close() }

// abandon lets go of a half-adopted sandbox without touching it: whoever tries next (or the
// grace) decides its fate.
func (s *Sandbox) abandon() {
	if s.gw != nil {
		if err := s.gw.Release(); err != nil {
			s.rt.log.Warn("release the network of an abandoned adoption", "sandbox", s.id, "err", err)
		}
	}
	s.ctl.close()
	if s.events != nil {
		s.events.Close()
	}
}
