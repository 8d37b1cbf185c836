package pid1

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// A terminal made in a sandbox whose kernel is its own (gVisor) is that kernel's object: its
// master cannot be handed to the host over the control socket as a descriptor, as pipes and
// sockets made by the host can. There the host sends a socket instead, and init relays between
// it and the master; the host reads and writes the socket as it would the master, sends resizes
// as messages (guest.MsgResize), and ends the input by shutting the socket's write side.

// relay is one terminal's relay, in init.
type relay struct {
	master, sock *os.File // init's own copies
	out          *outCopy // the terminal's output, counting for drain.go
}

// newRelay copies master and sock for a relay.
func newRelay(master, sock int) (*relay, error) {
	dup := func(fd int) (*os.File, error) {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("terminal relay: %w", err)
		}
		// Non-blocking, so that the runtime's poller waits and Close interrupts a read.
		if err := unix.SetNonblock(nfd, true); err != nil {
			unix.Close(nfd)
			return nil, fmt.Errorf("terminal relay: %w", err)
		}
		return os.NewFile(uintptr(nfd), "relay"), nil
	}
	m, err := dup(master)
	if err != nil {
		return nil, err
	}
	s, err := dup(sock)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &relay{master: m, sock: s, out: &outCopy{src: m}}, nil
}

// start copies the terminal's output to the socket until the master reads EIO (the last process
// holding its slave has gone), then shuts the socket's write side: the host's EOF. Input is
// typed into the terminal, and the socket's EOF typed as the terminal's EOF (typeEOF). Both
// copies run on goroutines of their own, which do nothing else: init's thread stays the one that
// starts commands.
func (r *relay) start() {
	out, in := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(out)
		r.out.run(r.sock, nil)
		if rc, err := r.sock.SyscallConn(); err == nil {
			// The host's EOF; failing, the socket was closed or disconnected already.
			_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_WR) })
		}
	}()
	go func() {
		defer close(in)
		w := &guest.LastByte{W: r.master}
		if _, err := io.Copy(w, r.sock); err == nil {
			guest.TypeEOF(r.master, w)
		}
	}()
	go func() {
		<-out
		// The command is over; the host closes its end when the exec ends.
		<-in
		r.close()
	}()
}

func (r *relay) close() {
	r.master.Close()
	r.sock.Close()
}
