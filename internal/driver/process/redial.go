package process

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
)

// A sandbox whose kernel can be saved and restored (gVisor's checkpoint) cannot hold host
// descriptors across a save: a host socket is closed when the kernel is saved, in the sandbox that
// goes on running as in every copy restored from the image, and a descriptor the host passed in
// cannot be saved at all. So in such a sandbox:
//
//   - init dials its control socket by path (controlEnv, a host socket the runtime lets the
//     sandbox reach) instead of inheriting it, and dials again when it breaks, presenting the token
//     its configuration carried (msgHello): the driver that listens there — the same one, or the
//     one that restored a copy — takes it back;
//   - every exec's standard streams are relayed by init through pipes of the sandbox's own kernel
//     (stdioRelay), so that commands, and the background processes they leave, never hold a host
//     descriptor; init itself lets go of the host's ends before a save (msgQuiesce).

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

// redial replaces a broken control socket: it dials until a driver answers or redialWindow has
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
		srv.ctl.send(&guest.Message{Kind: guest.MsgError, ID: id, Error: fmt.Sprintf("exec %s is running", r.id)})
		return
	}
	srv.relayMu.Lock()
	for r := range srv.relays {
		r.detach()
	}
	srv.relays = map[*stdioRelay]bool{}
	srv.relayMu.Unlock()
	srv.ctl.send(&guest.Message{Kind: guest.MsgQuiesce, ID: id})
}

// stdioRelay copies one exec's standard streams between the descriptors the driver sent (host
// pipes, files or sockets) and pipes of the sandbox's kernel that the command gets. Output is
// copied until the command's pipe ends — when the command and every process that inherited it
// have closed it — or the host's end fails, as a pipe the command held itself would. Once
// detached (quiesce), output is read and dropped: a background process that writes to a stream
// its exec left behind goes on running, in this sandbox and in every copy restored.
type stdioRelay struct {
	host    [3]*os.File // init's copies of the driver's descriptors
	inner   [3]*os.File // init's ends of the sandbox's pipes: stdin's write end, the outputs' read ends
	child   [3]int      // the command's ends, closed once it started
	cut     atomic.Bool // detached: the host's ends are closed
	pending sync.WaitGroup
}

// newStdioRelay makes the pipes for fds, the driver's stdin, stdout and stderr.
func newStdioRelay(fds []int) (*stdioRelay, error) {
	r := &stdioRelay{child: [3]int{-1, -1, -1}}
	for i, fd := range fds {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("stdio relay: %w", err)
		}
		unix.SetNonblock(nfd, true)
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
		unix.SetNonblock(ours, true)
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
		io.Copy(r.inner[0], r.host[0])
		r.inner[0].Close()
	}()
	for i := 1; i <= 2; i++ {
		go func() {
			defer r.pending.Done()
			r.copyOut(i)
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

// copyOut copies the command's stream i to the host until either ends; once detached, it drops
// what it reads until the command's end closes.
func (r *stdioRelay) copyOut(i int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.inner[i].Read(buf)
		if n > 0 && !r.cut.Load() {
			if _, werr := r.host[i].Write(buf[:n]); werr != nil && !r.cut.Load() {
				return
			}
		}
		if err != nil {
			return
		}
	}
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

// tokenFile is the file, beside a memory image, that holds the token its init presents.
const tokenFile = "airlock-control.token"

// newToken returns a fresh random token.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// helloTimeout bounds the wait for a dialled connection's hello: anything else that connects
// (only the sandbox's root could) is turned away.
const helloTimeout = 2 * time.Second

// accept waits on the Launcher's Control listener for init: the first connection, when token is
// "" (a fresh init, which no other process of the sandbox precedes), or one that says hello with
// token. It gives up when ctx ends or init exits.
func (s *Sandbox) accept(ctx context.Context, token string) (*net.UnixConn, error) {
	l := s.ext.Control
	stop := context.AfterFunc(ctx, func() { l.SetDeadline(time.Now()) })
	defer stop()
	go func() {
		select {
		case <-s.exited:
			l.SetDeadline(time.Now())
		case <-ctx.Done():
		}
	}()
	buf := make([]byte, guest.MaxReply)
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("control socket: %w", err)
		}
		if token == "" {
			return c, nil
		}
		c.SetReadDeadline(time.Now().Add(helloTimeout))
		cc := newUnixConn(c)
		m, err := cc.recv(buf)
		if err == nil {
			m.CloseFiles()
		}
		if err == nil && m.Kind == guest.MsgHello && subtle.ConstantTimeCompare([]byte(m.Token), []byte(token)) == 1 {
			c.SetReadDeadline(time.Time{})
			return c, nil
		}
		s.d.log.Warn("turned away a connection to the control socket", "sandbox", s.id, "err", err)
		c.Close()
	}
}

