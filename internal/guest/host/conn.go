package host

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// conn is the host's end of the control socket; it uses Go's netpoller, so a daemon with many
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

// socketPair returns the host's and init's ends of a new control socket.
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
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "airlock-relay"), os.NewFile(uintptr(fds[1]), "airlock-relay-init"), nil
}

func (c *conn) send(m *guest.Message, files ...*os.File) error {
	var fds []int
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	b, oob, err := guest.Encode(m, fds)
	if err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	sock := c.sock()
	if _, _, err := sock.WriteMsgUnix(b, oob, nil); !errors.Is(err, unix.EMSGSIZE) {
		return err
	}
	head, _, err := guest.Encode(&guest.Message{Kind: guest.MsgParts, Length: len(b)}, nil)
	if err != nil {
		return err
	}
	if _, _, err := sock.WriteMsgUnix(head, oob, nil); err != nil {
		return err
	}
	for len(b) > 0 {
		n := min(len(b), guest.PartSize)
		if _, _, err := sock.WriteMsgUnix(b[:n], nil, nil); err != nil {
			return fmt.Errorf("%d bytes of a message in parts not sent: %w", len(b), err)
		}
		b = b[n:]
	}
	return nil
}

// recv reads one message into buf (reused by the one reader) with the files it carried. An error
// that wraps errMalformed leaves the connection usable; any other means it is gone.
func (c *conn) recv(buf []byte) (*guest.Message, error) {
	oob := make([]byte, unix.CmsgSpace(4*guest.MaxRecvFds))
	n, oobn, flags, _, err := c.sock().ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	m, fds, err := guest.Decode(buf[:n], oob[:oobn], flags)
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		// Non-blocking, so that the runtime's poller serves reads and a Close interrupts them.
		// It cannot fail on an fd just received; os.NewFile sees the mode either way.
		_ = unix.SetNonblock(fd, true)
		m.Files = append(m.Files, os.NewFile(uintptr(fd), "airlock-"+m.Kind))
	}
	return m, nil
}

func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.sock().Close()
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
