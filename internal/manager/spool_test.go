package manager

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// gate is a client writer that blocks until opened, then records (or fails).
type gate struct {
	open chan struct{}
	fail bool
	mu   sync.Mutex
	got  bytes.Buffer
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	if g.fail {
		return 0, errors.New("client gone")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got.Write(p)
	return len(p), nil
}

func TestSpool(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		writes      []string // "o:" stdout, "e:" stderr
		fail        bool
		wantGot     string
		wantDropped int64
	}{
		{"order kept across streams", 100, []string{"o:a", "e:b", "o:c"}, false, "abc", 0},
		{"past the cap dropped", 4, []string{"o:abc", "o:de", "e:f"}, false, "abcf", 2},
		{"client gone", 100, []string{"o:abc", "e:de"}, true, "", 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &gate{open: make(chan struct{}), fail: tc.fail}
			sp := newSpool(g, g, tc.max)
			start := time.Now()
			for _, w := range tc.writes {
				stream := 0
				if w[0] == 'e' {
					stream = 1
				}
				if n, err := sp.writer(stream).Write([]byte(w[2:])); n != len(w)-2 || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if time.Since(start) > time.Second {
				t.Fatalf("writes waited for the client")
			}
			close(g.open)
			if tc.fail {
				sp.flushed0(t)
			}
			dropped := sp.close()
			sp.flushed()
			if g.got.String() != tc.wantGot || dropped != tc.wantDropped {
				t.Errorf("client got %q, dropped %d; want %q, %d", g.got.String(), dropped, tc.wantGot, tc.wantDropped)
			}
		})
	}
	sp := newSpool(io.Discard, nil, 1)
	if sp.writer(1) != nil {
		t.Errorf("the writer of a stream without a client is not nil")
	}
	sp.close()
	sp.flushed()
}

// flushed0 waits until the drain has taken everything queued so far.
func (s *spool) flushed0(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		n, failed := len(s.queue), s.failed
		s.mu.Unlock()
		if n == 0 && failed {
			return
		}
	}
	t.Fatalf("the drain did not take the queue")
}
