package vmlink

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/fsdiff"
)

// streamed answers a LayerScan with what write writes to its stream; done gets write's error.
func streamed(write func(w io.Writer) error, done chan<- error) func(g *Guest, kind string, body json.RawMessage) (any, error) {
	return func(g *Guest, kind string, body json.RawMessage) (any, error) {
		if kind != LayerScan {
			return nil, fmt.Errorf("unknown call %q", kind)
		}
		var sb StreamBody
		if err := json.Unmarshal(body, &sb); err != nil {
			return nil, err
		}
		w, err := g.SendStream(sb.Stream)
		if err != nil {
			return nil, err
		}
		err = write(w)
		w.Close()
		if done != nil {
			done <- err
		}
		return nil, err
	}
}

// TestScanLayer: a scan's tree crosses the link whole; what a broken or hostile guest sends
// instead is refused with the reason, and the guest's stream stopped.
func TestScanLayer(t *testing.T) {
	tree := fsdiff.Tree{Entries: map[string]fsdiff.Entry{
		"/workspace/new": {Mode: 0o100644, Size: 4, MtimeNs: 1, CtimeNs: 2, Ino: 3},
		"/etc/gone":      {Deleted: true},
		"/usr":           {Mode: 0o40755, Opaque: true},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("tree", func(t *testing.T) {
		h := linked(t, streamed(func(w io.Writer) error { return fsdiff.WriteTree(w, tree) }, nil))
		got, err := h.ScanLayer(ctx)
		if err != nil || !maps.Equal(got.Entries, tree.Entries) || got.Partial {
			t.Fatalf("scan %+v, %v; want %+v", got, err, tree)
		}
	})

	var whole bytes.Buffer
	if err := fsdiff.WriteTree(&whole, tree); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		write func(w io.Writer) error
		want  string
	}{
		{"garbage", func(w io.Writer) error { _, err := w.Write([]byte("\x7fELF and the rest of a binary")); return err }, "header"},
		{"cut short", func(w io.Writer) error { _, err := w.Write(whole.Bytes()[:whole.Len()-3]); return err }, "ends early"},
		{"nothing", func(io.Writer) error { return nil }, "ends early"},
		{"a path out of the tree", func(w io.Writer) error {
			_, err := w.Write(append([]byte("airlock-fsdiff-tree-1\ne\x0a/../../etc"), make([]byte, 45)...))
			return err
		}, `the path "/../../etc"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := linked(t, streamed(c.write, nil))
			_, err := h.ScanLayer(ctx)
			if !errors.Is(err, fsdiff.ErrBadTree) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v; want a refused tree saying %q", err, c.want)
			}
		})
	}

	t.Run("endless", func(t *testing.T) {
		// A stream that never ends is refused at fsdiff.MaxTreeBytes, and the guest's writes
		// fail from then on: it is not read to its end.
		done := make(chan error, 1)
		h := linked(t, streamed(func(w io.Writer) error {
			if _, err := io.WriteString(w, "airlock-fsdiff-tree-1\n"); err != nil {
				return err
			}
			entry := make([]byte, 45)
			for i := 0; ; i++ {
				p := fmt.Sprintf("/%09d/%s", i, strings.Repeat("x", 60000))
				rec := append(binary.AppendUvarint([]byte{'e'}, uint64(len(p))), p...)
				if _, err := w.Write(append(rec, entry...)); err != nil {
					return err
				}
			}
		}, done))
		_, err := h.ScanLayer(ctx)
		if !errors.Is(err, fsdiff.ErrBadTree) || !strings.Contains(err.Error(), "longer than") {
			t.Fatalf("err %v; want a refused tree, too long", err)
		}
		select {
		case werr := <-done:
			if werr == nil {
				t.Fatal("the guest wrote on without an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the guest's stream was not stopped")
		}
	})

	t.Run("error", func(t *testing.T) {
		h := linked(t, streamed(func(io.Writer) error { return errors.New("this VM has no writable disk") }, nil))
		_, err := h.ScanLayer(ctx)
		if err == nil || errors.Is(err, fsdiff.ErrBadTree) || !strings.Contains(err.Error(), "no writable disk") {
			t.Fatalf("err %v; want the guest's", err)
		}
	})
}

// TestStreamOverrun: a peer that sends a stream's data past the credit it was given (a hostile
// guest) does not have it queue on the host: the stream is cut at the window, the peer told to
// stop, and what follows dropped.
func TestStreamOverrun(t *testing.T) {
	hostSide, initEnd := pair(t)
	defer hostSide.Close()
	hs, gs := streamPair(t)
	defer gs.Close()
	h, err := NewHost(hs, initEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The host's end of the stream, which nobody reads: the pipe fills, and then the queue.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	s := h.m.open(0, pw, false, true)
	s.start()
	stopped := make(chan struct{})
	go func() { // the raw guest's reader: the host's frames, until its fStop of the stream
		var buf []byte
		for {
			typ, id, p, err := readFrame(gs, buf)
			if err != nil {
				return
			}
			buf = p[:0]
			if typ == fStop && id == s.id {
				close(stopped)
				return
			}
		}
	}()
	fw := &frameWriter{w: gs}
	data := bytes.Repeat([]byte("d"), MaxFrame)
	for range 4 * Window / MaxFrame {
		if err := fw.write(fData, s.id, data); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not stop the stream")
	}
	s.mu.Lock()
	queued, overrun := s.queued, s.overrun
	s.mu.Unlock()
	if !overrun || queued > Window {
		t.Fatalf("queued %d bytes (window %d), overrun %v", queued, Window, overrun)
	}
}
