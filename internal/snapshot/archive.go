// Package snapshot saves and restores a sandbox's writable layer. A level hands WriteLayer the
// directory of its layer (as the host reaches it) and gets a tar stream; ExtractLayer puts such a
// stream into a fresh layer before the sandbox starts. Store keeps the streams compressed and
// content-addressed, and checks every byte against its sha256 when it is read back.
//
// The stream is the layer as it is on disk, not as the sandbox sees it: an overlay's upper
// directory keeps its whiteouts (character devices 0:0) and opaque and redirect xattrs, so that
// the layer is the same over the same image after a restore. Owners are written as the sandbox's
// ids, so a layer can be restored whatever host ids its next sandbox gets.
package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// Layout says which parts of a level's layer directory a snapshot holds.
type Layout struct {
	// Top are the layer's top-level entries that are the sandbox's state (e.g. "upper", "shm");
	// everything else (an overlay's work directory, mount points, the host's root during setup)
	// is the level's own and is neither written nor accepted back.
	Top []string
	// At maps a Top entry to the sandbox path its content is seen at ("/" for a root's skeleton or
	// an overlay's upper directory, "/dev/shm"); see SandboxPath.
	At map[string]string
}

// MaxID is the highest sandbox uid or gid a layer may hold: the levels map 65536 ids.
const MaxID = 65535

// WriteOptions tune WriteLayer.
type WriteOptions struct {
	Layout
	// SandboxID maps an owner as the host sees it to the sandbox's id, false for an owner that is
	// not one of the sandbox's (the level's own skeleton, owned by host root); nil is the
	// identity.
	SandboxID func(hostID int) (int, bool)
}

// hostOwned marks an entry the level made as host root (PAX record): restored, it is the
// level's again, and never setuid.
const hostOwned = "AIRLOCK.hostowned"

// WriteLayer writes the layer at dir as a tar stream to w and returns the bytes of file content it
// wrote. dir is read through an os.Root, so that nothing outside it is ever read, even if the
// sandbox changes the tree meanwhile; callers freeze the sandbox for a consistent snapshot.
func WriteLayer(w io.Writer, dir string, o WriteOptions) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open layer: %w", err)
	}
	defer root.Close()
	lw := &layerWriter{root: root, tw: tar.NewWriter(w), o: o, links: map[[2]uint64]string{}}
	if lw.o.SandboxID == nil {
		lw.o.SandboxID = func(id int) (int, bool) { return id, true }
	}
	for _, top := range o.Top {
		if _, err := root.Lstat(top); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := lw.walk(top); err != nil {
			return lw.n, err
		}
	}
	return lw.n, lw.tw.Close()
}

type layerWriter struct {
	root  *os.Root
	tw    *tar.Writer
	o     WriteOptions
	links map[[2]uint64]string // dev, inode of a file with more than one link → its first name
	n     int64
}

