package host

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// stdio connects one exec's standard streams. Files are handed to the command as they are; other
// readers and writers go through pipes that the host copies ("pumps"), keeping at most limit
// bytes of each output when capturing while passing everything on to the caller's writer. With a
// TTY there is a terminal instead of pipes: the command gets its slave, the host its master.
type stdio struct {
	child   [3]*os.File         // what the command gets: stdin, stdout, stderr (nothing with a TTY)
	closers []*os.File          // the host's copies of child ends
	readers []*os.File          // what the pumps read: output pipes' read ends, or a terminal's master
	stdin   *os.File            // the write end of a stdin pipe the host feeds; closed when the exec ends
	tty     *os.File            // the terminal's master, once init sent it, or the socket of its relay
	relayed bool                // tty is a relay's socket
	out     [2]*sandbox.Capture // stdout, stderr; stderr is nil with a TTY (merged into stdout)

	pending atomic.Int32  // pumps running
	eof     chan struct{} // closed when the last pump stopped
}

func newStdio(req sandbox.ExecRequest) (*stdio, error) {
	s := &stdio{eof: make(chan struct{})}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = sandbox.DefaultOutputLimit
	}
	if !req.Capture {
		limit = 0
	}
	if req.TTY {
		// Stdin is fed, and the output read, once init has made the terminal (attachTerminal).
		s.out[0] = sandbox.NewCapture(limit, req.Stdout)
		return s, nil
	}
	switch in := req.Stdin.(type) {
	case *os.File:
		s.child[0] = in
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		s.child[0] = f
		s.closers = append(s.closers, f)
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		s.child[0] = r
		s.closers = append(s.closers, r)
		s.stdin = w
		// Fed as data arrives, closed at the reader's EOF. The exec never waits for it: a reader
		// that blocks past the command's end finds the pipe closed when it returns.
		go func() {
			// It ends at the reader's EOF, or with EPIPE once the command's end closed the pipe.
			_, _ = io.Copy(w, in)
			w.Close()
		}()
	}
	var dsts []io.Writer
	for i, w := range []io.Writer{req.Stdout, req.Stderr} {
		if f, ok := w.(*os.File); ok && !req.Capture {
			s.child[i+1] = f
			continue
		}
		if w == nil && !req.Capture {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				s.abort()
				return nil, err
			}
			s.child[i+1] = f
			s.closers = append(s.closers, f)
			continue
		}
		r, pw, err := os.Pipe()
		if err != nil {
			s.abort()
			return nil, err
		}
		s.child[i+1] = pw
		s.closers = append(s.closers, pw)
		s.readers = append(s.readers, r)
		s.out[i] = sandbox.NewCapture(limit, w)
		dsts = append(dsts, s.out[i])
	}
	s.startPumps(dsts)
	return s, nil
}

// childFiles are the descriptors sent with the exec request.
func (s *stdio) childFiles() []*os.File {
	if s.child[0] == nil {
		return nil
	}
	return s.child[:]
}

// startPumps copies each of s.readers to its writer in dsts until EOF, or until finish stops it.
func (s *stdio) startPumps(dsts []io.Writer) {
	// All counted before any starts, so that eof closes only after the last of them.
	s.pending.Add(int32(len(dsts)))
	for i, w := range dsts {
		r := s.readers[i]
		go func() {
			pump(r, w)
			if s.pending.Add(-1) == 0 {
				close(s.eof)
			}
		}()
	}
}

// attachTerminal takes the master of the command's terminal (or, relayed, the socket init relays
// it through): what the terminal prints goes to stdout, stdin is typed into it. Input's EOF is
// typed as the terminal's EOF character (typeEOF; init does it for a relayed terminal when the
// socket's write side is shut), as a user would end it; a nil stdin is empty input.
func (s *stdio) attachTerminal(master *os.File, in io.Reader, relayed bool) {
	s.tty, s.relayed = master, relayed
	s.readers = []*os.File{master}
	s.startPumps([]io.Writer{s.out[0]})
	go func() {
		w := &guest.LastByte{W: master}
		if in != nil {
			if _, err := io.Copy(w, in); err != nil {
				return
			}
		}
		if !relayed {
			guest.TypeEOF(master, w)
			return
		}
		if rc, err := master.SyscallConn(); err == nil {
			// The relay's end of stdin; failing, it was closed or disconnected already.
			_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_WR) })
		}
	}()
}

