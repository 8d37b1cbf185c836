package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// Whiteout names of the OCI layer format.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// opaqueXattrs mark a directory opaque for overlayfs: trusted.* for a host overlay (runc, runsc
// bundles), user.* for an overlay mounted in a user namespace with userxattr (the process level).
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// maxTrailing is how much data may follow a tar's end-of-archive marker (padding).
const maxTrailing = 1 << 20

// unpacker extracts one layer's tar (which may be hostile) into a directory. Every path goes
// through an os.Root, so nothing is created or followed outside the directory.
type unpacker struct {
	layer  string // compressed digest, for messages
	log    *slog.Logger
	budget *atomic.Int64 // the image's uncompressed bytes so far, across layers
	max    int64

	h       hash.Hash // of the uncompressed stream: the diff ID
	n       int64     // uncompressed bytes of this layer
	skipped int       // device nodes and FIFOs not created
	dirs    []*tar.Header
}

// unpack decompresses r (gzip, zstd or a plain tar), extracts it into dir and returns the
// uncompressed size.
func (u *unpacker) unpack(r io.Reader, dir string) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(4)
	var ur io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return 0, fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		ur = gz
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return 0, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		ur = zr
	}
	u.h = sha256.New()
	stream := io.TeeReader(&budgetReader{r: ur, u: u}, u.h)

	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	if err := root.Chmod(".", 0o755); err != nil {
		return 0, err
	}
	tr := tar.NewReader(stream)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("tar: %w", err)
		}
		if err := u.entry(root, hdr, tr); err != nil {
			return 0, err
		}
	}
	// The diff ID covers the whole stream, padding included.
	if n, err := io.Copy(io.Discard, io.LimitReader(stream, maxTrailing+1)); err != nil {
		return 0, err
	} else if n > maxTrailing {
		return 0, fmt.Errorf("more than %d bytes after the end of the tar", maxTrailing)
	}
	// Directory times last: creating entries in a directory changes its mtime.
	for _, hdr := range slices.Backward(u.dirs) {
		p, _ := cleanPath(hdr.Name)
		// Best effort: a later entry of the layer may have removed the directory or put a
		// symlink in its place.
		_ = root.Chtimes(p, hdr.AccessTime, hdr.ModTime)
	}
	if u.skipped > 0 {
		u.log.Warn("image layer: device nodes and FIFOs not created", "layer", u.layer, "count", u.skipped)
	}
	return u.n, nil
}

func (u *unpacker) diffID() string { return "sha256:" + hex.EncodeToString(u.h.Sum(nil)) }