// walk writes p and, for a directory, everything below it, in name order.
func (lw *layerWriter) walk(p string) error {
	fi, err := lw.root.Lstat(p)
	if err != nil {
		return fmt.Errorf("layer %s: %w", p, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("layer %s: no stat", p)
	}
	hdr := &tar.Header{Name: p, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX}
	uid, uok := lw.o.SandboxID(int(st.Uid))
	gid, gok := lw.o.SandboxID(int(st.Gid))
	switch {
	case uok && gok && uid >= 0 && uid <= MaxID && gid >= 0 && gid <= MaxID:
		hdr.Uid, hdr.Gid = uid, gid
	case !uok && !gok && st.Uid == 0 && st.Gid == 0:
		hdr.PAXRecords = map[string]string{hostOwned: "1"}
	default:
		return fmt.Errorf("layer %s: owner %d:%d is neither the sandbox's nor the host's root", p, st.Uid, st.Gid)
	}
	var f *os.File // opened for content and xattrs
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		if f, err = lw.root.Open(p); err != nil {
			return fmt.Errorf("layer %s: %w", p, err)
		}
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := lw.links[key]; ok && st.Nlink > 1 {
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeLink, first, 0
			return lw.tw.WriteHeader(hdr)
		}
		if st.Nlink > 1 {
			lw.links[key] = p
		}
		if f, err = lw.root.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0); err != nil {
			return fmt.Errorf("layer %s: %w", p, err)
		}
		// The entry must be what was stat'ed: a file swapped meanwhile is refused, not read.
		var now unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &now); err != nil || now.Ino != st.Ino || now.Mode&unix.S_IFMT != unix.S_IFREG {
			f.Close()
			return fmt.Errorf("layer %s: changed while it was saved", p)
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, now.Size
	case unix.S_IFLNK:
		target, err := lw.root.Readlink(p)
		if err != nil {
			return fmt.Errorf("layer %s: %w", p, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			return nil // only an overlay's whiteout is layer state; the levels never make devices
		}
		hdr.Typeflag = tar.TypeChar
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	default:
		return nil // sockets and the like do not outlive their processes
	}
	if f != nil {
		defer f.Close()
		if err := readXattrs(f, hdr); err != nil {
			return fmt.Errorf("layer %s: %w", p, err)
		}
	}
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeReg {
		n, err := io.CopyN(lw.tw, f, hdr.Size)
		lw.n += n
		if err != nil {
			return fmt.Errorf("layer %s: %w (it changed while it was saved)", p, err)
		}
		return nil
	}
	if hdr.Typeflag != tar.TypeDir {
		return nil
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("layer %s: %w", p, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := lw.walk(p + "/" + name); err != nil {
			return err
		}
	}
	return nil
}

// keptXattr reports whether an extended attribute is layer state a restore may set again:
// overlayfs's own markers of the upper directory (opaque directories, renamed directories),
// the user's namespace and file capabilities. Nothing else (trusted.* other than overlay's,
// security.* labels) is saved or restored.
func keptXattr(name string) bool {
	for _, pre := range []string{"trusted.overlay.", "user.overlay."} {
		if rest, ok := strings.CutPrefix(name, pre); ok {
			return rest == "opaque" || rest == "redirect"
		}
	}
	return name == "security.capability" || strings.HasPrefix(name, "user.")
}

func readXattrs(f *os.File, hdr *tar.Header) error {
	fd := int(f.Fd())
	buf := make([]byte, 4096)
	n, err := unix.Flistxattr(fd, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Flistxattr(fd, nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Flistxattr(fd, buf)
		}
	}
	if errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list xattrs: %w", err)
	}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" || !keptXattr(name) {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Fgetxattr(fd, name, v)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return fmt.Errorf("xattr %s: %w", name, err)
		}
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+name] = string(v[:m])
	}
	return nil
}

// ExtractOptions tune ExtractLayer.
type ExtractOptions struct {
	Layout
	// HostID maps a sandbox id to the owner files get; nil is the identity (an init extracting
	// inside the sandbox's user namespace).
	HostID func(id int) int
	// HostOwned accepts entries the level made as host root (see WriteOptions.SandboxID); they
	// keep the extracting process's owner. Only a level that extracts as host root sets it.
	HostOwned bool
}

