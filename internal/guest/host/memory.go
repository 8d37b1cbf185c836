package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/airlockrun/airlock/internal/guest"
)

// The memory limit of a sandbox with its own kernel: the host's cgroup charges that kernel for
// everything, so at the limit the host's OOM killer would end the whole sandbox. Its limit has
// headroom instead (GuestHeadroom), and when the use reaches the sandbox's limit the host
// (watching the cgroup) tells init, which kills the process with the largest resident set, as
// the kernel's OOM killer would.

// GuestHeadroom is what the host cgroup of a sandbox of memory bytes allows above them: the
// sandbox kernel's own memory, and the time the host and init take to kill a process that
// allocates fast — on a busy host, a bomb zeroing a large buffer under gVisor outran 96 MiB of
// headroom (64 MiB + a quarter of 128) and met the host's limit, whose OOM kill ends the whole
// sandbox.
func GuestHeadroom(memory int64) int64 { return 128<<20 + memory/4 }

// watchGuestMemory tells init to kill a process whenever the sandbox's use reaches its limit,
// until the sandbox ends. The watch is set up in the background: on cgroup v1, registering the
// threshold waits for an RCU grace period (9 ms measured on the CI host), which no create or
// restore should wait for; the runtime's own limit holds meanwhile. A sandbox whose watch cannot
// be set up is ended: it never runs unwatched for longer than the setup takes.
func (s *Sandbox) watchGuestMemory(limit int64) {
	go func() {
		w, err := s.cg.WatchMemory(limit)
		if err != nil {
			select {
			case <-s.done:
				return // it ended first, and took its cgroup with it
			default:
			}
			s.rt.log.Error("sandbox ended: its memory limit cannot be watched", "sandbox", s.id, "err", err)
			if err := s.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				s.rt.log.Error("kill a sandbox whose memory limit cannot be watched", "sandbox", s.id, "err", err)
			}
			return
		}
		defer w.Close()
		for {
			select {
			case <-w.C:
				if w.Over() {
					_ = s.ctl.send(&guest.Message{Kind: guest.MsgOOM}) // fails only once init is gone
				}
			case <-s.done:
				return
			}
		}
	}()
}

// guestStats asks init for its guest cgroup's counters.
func (s *Sandbox) guestStats(ctx context.Context) (*guest.CgroupStats, error) {
	ctx, cancel := context.WithTimeout(ctx, guestPing)
	defer cancel()
	m, err := s.ask(ctx, guest.MsgPing, guest.MsgPong)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: init's process count: %w", s.id, err)
	}
	if m.Guest == nil {
		return nil, fmt.Errorf("sandbox %s: init keeps no process count", s.id)
	}
	return m.Guest, nil
}

// guestPing bounds the wait for init's counters (a paused sandbox does not answer; a busy gVisor
// is slow to run init).
const guestPing = 3 * time.Second
