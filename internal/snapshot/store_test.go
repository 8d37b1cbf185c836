package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreDetectsCorruption: a layer reads back as written; any change to its stored bytes —
// a flipped bit, a cut, a missing blob — is ErrCorrupt by the end of the stream, and equal
// content is stored once.
func TestStoreDetectsCorruption(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("airlock snapshot "), 100000)
	put := func() Blob {
		b, err := s.PutLayer(func(w io.Writer) error { _, err := w.Write(content); return err })
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := put()
	if b.Raw != int64(len(content)) || b.Size <= 0 || b.Size >= b.Raw || !strings.HasPrefix(b.Digest, "sha256:") {
		t.Fatalf("blob %+v", b)
	}
	if again := put(); again != b {
		t.Fatalf("equal content stored as %+v and %+v", b, again)
	}
	read := func() ([]byte, error) {
		r, err := s.OpenLayer(b.Digest)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	if got, err := read(); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	p, _ := s.path(b.Digest)
	orig, _ := os.ReadFile(p)
	for name, mangle := range map[string]func([]byte) []byte{
		"flipped bit":  func(d []byte) []byte { d = bytes.Clone(d); d[len(d)/2] ^= 1; return d },
		"flipped last": func(d []byte) []byte { d = bytes.Clone(d); d[len(d)-1] ^= 0x80; return d },
		"cut":          func(d []byte) []byte { return d[:len(d)-10] },
		"appended":     func(d []byte) []byte { return append(bytes.Clone(d), 0) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.Chmod(p, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, mangle(orig), 0o400); err != nil {
				t.Fatal(err)
			}
			if _, err := read(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read of a %s blob: %v, want ErrCorrupt", name, err)
			}
			if err := s.Verify(b.Digest); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("verify of a %s blob: %v, want ErrCorrupt", name, err)
			}
		})
	}
	// Saving the same content again mends a damaged blob rather than trusting it.
	if err := os.WriteFile(p, orig[:10], 0o400); err != nil {
		t.Fatal(err)
	}
	put()
	if got, err := read(); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read after the content was saved again: %d bytes, %v", len(got), err)
	}
	os.Remove(p)
	if _, err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a missing blob: %v, want ErrCorrupt", err)
	}
	if _, err := s.OpenLayer("sha256:../../etc"); err == nil {
		t.Fatal("a digest that is a path was accepted")
	}
	if ents, _ := os.ReadDir(filepath.Join(s.dir, "tmp")); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}
}
