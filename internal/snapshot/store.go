package snapshot

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// Store keeps snapshot content in a directory, each blob under the sha256 of its bytes:
//
//	blobs/sha256/<hex>   a compressed layer (zstd of WriteLayer's tar) or a memory image file
//	tmp/                 blobs being written, and memory images being taken or restored from
//
// Equal content is stored once. The store does not know which snapshots use a blob; its owner
// (the manager's records) removes blobs no snapshot refers to any more.
type Store struct {
	dir string
}

// Blob is one stored blob.
type Blob struct {
	Digest string `json:"digest"` // "sha256:<hex>" of the stored bytes
	Size   int64  `json:"size"`   // stored bytes
	Raw    int64  `json:"raw"`    // a layer's bytes before compression (tar stream)
}

// Open returns the store in dir, creating it if needed.
func Open(dir string) (*Store, error) {
	for _, d := range []string{"blobs/sha256", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("snapshot store: %w", err)
		}
	}
	// Whatever a crash left half-written.
	if ents, err := os.ReadDir(filepath.Join(dir, "tmp")); err == nil {
		for _, e := range ents {
			os.RemoveAll(filepath.Join(dir, "tmp", e.Name()))
		}
	}
	return &Store{dir: dir}, nil
}

// TempDir makes a directory in the store's file system for content on its way in or out (a
// memory image); the caller removes it.
func (s *Store) TempDir(pattern string) (string, error) {
	return os.MkdirTemp(filepath.Join(s.dir, "tmp"), pattern)
}

// StoredPath is where a file of a TempDir directory (a memory image's) whose bytes have the hex
// sha256 digest is kept once PutFile stored it: a level that must know whether a snapshot still
// uses something of its own (the microvm level's image cache) looks there.
func StoredPath(tempDir, hexDigest string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(tempDir)), "blobs", "sha256", hexDigest)
}

// path is where a blob with digest d is stored.
func (s *Store) path(d string) (string, error) {
	h, ok := strings.CutPrefix(d, "sha256:")
	if _, err := hex.DecodeString(h); !ok || err != nil || len(h) != 64 {
		return "", fmt.Errorf("snapshot blob %q: not a sha256 digest: %w", d, errdefs.ErrInvalidArgument)
	}
	return filepath.Join(s.dir, "blobs", "sha256", h), nil
}

// PutLayer stores the tar stream write produces, zstd-compressed.
func (s *Store) PutLayer(write func(io.Writer) error) (Blob, error) {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "layer-")
	if err != nil {
		return Blob{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, h), 256<<10)
	zw, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return Blob{}, err
	}
	cw := &countWriter{w: zw}
	if err := write(cw); err != nil {
		zw.Close()
		return Blob{}, err
	}
	if err := zw.Close(); err != nil {
		return Blob{}, err
	}
	if err := bw.Flush(); err != nil {
		return Blob{}, err
	}
	b := Blob{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Raw: cw.n}
	if b.Size, err = tmp.Seek(0, io.SeekCurrent); err != nil {
		return Blob{}, err
	}
	return b, s.commit(tmp, b.Digest)
}

// PutFile moves the file at p into the store (it must be on the store's file system, e.g. in a
// TempDir) and returns its blob.
func (s *Store) PutFile(p string) (Blob, error) {
	f, err := os.Open(p)
	if err != nil {
		return Blob{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Blob{}, err
	}
	b := Blob{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: n, Raw: n}
	return b, s.commit(f, b.Digest)
}

// commit makes the written file f the blob d (or drops it when d is stored already).
func (s *Store) commit(f *os.File, d string) error {
	if err := f.Sync(); err != nil {
		return err
	}
	dst, err := s.path(d)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dst); err == nil {
		if s.Verify(d) == nil {
			return nil // stored already
		}
		_ = os.Chmod(dst, 0o600) // damaged on disk: the rename below replaces it whatever its mode
	}
	if err := os.Chmod(f.Name(), 0o400); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}

// OpenLayer returns a layer's tar stream. Its bytes are hashed as they are read: at the end of
// the blob a digest that does not match is ErrCorrupt, as is a blob that does not decompress.
// A caller that acts on the stream must read it to io.EOF before it may trust what it did.
func (s *Store) OpenLayer(d string) (io.ReadCloser, error) {
	f, err := s.openBlob(d)
	if err != nil {
		return nil, err
	}
	v := &verifier{f: f, r: bufio.NewReaderSize(f, 256<<10), h: sha256.New(), want: d}
	zr, err := zstd.NewReader(v, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(false))
	if err != nil {
		f.Close()
		return nil, corrupt("layer %s: %v", d, err)
	}
	return &layerReader{zr: zr, v: v}, nil
}

// Verify reads blob d whole and checks its digest; a memory image file is checked before the
// runtime reads it.
func (s *Store) Verify(d string) error {
	f, err := s.openBlob(d)
	if err != nil {
		return err
	}
	defer f.Close()
	v := &verifier{f: f, r: bufio.NewReaderSize(f, 256<<10), h: sha256.New(), want: d}
	_, err = io.Copy(io.Discard, v)
	return err
}

// Link makes blob d appear at p (a hard link: same file system, no copy), for a runtime that reads
// a memory image from a directory of its own names.
func (s *Store) Link(d, p string) error {
	src, err := s.path(d)
	if err != nil {
		return err
	}
	if err := os.Link(src, p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return corrupt("blob %s is missing", d)
		}
		return err
	}
	return nil
}

// Digests lists the stored blobs.
func (s *Store) Digests() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "blobs", "sha256"))
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, "sha256:"+e.Name())
		}
	}
	return out, nil
}

// Remove deletes blob d; a blob that is not there is not an error.
func (s *Store) Remove(d string) error {
	p, err := s.path(d)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *Store) openBlob(d string) (*os.File, error) {
	p, err := s.path(d)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, corrupt("blob %s is missing", d)
	}
	return f, err
}

// verifier hashes a blob as it is read and, at its end, fails unless the digest matches.
type verifier struct {
	f    *os.File
	r    *bufio.Reader
	h    hash.Hash
	want string
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := "sha256:" + hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, corrupt("blob %s has digest %s: its content changed after it was saved", v.want, got)
		}
	}
	return n, err
}

// layerReader decompresses a layer and, when the compressed stream ends, reads the rest of the
// blob so that its digest is checked whatever the stream held.
type layerReader struct {
	zr *zstd.Decoder
	v  *verifier
}

func (l *layerReader) Read(p []byte) (int, error) {
	n, err := l.zr.Read(p)
	if errors.Is(err, io.EOF) {
		if _, derr := io.Copy(io.Discard, l.v); derr != nil {
			return n, derr
		}
		return n, io.EOF
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		err = corrupt("layer %s: %v", l.v.want, err)
	}
	return n, err
}

func (l *layerReader) Close() error {
	l.zr.Close()
	return l.v.f.Close()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
