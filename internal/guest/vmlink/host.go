package vmlink

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// Host is the host's end of a link: it bridges init's end of a control socket pair (the one
// guest/host's Launch hands a level to start init with) to the VM's serial port.
type Host struct {
	m   *mux
	ctl int // init's end of the control socket pair: what the host side of init talks to

	mu       sync.Mutex // guards calls, id and quiesced
	calls    map[uint32]chan reply
	id       uint32
	quiesced chan struct{} // closed by the guest's fQuiesced (Quiesce)

	hello chan Hello
	token string // the link's (fSync): a later host presents it to take the link over
}

// NewHost bridges ctl, init's end of a SOCK_SEQPACKET control socket pair, to link, the byte
// stream of the VM's serial port; it owns both from then on. It returns at once.
func NewHost(link io.ReadWriteCloser, ctl *os.File) (*Host, error) {
	return newHost(link, ctl, 1, linkNew, "")
}

// ResumeHost is NewHost for a VM restored from a save that Quiesce prepared: the guest agent is
// told to drop the streams of the host it was saved with (what their processes write gets
// EPIPE, as when an exec's host went away) and to go on. The new host's stream ids start at a
// random place, apart from the old host's that may still be in flight.
func ResumeHost(link io.ReadWriteCloser, ctl *os.File) (*Host, error) {
	first, err := randomFirst()
	if err != nil {
		link.Close()
		ctl.Close()
		return nil, err
	}
	return newHost(link, ctl, first, linkRestored, "")
}

// AdoptHost takes over the link of a VM whose host is gone (a daemon killed and started again),
// given the link's token (Token, recorded by the first host): it sends fSync until the guest
// agent answers with the same token — which proves it is that VM's agent — or wait has passed,
// and drops whatever came before the answer (the old host's frames, cut short). The agent drops
// the old host's streams; init goes on as it was.
func AdoptHost(link io.ReadWriteCloser, ctl *os.File, token string, wait time.Duration) (*Host, error) {
	first, err := randomFirst()
	if err != nil {
		link.Close()
		ctl.Close()
		return nil, err
	}
	return newHost(link, ctl, first, linkAdopted, token, wait)
}

// randomFirst is a host's first stream id, at a random place apart from an earlier host's ids
// that may still be in flight.
func randomFirst() (uint32, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b[:])>>2 | 1<<30 | 1, nil // odd, far from 1
}

// How a host comes to its link.
const (
	linkNew      = iota // a VM that boots
	linkRestored        // a VM restored from a save (ResumeHost)
	linkAdopted         // a running VM whose host is gone (AdoptHost)
)

// syncRetry is how often an adopting host sends fSync again until the guest agent answers: a
// guest reading the old host's frames out of step may have taken one for data.
const syncRetry = 250 * time.Millisecond

func newHost(link io.ReadWriteCloser, ctl *os.File, first uint32, how int, token string, wait ...time.Duration) (*Host, error) {
	fd, err := unix.Dup(int(ctl.Fd()))
	ctl.Close()
	if err != nil {
		link.Close()
		return nil, fmt.Errorf("vm link: %w", err)
	}
	unix.CloseOnExec(fd)
	if token == "" {
		if token, err = NewToken(); err != nil {
			link.Close()
			unix.Close(fd)
			return nil, fmt.Errorf("vm link: %w", err)
		}
	}
	h := &Host{m: newMux(link, first), ctl: fd, calls: map[uint32]chan reply{}, hello: make(chan Hello, 1), token: token}
	h.m.handle = h.frame
	switch how {
	case linkNew:
		err = h.m.fw.write(fSync, 0, []byte(token))
	case linkRestored:
		err = h.m.fw.write(fResume, 0, append([]byte{1}, token...))
	case linkAdopted:
		err = h.sync(wait[0])
	}
	if err != nil {
		link.Close()
		unix.Close(fd)
		return nil, fmt.Errorf("vm link: %w", err)
	}
	// ctl is closed last, once neither the frame reader (which sends init's packets on it) nor
	// readControl uses it: a descriptor closed earlier could be another socket of the process's
	// by then, which a late send or shutdown would reach.
	var users sync.WaitGroup
	users.Add(2)
	go func() { defer users.Done(); h.m.run() }()
	go func() { defer users.Done(); h.readControl() }()
	go func() {
		<-h.m.done
		// Wakes readControl, and tells the host side of init that init is gone.
		_ = unix.Shutdown(h.ctl, unix.SHUT_RDWR)
		h.mu.Lock()
		for id, ch := range h.calls {
			close(ch)
			delete(h.calls, id)
		}
		h.mu.Unlock()
		users.Wait()
		unix.Close(h.ctl)
	}()
	return h, nil
}

