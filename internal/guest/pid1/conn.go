package pid1

import (
	"encoding/json"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// initConn is init's end: plain blocking syscalls on init's one locked thread — no netpoller, no
// goroutine hand-offs between a request arriving and the command starting.
type initConn struct{ fd int }

func (c initConn) send(m *guest.Message, fds ...int) error {
	b, oob, err := guest.Encode(m, fds)
	if err != nil {
		return err
	}
	return unix.Sendmsg(c.fd, b, oob, nil, 0)
}

// tell sends m to the host when no answer to a failure is left: a send fails only when the host
// is gone, which the serve loop's next recv finds (an adoptable sandbox then waits, orphaned).
func (c initConn) tell(m *guest.Message, fds ...int) { _ = c.send(m, fds...) }

// recv blocks for one message and returns it with the file descriptors it carried; a message
// in parts is read whole.
func (c initConn) recv(buf []byte) (*guest.Message, []int, error) {
	oob := make([]byte, unix.CmsgSpace(4*guest.MaxFds))
	n, oobn, flags, err := c.recvmsg(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	m, fds, err := guest.Decode(buf[:n], oob[:oobn], flags)
	if err != nil || m.Kind != guest.MsgParts {
		return m, fds, err
	}
	fail := func(err error) (*guest.Message, []int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	if m.Length <= 0 || m.Length > guest.MaxParts {
		return fail(fmt.Errorf("%w: a message in parts of %d bytes", guest.ErrMalformed, m.Length))
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
			return fail(fmt.Errorf("%w: a part too long", guest.ErrMalformed))
		}
		whole = append(whole, buf[:n]...)
	}
	var full guest.Message
	if err := json.Unmarshal(whole, &full); err != nil {
		return fail(fmt.Errorf("%w: a message in parts: %w", guest.ErrMalformed, err))
	}
	if full.Kind == guest.MsgParts {
		return fail(fmt.Errorf("%w: a message in parts is in parts again", guest.ErrMalformed))
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