// entry extracts one tar entry.
func (u *unpacker) entry(root *os.Root, hdr *tar.Header, r io.Reader) error {
	p, err := cleanPath(hdr.Name)
	if err != nil {
		return err
	}
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if p != "." && dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(root, hdr.Name, dir, base)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if p != "." {
			if err := clearPath(root, p, true); err != nil {
				return fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			if err := root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		}
		u.dirs = append(u.dirs, hdr)
		return u.meta(root, p, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		if p == "." {
			return fmt.Errorf("entry %q: not a directory", hdr.Name)
		}
		if err := clearPath(root, p, false); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		return u.meta(root, p, hdr)
	case tar.TypeSymlink:
		if p == "." {
			return fmt.Errorf("entry %q: not a directory", hdr.Name)
		}
		if err := clearPath(root, p, false); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		// The target is stored as is; it is resolved only in the sandbox's root, never here.
		if err := root.Symlink(hdr.Linkname, p); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		return u.meta(root, p, hdr)
	case tar.TypeLink:
		target, err := cleanPath(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %q: target %w", hdr.Name, err)
		}
		if p == "." || target == "." || target == p {
			return fmt.Errorf("hard link %q to %q: invalid", hdr.Name, hdr.Linkname)
		}
		if err := clearPath(root, p, false); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		if err := root.Link(target, p); err != nil {
			return fmt.Errorf("hard link %q to %q: %w", hdr.Name, hdr.Linkname, err)
		}
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		// Never created: a sandbox gets its /dev from the runtime.
		u.skipped++
		return nil
	default:
		u.log.Debug("image layer: tar entry type skipped", "layer", u.layer, "name", hdr.Name, "type", hdr.Typeflag)
		return nil
	}
}

// whiteout turns an OCI whiteout into overlayfs form: .wh.NAME becomes the character device
// 0:0 NAME, .wh..wh..opq the opaque xattrs on its directory.
func (u *unpacker) whiteout(root *os.Root, entry, dir, base string) error {
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("entry %q: %w", entry, err)
	}
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("entry %q: %w", entry, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		return fmt.Errorf("entry %q: parent is not a directory", entry)
	}
	fd := int(d.Fd())
	if base == whiteoutOpaque {
		for _, x := range opaqueXattrs {
			if err := unix.Fsetxattr(fd, x, []byte("y"), 0); err != nil {
				return fmt.Errorf("entry %q: set %s: %w", entry, x, err)
			}
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		return nil // other AUFS metadata (.wh..wh.plnk ...): nothing to do
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("entry %q: invalid whiteout", entry)
	}
	if err := clearPath(root, path.Join(dir, name), false); err != nil {
		return fmt.Errorf("entry %q: %w", entry, err)
	}
	if err := unix.Mknodat(fd, name, unix.S_IFCHR, int(unix.Mkdev(0, 0))); err != nil {
		return fmt.Errorf("entry %q: whiteout: %w", entry, err)
	}
	return nil
}

// meta applies owner, mode bits (setuid, setgid and sticky included), allowed xattrs and the
// mtime of a directory, file or symlink. Owner first: chown clears setuid.
func (u *unpacker) meta(root *os.Root, p string, hdr *tar.Header) error {
	if err := root.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("entry %q: %w", hdr.Name, err)
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return nil // a symlink's mode and times do not matter
	}
	mode := hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if err := root.Chmod(p, mode); err != nil {
		return fmt.Errorf("entry %q: %w", hdr.Name, err)
	}
	if err := u.xattrs(root, p, hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeDir {
		if err := root.Chtimes(p, hdr.AccessTime, hdr.ModTime); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	return nil
}

// xattrs applies the entry's extended attributes that are safe: file capabilities and user.*.
// trusted.* and user.overlay.* are refused: they would let a layer forge overlayfs metadata
// (redirects, opaque dirs) of its own.
func (u *unpacker) xattrs(root *os.Root, p string, hdr *tar.Header) error {
	var f *os.File
	for k, v := range hdr.PAXRecords {
		x, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if x != "security.capability" && (!strings.HasPrefix(x, "user.") || strings.HasPrefix(x, "user.overlay.")) {
			u.log.Debug("image layer: xattr skipped", "layer", u.layer, "name", hdr.Name, "xattr", x)
			continue
		}
		if f == nil {
			var err error
			if f, err = root.Open(p); err != nil {
				return fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			defer f.Close()
		}
		if err := unix.Fsetxattr(int(f.Fd()), x, []byte(v), 0); err != nil {
			return fmt.Errorf("entry %q: set %s: %w", hdr.Name, x, err)
		}
	}
	return nil
}

// clearPath removes what is at p (an earlier entry of the same layer), unless it is a directory
// and keepDir is set.
func clearPath(root *os.Root, p string, keepDir bool) error {
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if keepDir && fi.IsDir() {
		return nil
	}
	return root.RemoveAll(p)
}

// cleanPath returns an entry's name relative to the layer's root, refusing names that are
// absolute or climb out of it.
func cleanPath(name string) (string, error) {
	if path.IsAbs(name) {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "entry %q: absolute path", name)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "entry %q leaves the layer", name)
	}
	return c, nil
}

// budgetReader counts uncompressed bytes against the image's cap.
type budgetReader struct {
	r io.Reader
	u *unpacker
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.u.n += int64(n)
	if b.u.budget.Add(int64(n)) > b.u.max {
		return n, errdefs.Invalid("image", "unpacks to more than the cap of %d bytes (MaxImageBytes)", b.u.max)
	}
	return n, err
}

// duSize is the bytes of the regular files under dir.
func duSize(dir string) int64 {
	var n int64
	// The walk cannot fail: its function skips what it cannot read and returns nil.
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
