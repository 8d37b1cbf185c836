// Package fsdiff tells which files of a sandbox an exec created, modified and deleted, from two
// scans of the sandbox's writable layer: one before the exec, one after.
//
// What it computes: Scan walks a layer directory (laid out as a snapshot.Layout says) and records,
// per sandbox path, the entry's type and mode, owner, size, mtime, ctime and inode; an overlay
// whiteout becomes a deleted entry and an opaque directory is marked. Compare sets two scans side
// by side; CompareOver also reads the image's layers beneath an overlay, so that a copied-up image
// file counts as modified rather than created and the image's files a whiteout or an opaque
// directory hides count as deleted.
// Where only the sandbox's own kernel can read the layer (a VM's disk), the scan is made there and
// crosses to the host in a wire form (WriteTree, ReadTree), which the host reads within bounds and
// refuses unless it is a scan's tree; the comparison is the host's, as everywhere.
//
// Its cost: one statx per entry and one open, getdents and listxattr per directory, no file is
// ever opened or read (about a microsecond per entry on tmpfs; see BenchmarkScan), and a map entry
// per path. A scan stops at MaxEntries entries and does not descend below maxDepth directories;
// the tree then says Partial.
//
// Its limits: the layer is read live, so a file written while it is scanned may or may not be
// seen; a change that leaves size, mtime, ctime and inode as they were (possible only within
// the clock's granularity, or with a restored ctime, which takes the host's CAP_SYS_TIME) is not
// seen; a file changed and restored within one exec is not a change; a hard link to an existing
// file makes the file modified (its ctime moves) besides the new path created; a directory counts
// as modified only when its mode, owner or inode (replaced) changes, never because of its
// children; a rename is a deletion and a creation. Paths outside the writable layer (read-write
// bind mounts of the host) are not seen at all. Overlay's redirect_dir and metacopy are not
// followed (airlock's overlays use neither).
package fsdiff

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/snapshot"
)

// MaxEntries is how many entries Scan records before it stops and says Partial: enough for any
// sandbox a person reads the audit of, and a bound on the memory and time a scan takes.
const MaxEntries = 100_000

// maxEntries is MaxEntries, lowered by tests.
var maxEntries = MaxEntries

// maxDepth is how deep Scan descends: the walk holds a descriptor per level of the directory it
// is in, and a path the sandbox could not use anyway (PATH_MAX) is not worth one.
const maxDepth = 256

// Entry is what a scan saw at one sandbox path.
type Entry struct {
	Mode     uint32 // st_mode: the type and the permission bits
	UID, GID uint32 // as the host sees them
	Size     int64
	MtimeNs  int64
	CtimeNs  int64
	Ino      uint64
	// Deleted marks an overlay whiteout: the path is deleted from the image below.
	Deleted bool
	// Opaque marks an overlay opaque directory: nothing of the image below shows through it.
	Opaque bool
}

// IsDir reports whether e is a directory.
func (e Entry) IsDir() bool { return e.Mode&unix.S_IFMT == unix.S_IFDIR }

// Tree is one scan of a layer: sandbox path → entry.
type Tree struct {
	Entries map[string]Entry
	// Partial says the scan stopped at MaxEntries or maxDepth: paths beyond are missing.
	Partial bool
}

// Scan walks the layer at dir, whose top-level entries are laid out as layout says. It only
// lstats (fstatat without following symlinks) and reads directories, relative to the descriptor of
// the directory it is in, so nothing outside dir is reached even while the sandbox changes the
// tree; it does not descend into another mount (a mount point is recorded, not entered). A top-level entry without a
// sandbox path (layout.At) is the level's own and is skipped; so is one that does not exist.
func Scan(dir string, layout snapshot.Layout) (Tree, error) {
	rootFd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Tree{}, fmt.Errorf("open layer: %w", err)
	}
	defer unix.Close(rootFd)
	var st unix.Statx_t
	if err := unix.Statx(rootFd, "", unix.AT_EMPTY_PATH, statxMask, &st); err != nil {
		return Tree{}, fmt.Errorf("layer: %w", err)
	}
	s := &scanner{mnt: st.Mnt_id, t: Tree{Entries: map[string]Entry{}}}
	for _, top := range layout.Top {
		at, ok := layout.SandboxPath(top)
		if !ok {
			continue
		}
		fd, _, err := s.openDir(rootFd, top)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return Tree{}, fmt.Errorf("layer %s: %w", top, err)
		}
		if err := s.walk(fd, at, 0); err != nil {
			return Tree{}, err
		}
	}
	return s.t, nil
}

