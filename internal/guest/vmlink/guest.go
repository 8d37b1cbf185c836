package vmlink

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// drainWait bounds how long an exec's exit waits for its output to leave the guest.
const drainWait = 2 * time.Second

// Guest is the guest agent's end of a link: it bridges the VM's serial port to the agent's end
// of init's control socket pair, turning each stream the host opens into a pipe (or a socket
// pair) whose other end init gets in place of the host's descriptor.
type Guest struct {
	m   *mux
	ctl int // the agent's end of init's control socket

	// Rewrite, when set, may change a packet for init before it is sent, and add descriptors
	// (the guest agent gives init's configuration its mount sources).
	Rewrite func(b []byte, fds []int) ([]byte, []int, error)
	// Handle answers the host's calls.
	Handle func(kind string, body json.RawMessage) (any, error)
	// Grace, when set, is how long the link outlives its host: when the host's end of the
	// serial port goes away (the daemon died), the agent waits that long for a new host to take
	// the link over (AdoptHost) before the link ends; 0 ends it with the host.
	Grace time.Duration

	token string        // the link's token (fSync); the frame reader's alone
	gen   atomic.Uint64 // counts the hosts the link had: a call of an earlier one is not answered

	toInit chan outPacket // packets for init, in order, written by one goroutine

	mu        sync.Mutex           // guards execs and partsLeft
	execs     map[string][]*stream // the output streams of each running exec
	partsLeft int                  // bytes of a message in parts still to come (not JSON)

	held bool // the writer is held for a save (fQuiesce), until fResume; the frame reader's alone

	upMu    sync.Mutex          // guards uploads
	uploads map[uint32]*os.File // the read ends of upload streams, until Upload takes them
}

type outPacket struct {
	b   []byte
	fds []int
}

// NewGuest makes the guest's end over link (the serial port) and ctl (the agent's end of init's
// control socket pair); it owns both. Set Rewrite and Handle, then Run.
func NewGuest(link io.ReadWriteCloser, ctl *os.File) (*Guest, error) {
	fd, err := unix.Dup(int(ctl.Fd()))
	ctl.Close()
	if err != nil {
		link.Close()
		return nil, err
	}
	unix.CloseOnExec(fd)
	g := &Guest{m: newMux(link, 2), ctl: fd, toInit: make(chan outPacket, 256), execs: map[string][]*stream{}}
	g.m.handle = g.frame
	g.m.lost = g.lost
	return g, nil
}

// lost is the frame reader's answer to a byte stream that ended or went out of step: with a
// Grace, the host is gone (a daemon killed mid-frame leaves a frame cut short, and the serial
// port reads EOF until a new host connects), and the link waits for a new one's fSync, dropping
// everything before it.
func (g *Guest) lost(err error) bool {
	if g.Grace <= 0 {
		return false
	}
	tok, herr := g.m.hunt(fSync, g.token, true, time.Now().Add(g.Grace))
	if herr != nil {
		return false
	}
	g.synced(tok)
	return true
}

// synced takes a new host (fSync with token): what the old host had of the link is dropped, as
// if it had gone away, and the new host hears fSynced.
func (g *Guest) synced(token string) {
	if g.token != "" && token != g.token {
		return // not this VM's host
	}
	g.token = token
	g.gen.Add(1)
	if g.held { // the old host went away during a save
		g.held = false
		g.m.fw.mu.Unlock()
	}
	g.reset()
	_ = g.m.fw.write(fSynced, 0, []byte(token))
}

// Hello tells the host the agent is up.
func (g *Guest) Hello(h Hello) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return g.m.fw.write(fHello, 0, b)
}

// Run bridges until either side ends: the host (the serial port closed) or init (its control
// socket closed, init exited).
func (g *Guest) Run() {
	go g.writeInit()
	go g.readInit()
	go func() {
		<-g.m.done
		_ = unix.Shutdown(g.ctl, unix.SHUT_RDWR)
	}()
	g.m.run()
}

// Close ends the link.
func (g *Guest) Close() { g.m.close() }

