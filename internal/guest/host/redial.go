package host

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
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
)

// A sandbox whose kernel can be saved and restored (gVisor's checkpoint) cannot hold host
// descriptors across a save: a host socket is closed when the kernel is saved, in the sandbox that
// goes on running as in every copy restored from the image, and a descriptor the host passed in
// cannot be saved at all. So in such a sandbox:
//
//   - init dials its control socket by path (guest.ControlEnv, a host socket the runtime lets the
//     sandbox reach) instead of inheriting it, and dials again when it breaks, presenting the
//     token its configuration carried (MsgHello): the host that listens there — the same one, or
//     the one that restored a copy — takes it back;
//   - every exec's standard streams are relayed by init through pipes of the sandbox's own kernel
//     (pid1's stdio relay), so that commands, and the background processes they leave, never
//     hold a host descriptor; init itself lets go of the host's ends before a save (MsgQuiesce).

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
	l := s.l.Control
	// A deadline fails only on a closed listener, whose Accept fails anyway.
	stop := context.AfterFunc(ctx, func() { _ = l.SetDeadline(time.Now()) })
	defer stop()
	go func() {
		select {
		case <-s.exited:
			_ = l.SetDeadline(time.Now())
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
		// As for the listener: on a closed connection, recv fails too.
		_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
		cc := newUnixConn(c)
		m, err := cc.recv(buf)
		if err == nil {
			m.CloseFiles()
		}
		if err == nil && m.Kind == guest.MsgHello && subtle.ConstantTimeCompare([]byte(m.Token), []byte(token)) == 1 {
			_ = c.SetReadDeadline(time.Time{})
			return c, nil
		}
		s.rt.log.Warn("turned away a connection to the control socket", "sandbox", s.id, "err", err)
		c.Close()
	}
}

// rejoin waits for init to dial its control socket again after it broke, and reports whether it
// did; it gives up when init exits, the sandbox is destroyed, or guest.RedialWindow has passed.
func (s *Sandbox) rejoin() bool {
	if s.l.Control == nil {
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
	s.rt.log.Debug("init dialled its control socket again", "sandbox", s.id)
	return true
}

// nextRejoin returns a channel closed when init next dials its control socket again.
func (s *Sandbox) nextRejoin() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejoined
}

// snapshotMemory runs a Launcher's Snapshot that saves the sandbox's kernel: between execs (the
// gate keeps new ones waiting), with init holding no host descriptor (MsgQuiesce), and returns
// once init has dialled its control socket again — the save closed it. The token init presents
// is written beside the image, for the host that restores it.
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
	memory, err := s.l.Snapshot(ctx, w, mem, false)
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
