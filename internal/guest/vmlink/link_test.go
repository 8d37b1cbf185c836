package vmlink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// pair is a connected SOCK_SEQPACKET pair: the host side's end and init's.
func pair(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
}

// streamPair is a connected SOCK_STREAM pair: the two ends of the "serial port".
func streamPair(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "serial-host"), os.NewFile(uintptr(fds[1]), "serial-guest")
}

// linked is a host and a guest agent over a socket pair, the agent answering calls with handle.
func linked(t *testing.T, handle func(g *Guest, kind string, body json.RawMessage) (any, error)) *Host {
	t.Helper()
	hostSide, initEnd := pair(t)
	t.Cleanup(func() { hostSide.Close() })
	agentEnd, initSide := pair(t)
	t.Cleanup(func() { initSide.Close() })
	hs, gs := streamPair(t)
	h, err := NewHost(hs, initEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	g, err := NewGuest(gs, agentEnd)
	if err != nil {
		t.Fatal(err)
	}
	g.Handle = func(kind string, body json.RawMessage) (any, error) { return handle(g, kind, body) }
	go g.Run()
	return h
}

// TestExecThroughLink sends an exec with its three descriptors across a link to a fake init,
// which echoes stdin to stdout upper-cased, writes 1 MiB to stderr, and exits: the host sees
// every byte before the exit, and EOF on both outputs.
func TestExecThroughLink(t *testing.T) {
	hostSide, initEnd := pair(t)
	agentEnd, initSide := pair(t)
	hs, gs := streamPair(t)
	h, err := NewHost(hs, initEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	g, err := NewGuest(gs, agentEnd)
	if err != nil {
		t.Fatal(err)
	}
	g.Handle = func(kind string, _ json.RawMessage) (any, error) { return Stats{Pids: 7}, nil }
	go g.Run()
	if err := g.Hello(Hello{Kernel: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case hello := <-h.Hello():
		if hello.Kernel != "test" {
			t.Fatalf("hello %+v", hello)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hello")
	}
	var st Stats
	if err := h.Call(context.Background(), "stats", nil, &st); err != nil || st.Pids != 7 {
		t.Fatalf("call: %+v %v", st, err)
	}

	// The fake init. It stays until the test ends: init gone ends the link, and with it what
	// the exec's streams still had to send.
	defer initSide.Close()
	go func() {
		fd := int(initSide.Fd())
		buf := make([]byte, 1<<16)
		oob := make([]byte, unix.CmsgSpace(4*3))
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			t.Errorf("fake init: %v", err)
			return
		}
		m, fds, err := guest.Decode(buf[:n], oob[:oobn], 0)
		if err != nil || m.Kind != guest.MsgExec || len(fds) != 3 {
			t.Errorf("fake init got %+v %v %v", m, fds, err)
			return
		}
		in, out, errf := os.NewFile(uintptr(fds[0]), "in"), os.NewFile(uintptr(fds[1]), "out"), os.NewFile(uintptr(fds[2]), "err")
		data, _ := io.ReadAll(in)
		_, _ = out.Write(bytes.ToUpper(data))
		_, _ = errf.Write(bytes.Repeat([]byte("e"), 1<<20))
		in.Close()
		out.Close()
		errf.Close()
		b, _, _ := guest.Encode(&guest.Message{Kind: guest.MsgExited, ID: m.ID}, nil)
		_ = unix.Sendmsg(fd, b, nil, nil, 0)
	}()

	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	b, oob, _ := guest.Encode(&guest.Message{Kind: guest.MsgExec, ID: "x1"}, []int{int(inR.Fd()), int(outW.Fd()), int(errW.Fd())})
	if err := unix.Sendmsg(int(hostSide.Fd()), b, oob, nil, 0); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	go func() {
		_, _ = inW.WriteString(strings.Repeat("hello ", 50000))
		inW.Close()
	}()
	outC, errC := make(chan []byte), make(chan []byte)
	go func() { b, _ := io.ReadAll(outR); outC <- b }()
	go func() { b, _ := io.ReadAll(errR); errC <- b }()
	got := <-outC
	if want := strings.Repeat("HELLO ", 50000); string(got) != want {
		t.Fatalf("stdout: %d bytes, want %d", len(got), len(want))
	}
	if e := <-errC; len(e) != 1<<20 {
		t.Fatalf("stderr: %d bytes", len(e))
	}
	rb := make([]byte, 4096)
	n, err := hostSide.Read(rb)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := guest.Decode(rb[:n], nil, 0)
	if err != nil || m.Kind != guest.MsgExited || m.ID != "x1" {
		t.Fatalf("got %+v %v", m, err)
	}
}

// port is a guest's serial port whose host end can be replaced, as a VM restored from a save
// finds a new host on it: a read that meets the old end's EOF goes on with the next end.
type port struct {
	mu   sync.Mutex // guards cur
	cur  *os.File
	next chan *os.File
}

func (p *port) Read(b []byte) (int, error) {
	p.mu.Lock()
	f := p.cur
	p.mu.Unlock()
	n, err := f.Read(b)
	if err == io.EOF {
		f = <-p.next
		p.mu.Lock()
		p.cur = f
		p.mu.Unlock()
		return f.Read(b)
	}
	return n, err
}

func (p *port) Write(b []byte) (int, error) {
	p.mu.Lock()
	f := p.cur
	p.mu.Unlock()
	return f.Write(b)
}

func (p *port) Close() error { return nil }

// TestQuiesce: a link brought to rest goes on after Resume; and a guest saved at rest goes on
// with a new host (ResumeHost), whose calls it answers, once the old host is gone.
func TestQuiesce(t *testing.T) {
	hostSide, initEnd := pair(t)
	defer hostSide.Close()
	agentEnd, initSide := pair(t)
	defer initSide.Close()
	hs, gs := streamPair(t)
	hsFd := int(hs.Fd())
	h, err := NewHost(hs, initEnd)
	if err != nil {
		t.Fatal(err)
	}
	p := &port{cur: gs, next: make(chan *os.File, 1)}
	g, err := NewGuest(p, agentEnd)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	g.Handle = func(kind string, _ json.RawMessage) (any, error) { calls++; return Stats{Pids: int64(calls)}, nil }
	go g.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(h *Host) int64 {
		t.Helper()
		var st Stats
		if err := h.Call(ctx, "stats", nil, &st); err != nil {
			t.Fatalf("call: %v", err)
		}
		return st.Pids
	}
	call(h)
	if err := h.Quiesce(ctx); err != nil {
		t.Fatalf("quiesce: %v", err)
	}
	if err := h.Resume(); err != nil {
		t.Fatal(err)
	}
	call(h)
	if err := h.Quiesce(ctx); err != nil {
		t.Fatalf("quiesce: %v", err)
	}
	// The save: the old host goes, a new one comes on a new byte stream.
	hs2, gs2 := streamPair(t)
	p.next <- gs2
	_ = unix.Shutdown(hsFd, unix.SHUT_RDWR) // a blocking read of it holds off its close
	h.Close()
	hostSide2, initEnd2 := pair(t)
	defer hostSide2.Close()
	h2, err := ResumeHost(hs2, initEnd2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if n := call(h2); n != 3 {
		t.Fatalf("the restored guest answered call %d, want 3", n)
	}
}

// TestUploadAndReader: a call's upload stream reaches the agent whole, or as far as the agent
// reads it before it answers, without the host stalling; a call's reader gets the agent's stream.
func TestUploadAndReader(t *testing.T) {
	h := linked(t, func(g *Guest, kind string, body json.RawMessage) (any, error) {
		var sb StreamBody
		if err := json.Unmarshal(body, &sb); err != nil {
			return nil, err
		}
		switch kind {
		case "all", "some":
			f, err := g.Upload(sb.Stream)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			if kind == "some" {
				b := make([]byte, 10)
				n, err := io.ReadFull(f, b)
				return n, err
			}
			b, err := io.ReadAll(f)
			return len(b), err
		case "read":
			w, err := g.SendStream(sb.Stream)
			if err != nil {
				return nil, err
			}
			go func() {
				_, _ = w.Write(bytes.Repeat([]byte("r"), 700000))
				w.Close()
			}()
			return "ok", nil
		}
		return nil, fmt.Errorf("no call %s", kind)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := strings.Repeat("u", 3<<20) // past the window: credit must flow
	for _, c := range []struct {
		kind string
		want int
	}{{"all", len(big)}, {"some", 10}} {
		var n int
		if err := h.CallUpload(ctx, c.kind, nil, strings.NewReader(big), &n); err != nil || n != c.want {
			t.Fatalf("%s: %d bytes, %v; want %d", c.kind, n, err, c.want)
		}
	}
	var ok string
	rc, err := h.CallReader(ctx, "read", nil, &ok)
	if err != nil || ok != "ok" {
		t.Fatalf("reader: %q %v", ok, err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || len(b) != 700000 {
		t.Fatalf("read %d bytes: %v", len(b), err)
	}
}

// serial is a fake virtio serial port, as the guest sees it: reads give EOF while no host is
// connected, writes wait for one, and what a host sent it but the guest did not read yet stays
// readable after that host went away (the tail of its frames).
type serial struct {
	mu   sync.Mutex
	cond *sync.Cond
	cur  *os.File // the guest's end of the connected host's stream, or nil
}

func newSerial() *serial {
	s := &serial{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// connect connects a new host and returns its end (pollable: closing it ends a read, as closing
// the daemon's socket does).
func (s *serial) connect(t *testing.T) *os.File {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.SetNonblock(fds[0], true)
	hostEnd, guestEnd := os.NewFile(uintptr(fds[0]), "serial-host"), os.NewFile(uintptr(fds[1]), "serial-guest")
	s.mu.Lock()
	s.cur = guestEnd
	s.cond.Broadcast()
	s.mu.Unlock()
	return hostEnd
}

func (s *serial) Read(b []byte) (int, error) {
	s.mu.Lock()
	f := s.cur
	s.mu.Unlock()
	if f == nil {
		return 0, io.EOF
	}
	n, err := f.Read(b)
	if err != nil {
		s.mu.Lock()
		if s.cur == f {
			s.cur = nil
		}
		s.mu.Unlock()
		return 0, io.EOF
	}
	return n, nil
}

func (s *serial) Write(b []byte) (int, error) {
	for {
		s.mu.Lock()
		for s.cur == nil {
			s.cond.Wait()
		}
		f := s.cur
		s.mu.Unlock()
		if n, err := f.Write(b); err == nil {
			return n, nil
		}
		// The host went away: what it did not read is lost, as QEMU drops it.
		s.mu.Lock()
		if s.cur == f {
			s.cur = nil
		}
		s.mu.Unlock()
	}
}

func (s *serial) Close() error { return nil }

// TestAdoptHost: a host that goes away mid-frame leaves the guest waiting for a new one; a new
// host with the link's token takes it over through whatever the old one left on the port, and
// the guest's init answers it; a host with another token is refused; and with no host within
// the grace, the link ends.
func TestAdoptHost(t *testing.T) {
	hostSide, initEnd := pair(t)
	defer hostSide.Close()
	agentEnd, initSide := pair(t)
	port := newSerial()
	hs := port.connect(t)
	raw, err := unix.Dup(int(hs.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(hs, initEnd)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGuest(port, agentEnd)
	if err != nil {
		t.Fatal(err)
	}
	g.Grace = 3 * time.Second
	calls := 0
	g.Handle = func(kind string, _ json.RawMessage) (any, error) { calls++; return Stats{Pids: int64(calls)}, nil }
	ran := make(chan struct{})
	go func() { g.Run(); close(ran) }()
	// The fake init echoes every packet.
	go func() {
		defer initSide.Close()
		buf := make([]byte, 1<<16)
		for {
			n, err := initSide.Read(buf)
			if err != nil || n == 0 {
				return
			}
			if _, err := initSide.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	echo := func(side *os.File, msg string) {
		t.Helper()
		if _, err := side.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1024)
		_ = side.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := side.Read(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Fatalf("echo of %q: %q %v", msg, buf[:n], err)
		}
	}
	echo(hostSide, `{"kind":"ping","id":"1"}`)
	var st Stats
	if err := h.Call(ctx, "stats", nil, &st); err != nil || st.Pids != 1 {
		t.Fatalf("call: %+v %v", st, err)
	}
	token := h.Token()
	// The host dies in the middle of a frame: half a header, then nothing.
	if _, err := unix.Write(raw, []byte{fData, 0, 0, 0, 3, 0, 0}); err != nil {
		t.Fatal(err)
	}
	_ = unix.Shutdown(raw, unix.SHUT_RDWR)
	unix.Close(raw)
	h.Close()
	time.Sleep(100 * time.Millisecond)

	// A host with another token gets no answer.
	hs2 := port.connect(t)
	_, initEnd2 := pair(t)
	if _, err := AdoptHost(hs2, initEnd2, strings.Repeat("0", TokenLen), time.Second); err == nil {
		t.Fatal("a host with another token took the link over")
	}
	// The right one, after bytes of the old host that were still on their way.
	hs3 := port.connect(t)
	if _, err := hs3.Write([]byte{fData, 0, 0, 0, 9, 0, 0, 0, 40, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	hostSide3, initEnd3 := pair(t)
	defer hostSide3.Close()
	h3, err := AdoptHost(hs3, initEnd3, token, 5*time.Second)
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if h3.Token() != token {
		t.Fatalf("adopted link's token %q, want %q", h3.Token(), token)
	}
	echo(hostSide3, `{"kind":"ping","id":"2"}`)
	if err := h3.Call(ctx, "stats", nil, &st); err != nil || st.Pids != 2 {
		t.Fatalf("call after adoption: %+v %v", st, err)
	}
	// No host within the grace: the link ends.
	h3.Close()
	select {
	case <-ran:
	case <-time.After(g.Grace + 5*time.Second):
		t.Fatal("the link outlived its grace")
	}
}