// sync sends fSync until the guest agent's fSynced with the link's token arrives, or wait passed.
func (h *Host) sync(wait time.Duration) error {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(syncRetry)
		defer t.Stop()
		for {
			if h.m.fw.write(fSync, 0, []byte(h.token)) != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	timer := time.AfterFunc(wait, func() { h.m.c.Close() })
	_, err := h.m.hunt(fSynced, h.token, false, time.Time{})
	expired := !timer.Stop()
	close(stop)
	<-stopped // every fSync is out before anything else goes
	if expired {
		return fmt.Errorf("the guest agent did not answer with the link's token within %v (not this VM's, or it is not running)", wait)
	}
	if err != nil {
		return fmt.Errorf("the guest agent did not answer with the link's token: %w", err)
	}
	return nil
}

// Token is the link's token, which a later host needs to take it over (AdoptHost).
func (h *Host) Token() string { return h.token }

// Quiesce brings the link to rest for a save of the VM: once it returns, neither side sends
// anything, and both have received everything the other sent, so the byte stream is at a frame
// boundary both ways and nothing is in flight. Resume (or, in a VM restored from the save,
// ResumeHost) ends it; on an error the link is resumed already.
func (h *Host) Quiesce(ctx context.Context) error {
	ch := make(chan struct{})
	h.mu.Lock()
	h.quiesced = ch
	h.mu.Unlock()
	if err := h.m.fw.hold(fQuiesce, 0); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		_ = h.m.fw.release(fResume, 0, []byte{0})
		return fmt.Errorf("vm link: the guest agent did not come to rest: %w", ctx.Err())
	case <-h.m.done:
		_ = h.m.fw.release(fResume, 0, []byte{0})
		return ErrClosed
	}
}

// Resume lets the link go on after Quiesce.
func (h *Host) Resume() error { return h.m.fw.release(fResume, 0, []byte{0}) }

// Hello delivers the guest agent's hello once it booted.
func (h *Host) Hello() <-chan Hello { return h.hello }

// Done is closed when the link has ended (the VM is gone, or Close).
func (h *Host) Done() <-chan struct{} { return h.m.done }

// Close ends the link.
func (h *Host) Close() { h.m.close() }

// Call asks the guest agent kind (with body, when not nil) and decodes its answer into out.
func (h *Host) Call(ctx context.Context, kind string, body, out any) error {
	msg := callMsg{Kind: kind}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		msg.Body = b
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return h.call(ctx, b, out, nil)
}

// call sends the encoded call b and waits for its answer; sent, when set, runs once it is sent.
func (h *Host) call(ctx context.Context, b []byte, out any, sent func()) error {
	ch := make(chan reply, 1)
	h.mu.Lock()
	h.id++
	id := h.id
	h.calls[id] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.calls, id)
		h.mu.Unlock()
	}()
	if err := h.m.fw.write(fCall, id, b); err != nil {
		return err
	}
	if sent != nil {
		sent()
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return ErrClosed
		}
		if r.Error != "" {
			return errors.New(r.Error)
		}
		if out != nil {
			return json.Unmarshal(r.Body, out)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.m.done:
		return ErrClosed
	}
}

// StreamBody is the body of a call that answers with a stream (CallStream): the stream's id, and
// the call's own body.
type StreamBody struct {
	Stream uint32          `json:"stream"`
	Body   json.RawMessage `json:"body,omitempty"`
	// Upload says the stream carries data to the guest (CallUpload), not from it.
	Upload bool `json:"upload,omitempty"`
}

// CallReader asks the guest agent kind with body, which answers (into out) and then writes a
// stream of bytes: the reader returned reads it. Closing the reader stops the stream.
func (h *Host) CallReader(ctx context.Context, kind string, body, out any) (io.ReadCloser, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s := h.m.open(0, pw, false, true)
	s.start()
	b, err := json.Marshal(body)
	if err != nil {
		pr.Close()
		return nil, err
	}
	if err := h.Call(ctx, kind, StreamBody{Stream: s.id, Body: b}, out); err != nil {
		pr.Close()
		return nil, err
	}
	return pr, nil
}