// resize sets the terminal's size (a relayed terminal's is set by init: guest.MsgResize).
func (s *stdio) resize(ws sandbox.Winsize) {
	if s.tty != nil && !s.relayed {
		guest.SetWinsize(s.tty, ws)
	}
}

// closeChildEnds drops the host's copies of what the command got, so EOF on the output pipes
// means every process in the sandbox holding them has exited or closed them.
func (s *stdio) closeChildEnds() {
	closeAll(s.closers)
	s.closers = nil
}

// finish waits up to grace for the outputs to reach EOF, then takes what is already buffered in
// them and stops reading — a background process that keeps them open does not hold the exec's
// result hostage — and fills the result.
func (s *stdio) finish(grace time.Duration, res *sandbox.ExecResult) {
	if len(s.readers) > 0 {
		t := time.NewTimer(grace)
		select {
		case <-s.eof:
		case <-t.C:
			for _, r := range s.readers {
				if r.SetReadDeadline(time.Now()) != nil {
					r.Close() // not pollable: no draining, but no waiting either
				}
			}
			<-s.eof
		}
		t.Stop()
	}
	s.abort()
	for i, c := range s.out {
		if c == nil {
			continue
		}
		if i == 0 {
			c.Result(&res.Stdout, &res.Truncated)
		} else {
			c.Result(&res.Stderr, &res.Truncated)
		}
	}
}

// stderrNote adds airlock's own message to the command's stderr as the caller sees it (stdout, on
// a terminal).
func (s *stdio) stderrNote(msg string) {
	// A stream that fails the note fails the command's output too: nothing more to tell.
	switch {
	case s.out[1] != nil:
		_, _ = s.out[1].Write([]byte(msg))
	case s.child[2] != nil:
		_, _ = s.child[2].WriteString(msg)
	case s.out[0] != nil: // a terminal
		_, _ = s.out[0].Write([]byte(msg))
	}
}

// abort releases whatever is still open: the host's child ends, the pumps' sources (stopping
// them), the stdin pipe (its feeder stops at its next write) and the terminal.
func (s *stdio) abort() {
	closeAll(s.closers)
	closeAll(s.readers)
	if s.stdin != nil {
		s.stdin.Close()
	}
	s.closers, s.readers, s.stdin, s.tty = nil, nil, nil, nil
}

// maxDrain bounds what finish takes from an output still open after the grace: what a pipe or a
// terminal buffers, not what a busy writer keeps adding.
const maxDrain = 1 << 20

var pumpBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pump copies r to w until EOF or an error: a terminal's master reads EIO once the last
// process holding its slave has gone, which is its EOF. When finish sets a deadline, what is
// buffered at that moment is still copied.
func pump(r *os.File, w io.Writer) {
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	for {
		n, err := r.Read(*bp)
		if n > 0 {
			// A failing w (a client gone) does not stop the reading, or the command would block
			// on a full pipe.
			_, _ = w.Write((*bp)[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drain(r, w, *bp)
			return
		}
		if err != nil {
			return
		}
	}
}

// drain copies what r holds right now, up to maxDrain bytes, without waiting for more.
func drain(r *os.File, w io.Writer, buf []byte) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < maxDrain; {
		n := 0
		// r is non-blocking: this takes what is there and never waits.
		if cerr := rc.Control(func(fd uintptr) { n, err = unix.Read(int(fd), buf) }); cerr != nil {
			return
		}
		if n <= 0 || err != nil {
			return
		}
		_, _ = w.Write(buf[:n]) // as in pump
		total += n
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
