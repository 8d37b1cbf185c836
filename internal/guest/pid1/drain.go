package pid1

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// Where init relays a command's output (gVisor, a VM: see stdioRelay and relay), the command can
// end before the relay has forwarded what it wrote last: the bytes sit in the sandbox's pipe, or
// in the relay's hands. Init tells the host of the exit only once they are sent — or drainWait
// has passed, since a copy can be stuck on a host that does not read. Each output copy counts
// what it read and wrote, so that init can say, at the exit, which bytes it must wait for: those
// read already plus those in the pipe (TIOCINQ), no more — a background process that writes on
// does not hold the exit back.

// drainWait bounds how long an exit waits for the output its command wrote.
const drainWait = 2 * time.Second

// outCopy copies one output stream, src (init's end of the command's pipe, or a terminal's
// master), to dst, counting as it goes.
type outCopy struct {
	src *os.File

	mu            sync.Mutex
	read, written int64
	ended         bool
}

// run copies until src ends or a write to dst fails. drop, when it says so, has what is read
// dropped instead of written (a detached relay). Reads happen under mu, so that mark never sees
// bytes that have left the pipe without being counted.
func (c *outCopy) run(dst io.Writer, drop func() bool) {
	defer func() {
		c.mu.Lock()
		c.ended = true
		c.mu.Unlock()
	}()
	rc, err := c.src.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			n, rerr = unix.Read(int(fd), buf)
			if n > 0 {
				c.read += int64(n)
			}
			return rerr != unix.EAGAIN
		}); err != nil {
			return // src closed
		}
		if n > 0 {
			if drop == nil || !drop() {
				if _, werr := dst.Write(buf[:n]); werr != nil && (drop == nil || !drop()) {
					return
				}
			}
			c.mu.Lock()
			c.written += int64(n)
			c.mu.Unlock()
		}
		if n <= 0 && rerr != unix.EINTR {
			return // EOF, or EIO from a terminal whose last slave closed
		}
	}
}

// mark is how many bytes must have been written for everything src holds now to be sent; -1
// when the copy has ended (nothing more will be).
func (c *outCopy) mark() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return -1
	}
	queued := 0
	if rc, err := c.src.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				queued = v
			}
		})
	}
	return c.read + int64(queued)
}

// reached reports whether the copy wrote up to mark, or ended.
func (c *outCopy) reached(mark int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return mark < 0 || c.ended || c.written >= mark
}

// pendingExit is a command's exit that waits for its output to be sent.
type pendingExit struct {
	m        *guest.Message
	outs     []*outCopy
	marks    []int64
	deadline time.Time
}

// newPendingExit marks what outs hold at m's exit.
func newPendingExit(m *guest.Message, outs []*outCopy) *pendingExit {
	p := &pendingExit{m: m, outs: outs, deadline: time.Now().Add(drainWait)}
	for _, c := range outs {
		p.marks = append(p.marks, c.mark())
	}
	return p
}

// ready reports whether the exit may be told: its output is sent, or it waited long enough.
func (p *pendingExit) ready() bool {
	if time.Now().After(p.deadline) {
		return true
	}
	for i, c := range p.outs {
		if !c.reached(p.marks[i]) {
			return false
		}
	}
	return true
}

// drainPoll is how often (ms) init looks at exits waiting for their output.
const drainPoll = 2

// tellExits tells the host of the exits whose output is sent.
func (srv *initServer) tellExits() {
	kept := srv.exits[:0]
	for _, p := range srv.exits {
		if !p.ready() {
			kept = append(kept, p)
			continue
		}
		srv.ctl.tell(p.m)
	}
	clear(srv.exits[len(kept):])
	srv.exits = kept
}