// CallUpload asks the guest agent kind with body and src as a stream the agent reads
// (Guest.Upload), and decodes its answer into out. An error reading src is returned (the agent
// saw the stream end early).
func (h *Host) CallUpload(ctx context.Context, kind string, body any, src io.Reader, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	s := h.m.open(0, pr, true, false)
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(pw, src)
		pw.Close()
		copied <- err
	}()
	msg, err := json.Marshal(callMsg{Kind: kind, Body: mustJSON(StreamBody{Stream: s.id, Body: b, Upload: true})})
	if err != nil {
		return err
	}
	// The agent registers the stream when it reads the call, before any of its data.
	err = h.call(ctx, msg, out, s.start)
	s.stop() // the agent read what it wanted; what is left of src is not sent
	pr.Close()
	if cerr := <-copied; cerr != nil && !errors.Is(cerr, syscall.EPIPE) {
		return errors.Join(cerr, err)
	}
	return err
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// CallStream asks the guest agent kind, which writes its answer as a stream of bytes: they are
// copied to w. It returns once the answer and all of the stream arrived.
func (h *Host) CallStream(ctx context.Context, kind string, w io.Writer) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	s := h.m.open(0, pw, false, true)
	s.start()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, pr)
		pr.Close() // a copy cut short leaves the stream writing to a closed pipe: it stops
		copied <- err
	}()
	if err := h.Call(ctx, kind, StreamBody{Stream: s.id}, nil); err != nil {
		pr.Close()
		return errors.Join(err, <-copied)
	}
	select {
	case err := <-copied:
		return err
	case <-ctx.Done():
		pr.Close()
		return errors.Join(ctx.Err(), <-copied)
	}
}

func (h *Host) frame(typ byte, id uint32, p []byte) {
	switch typ {
	case fPacket:
		ids, _, b, err := decodePacket(p)
		if err != nil {
			return
		}
		for _, sid := range ids {
			// The guest sends the host no descriptors (terminals are relayed): refuse them.
			_ = h.m.fw.write(fStop, sid)
		}
		// A send fails only when the host side is gone, which the control reader sees.
		_ = unix.Sendmsg(h.ctl, b, nil, nil, 0)
	case fReply:
		var r reply
		if err := json.Unmarshal(p, &r); err != nil {
			r.Error = "malformed reply: " + err.Error()
		}
		h.mu.Lock()
		ch := h.calls[id]
		h.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	case fQuiesced:
		h.mu.Lock()
		if h.quiesced != nil {
			close(h.quiesced)
			h.quiesced = nil
		}
		h.mu.Unlock()
	case fHello:
		var hello Hello
		if err := json.Unmarshal(p, &hello); err != nil {
			hello.Error = "malformed hello: " + err.Error()
		}
		select {
		case h.hello <- hello:
		default:
		}
	}
}

// readControl forwards the host side's packets to the guest, each descriptor as a stream.
func (h *Host) readControl() {
	defer h.m.close()
	buf := make([]byte, guest.MaxMessage)
	oob := make([]byte, unix.CmsgSpace(4*guest.MaxFds))
	for {
		n, oobn, _, _, err := unix.Recvmsg(h.ctl, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return // the host side closed its end: the sandbox is being destroyed
		}
		var fds []int
		if oobn > 0 {
			if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, cm := range cmsgs {
					if f, err := unix.ParseUnixRights(&cm); err == nil {
						fds = append(fds, f...)
					}
				}
			}
		}
		if err := h.forward(buf[:n], fds); err != nil {
			return
		}
	}
}

// forward sends one packet with its descriptors as new streams. An exec's three are its stdin
// (sent) and its outputs (received); any other descriptor goes the way its access mode says.
func (h *Host) forward(b []byte, fds []int) error {
	var peek struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(b, &peek) // a part of a long message is no JSON: its kind is ""
	ids := make([]uint32, len(fds))
	dirs := make([]Direction, len(fds))
	streams := make([]*stream, len(fds))
	for i, fd := range fds {
		dir := Both
		switch {
		case peek.Kind == guest.MsgExec && len(fds) == 3 && i == 0:
			dir = ToPeer
		case peek.Kind == guest.MsgExec && len(fds) == 3:
			dir = FromPeer
		default:
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
				switch fl & unix.O_ACCMODE {
				case unix.O_RDONLY:
					dir = ToPeer
				case unix.O_WRONLY:
					dir = FromPeer
				}
			}
		}
		s := h.m.open(0, fileOf(fd, "airlock-vmlink"), dir != FromPeer, dir != ToPeer)
		ids[i], dirs[i], streams[i] = s.id, dir, s
	}
	if err := h.m.fw.write(fPacket, 0, encodePacket(ids, dirs, b)...); err != nil {
		return err
	}
	for _, s := range streams {
		s.start()
	}
	return nil
}
