package vmlink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// mux is what both ends of a link share: the frame writer, the streams by id, and the reader
// that dispatches frames to them.
type mux struct {
	fw   *frameWriter
	r    *bufio.Reader
	c    io.Closer
	next uint32 // the next stream id this side opens (the host's are odd, the guest's even)

	mu      sync.Mutex // guards streams and next
	streams map[uint32]*stream

	// handle gets the frames that are not a stream's.
	handle func(typ byte, id uint32, payload []byte)
	// lost, when set, is called when the byte stream ends or goes out of step (a frame too large
	// or of no known type): it reports whether it brought the link back (Guest.lost), and the
	// reading goes on.
	lost func(err error) bool
	done chan struct{} // closed when the byte stream ended
	once sync.Once
}

func newMux(rw io.ReadWriteCloser, first uint32) *mux {
	return &mux{fw: &frameWriter{w: rw}, r: bufio.NewReaderSize(rw, 64<<10), c: rw, next: first, streams: map[uint32]*stream{}, done: make(chan struct{})}
}

// run reads frames until the byte stream ends, then ends every stream.
func (m *mux) run() {
	defer m.close()
	var buf []byte
	for {
		typ, id, p, err := readFrame(m.r, buf)
		if err == nil && (typ < fPacket || typ > fLast) {
			err = fmt.Errorf("vm link: a frame of unknown type %d", typ)
		}
		if err != nil {
			if m.lost != nil && m.lost(err) {
				continue
			}
			return
		}
		buf = p[:0]
		switch typ {
		case fData, fEOF, fStop, fCredit:
			m.mu.Lock()
			s := m.streams[id]
			m.mu.Unlock()
			if s == nil {
				continue // a stream already gone: its data is nobody's
			}
			switch typ {
			case fData:
				b := getBuf(len(p))
				copy(*b, p)
				if s.push(b, false) {
					_ = m.fw.write(fStop, id)
				}
			case fEOF:
				s.push(nil, true)
			case fStop:
				s.stop()
			case fCredit:
				if len(p) == 4 {
					s.addCredit(int64(binary.BigEndian.Uint32(p)))
				}
			}
		default:
			m.handle(typ, id, p)
		}
	}
}

// eofPoll is how often a guest whose host is gone looks for a new one: the serial port reads
// EOF at once while no host is connected, and blocks again once one is.
const eofPoll = 20 * time.Millisecond

// errNoHost is a hunt that ended at its deadline with no host connected.
var errNoHost = errors.New("vm link: no host took the link over in time")

// hunt reads and drops bytes until the frame sync of type typ (fSync, fSynced) with token has
// been read, and returns the token; an empty token matches any (a guest that has none yet). At
// EOF, while poll is set (the guest's serial port, whose host is gone), it waits for a host
// until deadline; otherwise EOF ends the hunt.
func (m *mux) hunt(typ byte, token string, poll bool, deadline time.Time) (string, error) {
	want := syncFrame(typ, token)
	if token == "" {
		want = syncFrame(typ, string(make([]byte, TokenLen)))[:header] // the header alone
	}
	var win []byte
	for {
		c, err := m.r.ReadByte()
		if err != nil {
			if err == io.EOF && poll && time.Now().Before(deadline) {
				time.Sleep(eofPoll)
				continue
			}
			if err == io.EOF && poll {
				return "", errNoHost
			}
			return "", err
		}
		win = append(win, c)
		if len(win) > len(want) {
			win = win[1:]
		}
		if !bytes.Equal(win, want) {
			continue
		}
		if token != "" {
			return token, nil
		}
		tok := make([]byte, TokenLen)
		if _, err := io.ReadFull(m.r, tok); err != nil {
			return "", err
		}
		if _, err := hex.DecodeString(string(tok)); err != nil {
			win = win[:0]
			continue
		}
		return string(tok), nil
	}
}

// close ends the link: the byte stream, and every stream with it.
func (m *mux) close() {
	m.once.Do(func() {
		m.c.Close()
		close(m.done)
		m.mu.Lock()
		all := make([]*stream, 0, len(m.streams))
		for _, s := range m.streams {
			all = append(all, s)
		}
		m.mu.Unlock()
		for _, s := range all {
			s.stop()
			s.push(nil, true)
		}
	})
}

// open registers a stream of a local descriptor f: data read from f goes to the peer when dir
// includes sending, data from the peer is written to f when it includes receiving. id 0 takes
// the next id of this side. Its pumps start with start, once the peer knows the stream.
func (m *mux) open(id uint32, f *os.File, send, recv bool) *stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id == 0 {
		id = m.next
		m.next += 2
	}
	s := &stream{id: id, m: m, f: f, credit: Window}
	s.cond = sync.NewCond(&s.mu)
	if send {
		s.halves++
	} else {
		s.sendDone = true
	}
	if recv {
		s.halves++
	} else {
		s.recvDone = true
	}
	m.streams[id] = s
	return s
}

// stream is one descriptor carried over the link.
type stream struct {
	id uint32
	m  *mux
	f  *os.File

	mu       sync.Mutex // guards everything below
	cond     *sync.Cond
	halves   int       // directions still running; f is closed when none is left
	credit   int64     // what this side may still send
	stopped  bool      // the peer reads no more: sending stops
	sendDone bool      // this side sends no more
	inflight bool      // bytes read from f and not yet sent
	q        []*[]byte // received, not yet written to f (pooled buffers)
	queued   int       // the bytes in q: at most Window from a peer that keeps to its credit
	overrun  bool      // the peer sent past its credit: the stream was cut there
	eof      bool      // the peer sends no more
	recvDone bool      // this side writes no more to f
}

