package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// The driver and the sandbox's init talk over a SOCK_SEQPACKET socket pair: one JSON message per
// packet, file descriptors (a command's stdio) riding along as SCM_RIGHTS. SEQPACKET keeps message
// boundaries and delivers EOF to init when the driver goes away, which is init's cue to end the
// sandbox.
//
// A packet can be no larger than the sender's socket buffer (net.core.wmem_default, 208 KiB by
// default): the driver sends a message that does not fit (EMSGSIZE: an exec with a large argv or
// environment) in parts — a msgParts header with the message's size and its descriptors, then
// the JSON in packets of partSize — and init puts it back together.

// maxMessage bounds one packet init reads.
const maxMessage = 1 << 20

// partSize is the size of the packets a message in parts is sent in: far below any socket
// buffer a host configures.
const partSize = 32 << 10

// maxParts bounds a message in parts: what an exec request of the largest body the API accepts
// could encode to, with room to spare.
const maxParts = 64 << 20

// maxReply bounds what init sends (statuses, errors): the buffer each sandbox's reader keeps.
const maxReply = 64 << 10

// Message kinds.
const (
	msgConfig  = "config"  // driver → init: set the sandbox up (Config)
	msgReady   = "ready"   // init → driver: set up, locked down, waiting for execs
	msgError   = "error"   // init → driver: setup or an exec failed (Error, ID)
	msgPlaced  = "placed"  // driver → init: you are in the sandbox's cgroup; lock down
	msgExec    = "exec"    // driver → init: start a command (Exec) with 3 fds, or none for a TTY
	msgStarted = "started" // init → driver: the command runs (ID, Pid; a TTY's master as the fd)
	msgExited  = "exited"  // init → driver: the command ended (ID, ExitCode, Signal, Usage)
	msgSignal  = "signal"  // driver → init: signal a command's process group (ID, Signal)
	msgOOM     = "oom"     // driver → init: the sandbox is at its memory limit; kill its largest process
	msgResize  = "resize"  // driver → init: set a relayed terminal's size (ID, Size)
	msgPing    = "ping"    // driver → init: are you there? (a driver adopting the sandbox asks)
	msgPong    = "pong"    // init → driver: yes (ID; Guest, when the sandbox's kernel counts its processes)
	msgLayer   = "layer"   // driver → init: send me the writable layer; init → driver: here (ID; the fd)
	msgHello   = "hello"   // init → driver: first message on a control socket init dialled again (Token)
	msgQuiesce = "quiesce" // driver → init: hold no host descriptor (a memory snapshot comes); init → driver: done (ID)
	msgParts   = "parts"   // driver → init: the next message is the next Length bytes, in packets of partSize; its descriptors come with this one
)

type message struct {
	Kind     string           `json:"kind"`
	ID       string           `json:"id,omitempty"`
	Config   *initConfig      `json:"config,omitempty"`
	Exec     *execSpec        `json:"exec,omitempty"`
	Pid      int              `json:"pid,omitempty"`
	ExitCode int              `json:"exitCode,omitempty"`
	Signal   int              `json:"signal,omitempty"`
	Usage    *rusage          `json:"usage,omitempty"`
	Error    string           `json:"error,omitempty"`
	Guest    *guestStats      `json:"guest,omitempty"`
	Size     *sandbox.Winsize `json:"size,omitempty"`
	Token    string           `json:"token,omitempty"`
	Length   int              `json:"length,omitempty"` // msgParts

	// files are the descriptors that came with the message to the driver; whoever takes the
	// message owns them.
	files []*os.File
}

// closeFiles closes the descriptors a message brought that nobody took.
func (m *message) closeFiles() {
	closeAll(m.files)
	m.files = nil
}

// execSpec is one command for init to start.
type execSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// TTY, when set, runs the command on a new terminal of the sandbox's devpts of this size;
	// init sends the master back with msgStarted, or relays it through the one descriptor that
	// came with the request (see relay).
	TTY *sandbox.Winsize `json:"tty,omitempty"`
}

// rusage is what the kernel reports for a reaped command (wait4): its own usage plus that of the
// descendants it waited for. Background processes it left behind are not in it.
type rusage struct {
	CPUMicros int64 `json:"cpuUs"`     // user + system time
	MaxRSSKiB int64 `json:"maxRssKiB"` // peak resident set of the largest of them
}

// conn is the driver's end of the control socket; it uses Go's netpoller, so a daemon with many
// sandboxes does not park one thread per sandbox.
// Its socket can be replaced (swap) when init dials again (see redial.go); sends and the reader
// load it without a lock.
type conn struct {
	c      atomic.Pointer[net.UnixConn]
	mu     sync.Mutex // orders swap and close
	closed bool
	sendMu sync.Mutex // keeps the packets of a message in parts together
}

func newUnixConn(c *net.UnixConn) *conn {
	cc := &conn{}
	cc.c.Store(c)
	return cc
}

// sock returns the current socket.
func (c *conn) sock() *net.UnixConn { return c.c.Load() }

// swap replaces the socket with nc, closing the old one, and reports whether it did: a closed conn
// closes nc instead.
func (c *conn) swap(nc *net.UnixConn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nc.Close()
		return false
	}
	c.c.Swap(nc).Close()
	return true
}

func newConn(f *os.File) (*conn, error) {
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("control socket: not a unix socket")
	}
	return newUnixConn(uc), nil
}