type scanner struct {
	mnt uint64 // the layer's mount
	t   Tree
}

// statxMask is what a scan asks statx for: the basic fields and the mount, to stay on the layer's.
const statxMask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID

// walk records the entries of directory fd, sandbox path p, and descends into its directories.
// It closes fd.
func (s *scanner) walk(fd int, p string, depth int) error {
	f := os.NewFile(uintptr(fd), p)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return fmt.Errorf("layer %s: %w", p, err)
	}
	defer f.Close()
	// In name order, so that a partial scan covers the same paths every time.
	slices.Sort(names)
	for _, name := range names {
		if len(s.t.Entries) >= maxEntries {
			s.t.Partial = true
			return nil
		}
		var st unix.Statx_t
		if err := unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, statxMask, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed since the directory was read
			}
			return fmt.Errorf("layer %s: %w", join(p, name), err)
		}
		q := join(p, name)
		e := entryOf(&st)
		if e.Deleted || !e.IsDir() || st.Mnt_id != s.mnt {
			s.t.Entries[q] = e
			continue
		}
		if depth >= maxDepth {
			s.t.Entries[q] = e
			s.t.Partial = true
			continue
		}
		cfd, opaque, err := s.openDir(fd, name)
		if err != nil {
			if errors.Is(err, errChanged) {
				continue // replaced since it was stat'ed: the next scan sees what it became
			}
			return fmt.Errorf("layer %s: %w", q, err)
		}
		// The directory as opened: the same inode, so its fields are current.
		e.Opaque = opaque
		s.t.Entries[q] = e
		if err := s.walk(cfd, q, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// errChanged is a directory that became something else between its stat and its open.
var errChanged = errors.New("changed while it was scanned")

// openDir opens directory name of dir without following a symlink and says whether it is an
// overlay opaque directory. A name that is no longer a directory of the layer's filesystem is
// errChanged; ENOENT for the layer's top entries.
func (s *scanner) openDir(dir int, name string) (int, bool, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return -1, false, errChanged
	case err != nil:
		return -1, false, err
	}
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, statxMask, &st); err != nil || st.Mnt_id != s.mnt {
		unix.Close(fd)
		return -1, false, errChanged
	}
	return fd, opaqueFd(fd), nil
}

// opaqueXattrs mark an overlay opaque directory: trusted.* for an overlay the host mounted,
// user.* for one mounted with userxattr inside a user namespace.
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// opaqueFd reports whether directory fd carries overlay's opaque mark. A directory without
// extended attributes (nearly all) costs one listxattr.
func opaqueFd(fd int) bool {
	var names [256]byte
	n, err := unix.Flistxattr(fd, names[:])
	if err == nil && (n == 0 || !strings.Contains(string(names[:n]), "overlay.opaque")) {
		return false
	}
	return opaque(func(x string, v []byte) (int, error) { return unix.Fgetxattr(fd, x, v) })
}

// opaque reports whether get, an extended attribute getter of a directory, finds overlay's
// opaque mark.
func opaque(get func(attr string, dest []byte) (int, error)) bool {
	for _, x := range opaqueXattrs {
		var v [1]byte
		if n, err := get(x, v[:]); err == nil && n == 1 && v[0] == 'y' {
			return true
		}
	}
	return false
}

// whiteout reports whether a file of mode and device number rdev is an overlay whiteout: a
// character device 0:0.
func whiteout(mode uint32, rdev uint64) bool {
	return mode&unix.S_IFMT == unix.S_IFCHR && rdev == 0
}

func entryOf(st *unix.Statx_t) Entry {
	if whiteout(uint32(st.Mode), unix.Mkdev(st.Rdev_major, st.Rdev_minor)) {
		return Entry{Deleted: true}
	}
	return Entry{
		Mode: uint32(st.Mode), UID: st.Uid, GID: st.Gid, Size: int64(st.Size),
		MtimeNs: nanos(st.Mtime), CtimeNs: nanos(st.Ctime), Ino: st.Ino,
	}
}

func nanos(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }

// join is path.Join for a clean sandbox path and a name read from a directory.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
