package process

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// stdio connects one exec's standard streams. Files are handed to the command as they are; other
// readers and writers go through pipes that the driver copies, keeping at most limit bytes of
// each output when capturing.
type stdio struct {
	child   [3]*os.File // what the command gets: stdin, stdout, stderr
	closers []*os.File  // the driver's copies of child ends and the read ends of output pipes
	readers []*os.File  // output pipe read ends, closed after the grace period
	wg      sync.WaitGroup
	out     [2]*capture
}

// capture keeps the first limit bytes written to it and counts the rest.
type capture struct {
	mu        sync.Mutex // guards buf and truncated
	buf       bytes.Buffer
	limit     int64
	truncated bool
	tee       io.Writer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - int64(c.buf.Len()); room < int64(len(p)) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
	} else {
		c.buf.Write(p)
	}
	if c.tee != nil {
		c.tee.Write(p)
	}
	return len(p), nil
}

func newStdio(req sandbox.ExecRequest) (*stdio, error) {
	s := &stdio{}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = sandbox.DefaultOutputLimit
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
		go func() { io.Copy(w, in); w.Close() }()
	}
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
		c := &capture{limit: limit, tee: w}
		if !req.Capture {
			c.limit = 0
		}
		s.out[i] = c
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			io.Copy(c, r)
		}()
	}
	return s, nil
}

// closeChildEnds drops the driver's copies of what the command got, so EOF on the output pipes
// means every process in the sandbox holding them has exited or closed them.
func (s *stdio) closeChildEnds() {
	closeAll(s.closers)
	s.closers = nil
}

// finish waits up to grace for the outputs to reach EOF — a background process that keeps them
// open does not hold the exec's result hostage — and fills the result.
func (s *stdio) finish(grace time.Duration, res *sandbox.ExecResult) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		closeAll(s.readers)
		<-done
	}
	closeAll(s.readers)
	s.readers = nil
	for i, c := range s.out {
		if c == nil {
			continue
		}
		c.mu.Lock()
		if c.limit > 0 {
			if i == 0 {
				res.Stdout = c.buf.String()
			} else {
				res.Stderr = c.buf.String()
			}
			res.Truncated = res.Truncated || c.truncated
		}
		c.mu.Unlock()
	}
}

// stderrNote adds airlock's own message to the command's stderr as the caller sees it.
func (s *stdio) stderrNote(msg string) {
	if c := s.out[1]; c != nil {
		c.Write([]byte(msg))
		return
	}
	if f := s.child[2]; f != nil {
		f.WriteString(msg)
	}
}

func (s *stdio) abort() {
	closeAll(s.closers)
	closeAll(s.readers)
	s.closers, s.readers = nil, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// egressBytes sums the transmitted bytes of every interface but loopback in the network namespace
// of pid, as the kernel counts them.
func egressBytes(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 9 {
			continue
		}
		if n, err := strconv.ParseInt(fields[8], 10, 64); err == nil {
			total += n
		}
	}
	return total
}