// socketPair returns the driver's and init's ends of a new control socket.
func socketPair() (driverEnd, initEnd *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "airlock-control"), os.NewFile(uintptr(fds[1]), "airlock-control-init"), nil
}

// streamPair makes a connected pair of stream sockets (a terminal relay's); ours is non-blocking,
// for the runtime's poller, theirs is for init.
func streamPair() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	unix.SetNonblock(fds[0], true)
	return os.NewFile(uintptr(fds[0]), "airlock-relay"), os.NewFile(uintptr(fds[1]), "airlock-relay-init"), nil
}

func (c *conn) send(m *message, files ...*os.File) error {
	var fds []int
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	b, oob, err := encode(m, fds)
	if err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	sock := c.sock()
	if _, _, err := sock.WriteMsgUnix(b, oob, nil); !errors.Is(err, unix.EMSGSIZE) {
		return err
	}
	head, _, err := encode(&message{Kind: msgParts, Length: len(b)}, nil)
	if err != nil {
		return err
	}
	if _, _, err := sock.WriteMsgUnix(head, oob, nil); err != nil {
		return err
	}
	for len(b) > 0 {
		n := min(len(b), partSize)
		if _, _, err := sock.WriteMsgUnix(b[:n], nil, nil); err != nil {
			return fmt.Errorf("%d bytes of a message in parts not sent: %w", len(b), err)
		}
		b = b[n:]
	}
	return nil
}

// recv reads one message into buf (reused by the one reader) with the files it carried. An error
// that wraps errMalformed leaves the connection usable; any other means it is gone.
func (c *conn) recv(buf []byte) (*message, error) {
	oob := make([]byte, unix.CmsgSpace(4*maxRecvFds))
	n, oobn, flags, _, err := c.sock().ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	m, fds, err := decode(buf[:n], oob[:oobn], flags)
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		// Non-blocking, so that the runtime's poller serves reads and a Close interrupts them.
		unix.SetNonblock(fd, true)
		m.files = append(m.files, os.NewFile(uintptr(fd), "airlock-"+m.Kind))
	}
	return m, nil
}

// maxRecvFds is the most descriptors one message to the driver carries (a terminal's master).
const maxRecvFds = 4

func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.sock().Close()
}

// initConn is init's end: plain blocking syscalls on init's one locked thread — no netpoller, no
// goroutine hand-offs between a request arriving and the command starting.
type initConn struct{ fd int }

func (c initConn) send(m *message, fds ...int) error {
	b, oob, err := encode(m, fds)
	if err != nil {
		return err
	}
	return unix.Sendmsg(c.fd, b, oob, nil, 0)
}

// maxFds is the most descriptors one message may carry (the kernel's SCM_MAX_FD is 253).
const maxFds = 250

// recv blocks for one message and returns it with the file descriptors it carried; a message
// in parts is read whole.
func (c initConn) recv(buf []byte) (*message, []int, error) {
	oob := make([]byte, unix.CmsgSpace(4*maxFds))
	n, oobn, flags, err := c.recvmsg(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	m, fds, err := decode(buf[:n], oob[:oobn], flags)
	if err != nil || m.Kind != msgParts {
		return m, fds, err
	}
	fail := func(err error) (*message, []int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	if m.Length <= 0 || m.Length > maxParts {
		return fail(fmt.Errorf("%w: a message in parts of %d bytes", errMalformed, m.Length))
	}
	whole := make([]byte, 0, m.Length)
	for len(whole) < m.Length {
		n, _, flags, err := c.recvmsg(buf, nil)
		switch {
		case err != nil:
			return fail(err)
		case n == 0:
			return fail(net.ErrClosed)
		case flags&unix.MSG_TRUNC != 0 || len(whole)+n > m.Length:
			return fail(fmt.Errorf("%w: a part too long", errMalformed))
		}
		whole = append(whole, buf[:n]...)
	}
	var full message
	if err := json.Unmarshal(whole, &full); err != nil || full.Kind == msgParts {
		return fail(fmt.Errorf("%w: a message in parts: %v", errMalformed, err))
	}
	return &full, fds, nil
}

// recvmsg is one recvmsg on the control socket, retried when a signal interrupts it.
func (c initConn) recvmsg(buf, oob []byte) (n, oobn, flags int, err error) {
	for {
		n, oobn, flags, _, err = unix.Recvmsg(c.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			return n, oobn, flags, err
		}
	}
}

func encode(m *message, fds []int) ([]byte, []byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return b, oob, nil
}

// errMalformed is a packet that could not be parsed; the connection itself is fine.
var errMalformed = errors.New("malformed control message")

// decode parses one packet. A zero-length packet is the peer closing (SEQPACKET reads 0 at EOF).
func decode(b, oob []byte, flags int) (*message, []int, error) {
	var fds []int
	if len(oob) > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob)
		if err == nil {
			for _, cm := range cmsgs {
				if f, err := unix.ParseUnixRights(&cm); err == nil {
					fds = append(fds, f...)
				}
			}
		}
	}
	fail := func(err error) (*message, []int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	if len(b) == 0 {
		return fail(net.ErrClosed)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return fail(fmt.Errorf("%w: truncated", errMalformed))
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return fail(fmt.Errorf("%w: %w", errMalformed, err))
	}
	return &m, fds, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
