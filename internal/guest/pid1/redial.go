package pid1

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// dialControl connects to the control socket at path.
func dialControl(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("control socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("control socket %s: %w", path, err)
	}
	return fd, nil
}

// redial replaces a broken control socket: it dials until a host answers or guest.RedialWindow has
// passed, and reports whether it got one.
func (srv *initServer) redial() bool {
	unix.Close(srv.ctl.fd)
	srv.ctl.fd = -1
	for deadline := time.Now().Add(guest.RedialWindow); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		fd, err := dialControl(srv.dial)
		if err != nil {
			continue
		}
		c := initConn{fd: fd}
		if c.send(&guest.Message{Kind: guest.MsgHello, Token: srv.token}) != nil {
			unix.Close(fd)
			continue
		}
		srv.ctl = c
		return true
	}
	return false
}

// quiesce lets go of every host descriptor init holds but the control socket: the host's ends of
// relayed streams. A command still running refuses it: its streams are its exec's.
func (srv *initServer) quiesce(id string) {
	for _, r := range srv.procs {
		srv.ctl.tell(&guest.Message{Kind: guest.MsgError, ID: id, Error: fmt.Sprintf("exec %s is running", r.id)})
		return
	}
	for _, p := range srv.exits {
		srv.ctl.tell(&guest.Message{Kind: guest.MsgError, ID: id, Error: fmt.Sprintf("exec %s is sending its output", p.m.ID)})
		return
	}
	srv.relayMu.Lock()
	for r := range srv.relays {
		r.detach()
	}
	srv.relays = map[*stdioRelay]bool{}
	srv.relayMu.Unlock()
	srv.ctl.tell(&guest.Message{Kind: guest.MsgQuiesce, ID: id})
}

// stdioRelay copies one exec's standard streams between the descriptors the host sent (host
// pipes, files or sockets) and pipes of the sandbox's kernel that the command gets. Output is
// copied until the command's pipe ends — when the command and every process that inherited it
// have closed it — or the host's end fails, as a pipe the command held itself would. Once
// detached (quiesce), output is read and dropped: a background process that writes to a stream
// its exec left behind goes on running, in this sandbox and in every copy restored.
type stdioRelay struct {
	host    [3]*os.File // init's copies of the host's descriptors
	inner   [3]*os.File // init's ends of the sandbox's pipes: stdin's write end, the outputs' read ends
	child   [3]int      // the command's ends, closed once it started
	outs    [3]*outCopy // the output copies (1 and 2), counting for drain.go
	cut     atomic.Bool // detached: the host's ends are closed
	pending sync.WaitGroup
}

// newStdioRelay makes the pipes for fds, the host's stdin, stdout and stderr.
func newStdioRelay(fds []int) (*stdioRelay, error) {
	r := &stdioRelay{child: [3]int{-1, -1, -1}}
	for i, fd := range fds {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("stdio relay: %w", err)
		}
		// Non-blocking before os.NewFile, which makes only such a descriptor pollable.
		if err := unix.SetNonblock(nfd, true); err != nil {
			unix.Close(nfd)
			r.close()
			return nil, fmt.Errorf("stdio relay: %w", err)
		}
		r.host[i] = os.NewFile(uintptr(nfd), "relay-host")
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			r.close()
			return nil, fmt.Errorf("stdio relay: %w", err)
		}
		ours, theirs := p[0], p[1] // output: init reads
		if i == 0 {
			ours, theirs = p[1], p[0] // input: init writes
		}
		if err := unix.SetNonblock(ours, true); err != nil {
			unix.Close(ours)
			unix.Close(theirs)
			r.close()
			return nil, fmt.Errorf("stdio relay: %w", err)
		}
		r.inner[i], r.child[i] = os.NewFile(uintptr(ours), "relay-inner"), theirs
	}
	return r, nil
}

// start copies the streams on goroutines of their own (init's thread stays the one that starts
// commands), closes the command's ends, and calls done once every copy has ended.
func (r *stdioRelay) start(done func()) {
	r.closeChild()
	r.pending.Add(3)
	go func() {
		defer r.pending.Done()
		// It ends at the host's EOF, or once the command's end of the pipe is closed.
		_, _ = io.Copy(r.inner[0], r.host[0])
		r.inner[0].Close()
	}()
	for i := 1; i <= 2; i++ {
		r.outs[i] = &outCopy{src: r.inner[i]}
	}
	for i := 1; i <= 2; i++ {
		go func() {
			defer r.pending.Done()
			// Once detached, what is read is dropped until the command's end closes.
			r.outs[i].run(r.host[i], r.cut.Load)
			r.inner[i].Close()
			r.host[i].Close()
		}()
	}
	go func() {
		r.pending.Wait()
		r.host[0].Close()
		done()
	}()
}

// detach closes the host's ends: a pending read or write on them returns at once.
func (r *stdioRelay) detach() {
	r.cut.Store(true)
	for _, f := range r.host {
		f.Close()
	}
}

func (r *stdioRelay) closeChild() {
	for i, fd := range r.child {
		if fd >= 0 {
			unix.Close(fd)
			r.child[i] = -1
		}
	}
}

// close releases a relay that never started.
func (r *stdioRelay) close() {
	r.closeChild()
	for i := range r.host {
		if r.host[i] != nil {
			r.host[i].Close()
		}
		if r.inner[i] != nil {
			r.inner[i].Close()
		}
	}
}