// ExtractLayer extracts a stream WriteLayer wrote into dir, a fresh layer, and returns the bytes
// of file content it wrote. It reads r to its end, so that an error a reader gives only there (a
// Store's digest check) fails the extraction. The stream is treated as hostile: every path goes through an os.Root
// (nothing is created or followed outside dir), only the layout's top-level entries are accepted,
// owners must be sandbox ids, and no device but a whiteout is made. Any error leaves dir to be
// thrown away with the sandbox being made.
func ExtractLayer(r io.Reader, dir string, o ExtractOptions) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open layer: %w", err)
	}
	defer root.Close()
	if o.HostID == nil {
		o.HostID = func(id int) int { return id }
	}
	var n int64
	var dirs []*tar.Header
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, corrupt("tar: %v", err)
		}
		p, err := entryPath(hdr.Name, o.Top)
		if err != nil {
			return n, err
		}
		if hdr.Uid < 0 || hdr.Uid > MaxID || hdr.Gid < 0 || hdr.Gid > MaxID {
			return n, corrupt("entry %q: owner %d:%d out of range", hdr.Name, hdr.Uid, hdr.Gid)
		}
		// The level builds on its top-level directories; they may be nothing else.
		if !strings.Contains(p, "/") && hdr.Typeflag != tar.TypeDir {
			return n, corrupt("entry %q: a layer's %s is a directory", hdr.Name, p)
		}
		if parent := path.Dir(p); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			if fi, err := root.Lstat(p); err != nil || !fi.IsDir() {
				return n, corrupt("entry %q: not a directory", hdr.Name)
			}
			dirs = append(dirs, hdr)
		case tar.TypeReg:
			f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			m, err := io.Copy(f, tr)
			n += m
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			// The target is stored as is; it is resolved only in the sandbox's root, never here.
			if err := root.Symlink(hdr.Linkname, p); err != nil {
				return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			target, err := entryPath(hdr.Linkname, o.Top)
			if err != nil {
				return n, err
			}
			if err := root.Link(target, p); err != nil {
				return n, fmt.Errorf("hard link %q to %q: %w", hdr.Name, hdr.Linkname, err)
			}
			continue // a hard link shares its target's owner, mode and times
		case tar.TypeChar, tar.TypeFifo:
			mode := uint32(unix.S_IFIFO)
			if hdr.Typeflag == tar.TypeChar {
				if hdr.Devmajor != 0 || hdr.Devminor != 0 {
					return n, corrupt("entry %q: a device", hdr.Name)
				}
				mode = unix.S_IFCHR
			}
			if err := mknodIn(root, p, mode); err != nil {
				return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		default:
			return n, corrupt("entry %q: type %q is not layer content", hdr.Name, hdr.Typeflag)
		}
		if hdr.PAXRecords[hostOwned] != "" && !o.HostOwned {
			return n, corrupt("entry %q: owned by the host", hdr.Name)
		}
		if err := meta(root, p, hdr, o.HostID); err != nil {
			return n, err
		}
	}
	// To the end of the stream, past the tar's own: a Store's reader checks the digest there.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return n, err
	}
	// Directory times last: creating entries in a directory changes its mtime.
	for _, hdr := range slices.Backward(dirs) {
		p, _ := entryPath(hdr.Name, o.Top)
		if err := root.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
			return n, fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	return n, nil
}

// entryPath returns an entry's name relative to the layer, refusing names that are absolute,
// climb out of it or are not under one of top.
func entryPath(name string, top []string) (string, error) {
	if path.IsAbs(name) {
		return "", corrupt("entry %q: absolute path", name)
	}
	c := path.Clean(name)
	first, _, _ := strings.Cut(c, "/")
	if c == "." || first == ".." || !slices.Contains(top, first) {
		return "", corrupt("entry %q is not part of a layer", name)
	}
	return c, nil
}

func mknodIn(root *os.Root, p string, mode uint32) error {
	d, err := root.Open(path.Dir(p))
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Mknodat(int(d.Fd()), path.Base(p), mode, 0)
}

// meta applies owner, mode bits (setuid, setgid and sticky included), kept xattrs and mtime. Owner
// first: chown clears setuid.
func meta(root *os.Root, p string, hdr *tar.Header, hostID func(int) int) error {
	if hdr.PAXRecords[hostOwned] != "" {
		hdr.Mode &^= 0o6000 // the extracting process (host root) owns it: never setuid
	} else if err := root.Lchown(p, hostID(hdr.Uid), hostID(hdr.Gid)); err != nil {
		return fmt.Errorf("entry %q: %w", hdr.Name, err)
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return nil
	}
	mode := fs.FileMode(hdr.Mode) & fs.ModePerm
	if hdr.Mode&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if hdr.Mode&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if hdr.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	if err := root.Chmod(p, mode); err != nil {
		return fmt.Errorf("entry %q: %w", hdr.Name, err)
	}
	if hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeReg {
		if err := setXattrs(root, p, hdr); err != nil {
			return err
		}
	}
	if hdr.Typeflag != tar.TypeDir {
		if err := root.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	return nil
}

func setXattrs(root *os.Root, p string, hdr *tar.Header) error {
	var f *os.File
	for k, v := range hdr.PAXRecords {
		x, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if !keptXattr(x) {
			return corrupt("entry %q: xattr %s is not layer content", hdr.Name, x)
		}
		if f == nil {
			var err error
			if f, err = root.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0); err != nil {
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

// ErrCorrupt marks a snapshot whose content is not what was saved: a digest that does not match,
// a stream that is not a layer. It wraps errdefs.ErrConflict: the snapshot exists but cannot be
// used.
var ErrCorrupt = fmt.Errorf("snapshot is corrupt: %w", errdefs.ErrConflict)

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
}