// registerUpload opens the stream of a call that uploads (StreamBody.Upload) before any of its
// data arrives: the frame reader calls it as it reads the call.
func (g *Guest) registerUpload(p []byte) {
	var msg callMsg
	var sb StreamBody
	if json.Unmarshal(p, &msg) != nil || json.Unmarshal(msg.Body, &sb) != nil || !sb.Upload {
		return
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return // the handler finds no stream and fails the call
	}
	g.m.open(sb.Stream, fileOf(fds[1], "airlock-vmlink"), false, true).start()
	g.upMu.Lock()
	if g.uploads == nil {
		g.uploads = map[uint32]*os.File{}
	}
	g.uploads[sb.Stream] = os.NewFile(uintptr(fds[0]), "airlock-vmlink-upload")
	g.upMu.Unlock()
}

// Upload takes the reader of upload stream id (a call's StreamBody with Upload); the caller
// closes it.
func (g *Guest) Upload(id uint32) (*os.File, error) {
	g.upMu.Lock()
	defer g.upMu.Unlock()
	f, ok := g.uploads[id]
	if !ok {
		return nil, fmt.Errorf("vm link: no upload stream %d", id)
	}
	delete(g.uploads, id)
	return f, nil
}

// SendStream opens stream id, which the host made for a call's answer (CallStream): what is
// written to the writer goes to the host until it is closed.
func (g *Guest) SendStream(id uint32) (io.WriteCloser, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	g.m.open(id, fileOf(p[0], "airlock-vmlink"), true, false).start()
	return os.NewFile(uintptr(p[1]), "airlock-vmlink-send"), nil
}

func (g *Guest) frame(typ byte, id uint32, p []byte) {
	switch typ {
	case fPacket:
		g.packet(p)
	case fCall:
		p = append([]byte(nil), p...)
		g.registerUpload(p)
		go g.call(id, p)
	case fQuiesce:
		// Everything the host sent before has been read; what this side sends stops at a
		// frame boundary, after the answer, until fResume.
		if !g.held && g.m.fw.hold(fQuiesced, 0) == nil {
			g.held = true
		}
	case fSync:
		g.synced(string(p))
	case fResume:
		if len(p) >= 1 && p[0] == 1 {
			// A VM restored from a save: a new host, with a token of its own.
			if len(p) > 1 {
				g.token = string(p[1:])
			}
			g.gen.Add(1)
			g.reset()
		}
		if g.held {
			g.held = false
			g.m.fw.mu.Unlock()
		}
	}
}

// reset drops the streams of the host this VM was saved with: a restored VM has a new host,
// which knows none of them. Their local ends are closed as if that host had gone away.
func (g *Guest) reset() {
	g.m.mu.Lock()
	old := g.m.streams
	g.m.streams = map[uint32]*stream{}
	g.m.mu.Unlock()
	for _, s := range old {
		s.stop()
		s.push(nil, true)
	}
	g.mu.Lock()
	g.execs = map[string][]*stream{}
	g.partsLeft = 0
	g.mu.Unlock()
	g.upMu.Lock()
	for _, f := range g.uploads {
		f.Close()
	}
	g.uploads = nil
	g.upMu.Unlock()
}

func (g *Guest) call(id uint32, p []byte) {
	gen := g.gen.Load()
	var r reply
	var msg callMsg
	if err := json.Unmarshal(p, &msg); err != nil {
		r.Error = "malformed call: " + err.Error()
	} else if g.Handle == nil {
		r.Error = "no calls are served"
	} else if out, err := g.Handle(msg.Kind, msg.Body); err != nil {
		r.Error = err.Error()
	} else if r.Body, err = json.Marshal(out); err != nil {
		r.Error = err.Error()
	}
	if g.gen.Load() != gen {
		return // asked by a host that is gone: the new one may use the same id
	}
	b, _ := json.Marshal(r)
	_ = g.m.fw.write(fReply, id, b)
}