// rejoin waits for init to dial its control socket again after it broke, and reports whether it
// did; it gives up when init exits, the sandbox is destroyed, or redialWindow has passed.
func (s *Sandbox) rejoin() bool {
	if s.ext == nil || s.ext.Control == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), guest.RedialWindow+time.Second)
	defer cancel()
	c, err := s.accept(ctx, s.token)
	if err != nil || !s.ctl.swap(c) {
		return false
	}
	s.mu.Lock()
	close(s.rejoined)
	s.rejoined = make(chan struct{})
	s.mu.Unlock()
	s.d.log.Debug("init dialled its control socket again", "sandbox", s.id)
	return true
}

// nextRejoin returns a channel closed when init next dials its control socket again.
func (s *Sandbox) nextRejoin() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejoined
}

// snapshotMemory runs a Launcher's Snapshot that saves the sandbox's kernel: between execs (the
// gate keeps new ones waiting), with init holding no host descriptor (msgQuiesce), and returns
// once init has dialled its control socket again — the save closed it. The token init presents
// is written beside the image, for the driver that restores it.
func (s *Sandbox) snapshotMemory(ctx context.Context, w io.Writer, mem string) (bool, error) {
	if s.paused {
		return false, fmt.Errorf("snapshot: sandbox %s is paused, and a snapshot with memory needs init to answer; resume it, or ask for files only (memory: false): %w", s.id, errdefs.ErrConflict)
	}
	if !s.gate.TryLock() {
		return false, fmt.Errorf("snapshot: an exec is running in sandbox %s, and a snapshot with memory is taken between execs; wait for it, or ask for files only (memory: false): %w", s.id, errdefs.ErrConflict)
	}
	defer s.gate.Unlock()
	if _, err := s.request(ctx, guest.MsgQuiesce); err != nil {
		return false, fmt.Errorf("snapshot: %w: %w", err, errdefs.ErrConflict)
	}
	rejoined := s.nextRejoin()
	memory, err := s.ext.Snapshot(ctx, w, mem, false)
	if !memory {
		return false, err
	}
	select {
	case <-rejoined:
	case <-s.done:
		return false, fmt.Errorf("snapshot: sandbox %s ended while it was saved: %w", s.id, errdefs.ErrConflict)
	case <-time.After(guest.RedialWindow):
		return false, fmt.Errorf("snapshot: init of sandbox %s did not come back after the save", s.id)
	}
	if err != nil {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(mem, tokenFile), []byte(s.token), 0o600); err != nil {
		return false, fmt.Errorf("snapshot: %w", err)
	}
	return true, nil
}

// request sends init a message of kind and waits for its answer of the same kind, which it
// returns with the descriptors it brought; an error answer is an error.
func (s *Sandbox) request(ctx context.Context, kind string) (*guest.Message, error) {
	return s.ask(ctx, kind, kind)
}

// requests tells requests apart.
var requests atomic.Int64

// ask sends init a message of kind and waits for its answer, of kind answer.
func (s *Sandbox) ask(ctx context.Context, kind, answer string) (*guest.Message, error) {
	id := fmt.Sprintf("%s-%d", kind, requests.Add(1))
	reply := make(chan *guest.Message, 1)
	s.mu.Lock()
	s.waiters[id] = reply
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, id)
		s.mu.Unlock()
	}()
	if err := s.ctl.send(&guest.Message{Kind: kind, ID: id}); err != nil {
		return nil, fmt.Errorf("init is gone: %w", err)
	}
	select {
	case m := <-reply:
		if m.Kind != answer {
			m.CloseFiles()
			return nil, errors.New(m.Error)
		}
		return m, nil
	case <-s.done:
		return nil, fmt.Errorf("sandbox %s has ended: %w", s.id, errdefs.ErrConflict)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