// start starts the stream's pumps.
func (s *stream) start() {
	if !s.sendDone {
		go s.sendLoop()
	}
	if !s.recvDone {
		go s.recvLoop()
	}
}

// sendLoop reads f and sends it, within the peer's credit, until EOF, an error or a stop.
func (s *stream) sendLoop() {
	buf := make([]byte, MaxFrame)
	for {
		s.mu.Lock()
		for s.credit <= 0 && !s.stopped {
			s.cond.Wait()
		}
		stopped, n := s.stopped, min(int64(len(buf)), s.credit)
		s.mu.Unlock()
		if stopped {
			break
		}
		k, err := s.f.Read(buf[:n])
		if k > 0 {
			s.mu.Lock()
			s.credit -= int64(k)
			s.inflight = true
			s.mu.Unlock()
			werr := s.m.fw.write(fData, s.id, buf[:k])
			s.mu.Lock()
			s.inflight = false
			s.cond.Broadcast()
			s.mu.Unlock()
			if werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		_ = s.m.fw.write(fEOF, s.id) // fails only when the link is gone, which ends everything
	}
	s.finish(true)
}

// recvLoop writes what the peer sends to f, granting credit as it goes, until the peer's EOF.
func (s *stream) recvLoop() {
	var failed bool
	for {
		s.mu.Lock()
		for len(s.q) == 0 && !s.eof {
			s.cond.Wait()
		}
		if len(s.q) == 0 {
			s.mu.Unlock()
			break
		}
		bp := s.q[0]
		s.q[0] = nil
		s.q = s.q[1:]
		s.queued -= len(*bp)
		s.mu.Unlock()
		b := *bp
		if failed {
			putBuf(bp)
			continue
		}
		_, err := s.f.Write(b)
		n := len(b)
		putBuf(bp)
		if err != nil {
			// The reader is gone (EPIPE): tell the peer to stop, and drop what still comes.
			failed = true
			_ = s.m.fw.write(fStop, s.id)
			continue
		}
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], uint32(n))
		_ = s.m.fw.write(fCredit, s.id, c[:])
	}
	s.finish(false)
}

// finish ends one direction; the last one closes f (a socket used both ways has its write
// side shut first, so that its reader sees EOF while the other direction goes on).
func (s *stream) finish(sending bool) {
	s.mu.Lock()
	if sending {
		s.sendDone = true
	} else {
		s.recvDone = true
	}
	s.halves--
	last := s.halves == 0
	both := !last && !sending
	s.cond.Broadcast()
	s.mu.Unlock()
	if both {
		if rc, err := s.f.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_WR) })
		}
	}
	if last {
		s.f.Close()
		s.m.mu.Lock()
		if s.m.streams[s.id] == s { // not a new host's stream of the same id (Guest.reset)
			delete(s.m.streams, s.id)
		}
		s.m.mu.Unlock()
	}
}

// push queues data the peer sent (or its EOF) for recvLoop. A peer that sends past the credit
// it was given (a broken or hostile guest) would have it queue without bound: the stream is cut
// there, as if the peer had ended it, and push reports it, for the peer to be told to stop.
func (s *stream) push(b *[]byte, eof bool) (overrun bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cond.Broadcast()
	switch {
	case eof:
		s.eof = true
	case !s.eof && s.queued+len(*b) > Window:
		putBuf(b)
		s.eof, s.overrun = true, true
		return true
	case !s.eof:
		s.q = append(s.q, b)
		s.queued += len(*b)
	default:
		putBuf(b)
	}
	return false
}

// bufs are the buffers of received data, from the frame reader to a stream's writer: a stream
// carrying hundreds of megabytes allocates a window's worth.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, MaxFrame); return &b }}

func getBuf(n int) *[]byte {
	bp := bufs.Get().(*[]byte)
	if cap(*bp) < n {
		b := make([]byte, n)
		return &b
	}
	*bp = (*bp)[:n]
	return bp
}

func putBuf(bp *[]byte) { bufs.Put(bp) }

func (s *stream) addCredit(n int64) {
	s.mu.Lock()
	s.credit += n
	s.cond.Broadcast()
	s.mu.Unlock()
}

// stop ends the sending: the peer reads no more.
func (s *stream) stop() {
	s.mu.Lock()
	s.stopped = true
	sending := !s.sendDone
	s.cond.Broadcast()
	s.mu.Unlock()
	if sending {
		// Interrupts a read in progress, when f is pollable; a blocking one ends at its next
		// data.
		_ = s.f.SetReadDeadline(time.Now())
	}
}

// drained waits, up to d, until everything f holds right now has been sent (or the stream
// ended): an exec's output, once its command exited, goes to the host before its exit does.
func (s *stream) drained(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		done := s.sendDone || s.stopped
		busy := s.inflight
		s.mu.Unlock()
		if done {
			return
		}
		if !busy && pending(s.f) == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pending is how many bytes f (a pipe or socket) holds unread; -1 when it cannot say.
func pending(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	if cerr := rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			n = v
		}
	}); cerr != nil {
		return -1
	}
	return n
}

// pollable reports whether fd is a pipe or a socket, whose reads the Go runtime's poller can
// wait for (and interrupt) once it is non-blocking. A terminal or a file is read as it is: its
// description may be shared with another process (a shell's terminal), whose mode is not ours
// to change.
func pollable(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	t := st.Mode & unix.S_IFMT
	return t == unix.S_IFIFO || t == unix.S_IFSOCK
}

// fileOf wraps a received descriptor, pollable when it can be.
func fileOf(fd int, name string) *os.File {
	if pollable(fd) {
		_ = unix.SetNonblock(fd, true)
	}
	return os.NewFile(uintptr(fd), name)
}