// packet turns a host packet's streams into descriptors for init and queues it.
func (g *Guest) packet(p []byte) {
	ids, dirs, b, err := decodePacket(p)
	if err != nil {
		return
	}
	var fds []int
	var streams []*stream
	fail := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
		for _, s := range streams { // made, never started
			s.f.Close()
			g.m.mu.Lock()
			delete(g.m.streams, s.id)
			g.m.mu.Unlock()
		}
		for _, id := range ids {
			_ = g.m.fw.write(fStop, id)
		}
	}
	for i, id := range ids {
		theirs, s, err := g.local(id, dirs[i])
		if err != nil {
			fail()
			return
		}
		fds = append(fds, theirs)
		streams = append(streams, s)
	}
	var peek struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		Length int    `json:"length"`
	}
	g.mu.Lock()
	parsed := false
	if g.partsLeft > 0 {
		g.partsLeft -= len(b)
	} else {
		parsed = json.Unmarshal(b, &peek) == nil
		if peek.Kind == guest.MsgParts {
			g.partsLeft = peek.Length
		}
		if peek.Kind == guest.MsgExec && len(streams) == 3 {
			g.execs[peek.ID] = streams[1:]
		}
	}
	g.mu.Unlock()
	if parsed && g.Rewrite != nil {
		if b, fds, err = g.Rewrite(b, fds); err != nil {
			fail()
			// The host hears it as init's own setup error would come.
			msg, _ := json.Marshal(&guest.Message{Kind: guest.MsgError, ID: peek.ID, Error: "guest agent: " + err.Error()})
			_ = g.m.fw.write(fPacket, 0, encodePacket(nil, nil, msg)...)
			return
		}
	}
	for _, s := range streams {
		s.start()
	}
	g.toInit <- outPacket{b: append([]byte(nil), b...), fds: fds}
}

// local makes the guest's side of stream id: a pipe or a socket pair, one end for the agent to
// pump, the other (returned) for init.
func (g *Guest) local(id uint32, dir Direction) (int, *stream, error) {
	if dir == Both {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, nil, err
		}
		return fds[1], g.m.open(id, fileOf(fds[0], "airlock-vmlink"), true, true), nil
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, err
	}
	if dir == ToPeer { // the host sends: init reads
		return p[0], g.m.open(id, fileOf(p[1], "airlock-vmlink"), false, true), nil
	}
	return p[1], g.m.open(id, fileOf(p[0], "airlock-vmlink"), true, false), nil
}

// writeInit sends the host's packets to init, in order.
func (g *Guest) writeInit() {
	for {
		select {
		case p := <-g.toInit:
			var oob []byte
			if len(p.fds) > 0 {
				oob = unix.UnixRights(p.fds...)
			}
			for {
				if err := unix.Sendmsg(g.ctl, p.b, oob, nil, 0); err != unix.EINTR {
					break
				}
			}
			for _, fd := range p.fds {
				unix.Close(fd)
			}
		case <-g.m.done:
			return
		}
	}
}

// readInit sends init's packets to the host. An exec's exit waits for its output to have left
// first (drainWait at most), so the host has all of it when it hears the exit.
func (g *Guest) readInit() {
	defer g.m.close()
	buf := make([]byte, guest.MaxMessage)
	oob := make([]byte, unix.CmsgSpace(4*guest.MaxRecvFds))
	for {
		n, oobn, _, _, err := unix.Recvmsg(g.ctl, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		if oobn > 0 {
			// Init sends descriptors only to a host that can hold them (a terminal's master
			// without a relay, the layer): none of those crosses a link.
			if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, cm := range cmsgs {
					if fds, err := unix.ParseUnixRights(&cm); err == nil {
						for _, fd := range fds {
							unix.Close(fd)
						}
					}
				}
			}
		}
		var peek struct {
			Kind string `json:"kind"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(buf[:n], &peek) == nil && (peek.Kind == guest.MsgExited || peek.Kind == guest.MsgError) && peek.ID != "" {
			g.mu.Lock()
			outs := g.execs[peek.ID]
			delete(g.execs, peek.ID)
			g.mu.Unlock()
			for _, s := range outs {
				s.drained(drainWait)
			}
		}
		if err := g.m.fw.write(fPacket, 0, encodePacket(nil, nil, buf[:n])...); err != nil {
			return
		}
	}
}
