package manager

import (
	"io"
	"sync"
)

// spool passes an exec's output on to a live client (an interactive WebSocket) from a goroutine
// of its own, so that the command never waits for the client: a slow reader, or one that went
// away without closing, neither blocks the command on its pipe nor stretches the exec past its
// timeout. Up to max bytes wait for the client; what comes beyond that is dropped and counted.
// Chunks of both streams keep their order.
type spool struct {
	out [2]io.Writer // stdout, stderr (stderr nil: a terminal's single stream)
	max int

	mu      sync.Mutex // guards everything below
	queue   []chunk
	queued  int   // bytes in queue
	dropped int64 // bytes dropped: past max, or after the client failed
	failed  bool  // a write to the client failed: it is gone, later chunks are dropped
	closed  bool  // no more chunks come: the drain ends when the queue is empty
	wake    chan struct{}
	drained chan struct{} // closed when the drain goroutine has returned
}

type chunk struct {
	stream int
	data   []byte
}

func newSpool(stdout, stderr io.Writer, max int) *spool {
	s := &spool{out: [2]io.Writer{stdout, stderr}, max: max, wake: make(chan struct{}, 1), drained: make(chan struct{})}
	go s.drain()
	return s
}

// writer is the io.Writer of one stream (0 stdout, 1 stderr); its Write never blocks on the
// client and never fails.
func (s *spool) writer(stream int) io.Writer {
	if s.out[stream] == nil {
		return nil
	}
	return spoolWriter{s, stream}
}

type spoolWriter struct {
	s      *spool
	stream int
}

func (w spoolWriter) Write(p []byte) (int, error) {
	w.s.add(w.stream, p)
	return len(p), nil
}

func (s *spool) add(stream int, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.failed || s.queued+len(p) > s.max {
		s.dropped += int64(len(p))
		return
	}
	s.queue = append(s.queue, chunk{stream, append([]byte(nil), p...)})
	s.queued += len(p)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *spool) drain() {
	defer close(s.drained)
	for {
		s.mu.Lock()
		batch, closed, failed := s.queue, s.closed, s.failed
		s.queue, s.queued = nil, 0
		if failed {
			for _, c := range batch {
				s.dropped += int64(len(c.data))
			}
			batch = nil
		}
		s.mu.Unlock()
		for i, c := range batch {
			if _, err := s.out[c.stream].Write(c.data); err != nil {
				s.mu.Lock()
				s.failed = true
				for _, rest := range batch[i:] {
					s.dropped += int64(len(rest.data))
				}
				s.mu.Unlock()
				break
			}
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-s.wake
		}
	}
}

// close takes no more chunks and returns how many bytes were dropped so far: those the client
// did not take in time. What is queued is still delivered; wait for it with flushed.
func (s *spool) close() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.dropped
}

// flushed waits until the queued output has reached the client, or the client failed.
func (s *spool) flushed() { <-s.drained }
