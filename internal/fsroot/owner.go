package fsroot

import (
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
)

// NewAsOwner is New for a filesystem that belongs to a user namespace in which host root has no
// id, such as a sandbox's writable layer: the kernel refuses to create an inode there for an
// unmapped owner (EOVERFLOW). Every operation then runs with the filesystem ids uid:gid (setfsuid
// on a locked thread), so it has exactly the sandbox user's rights — no more, since changing the
// fsuid away from 0 also drops host root's file capabilities — and what it creates is that
// user's.
func NewAsOwner(dir *os.File, uid, gid int) *Root {
	return &Root{dir: dir, uid: uid, gid: gid, asOwner: true}
}

// do runs fn with the filesystem ids of the owner when the root was made with NewAsOwner.
func (r *Root) do(fn func() error) error {
	if !r.asOwner {
		return fn()
	}
	// The fs ids are per thread: the goroutine keeps this thread until they are back to root's.
	runtime.LockOSThread()
	prevGid, _ := unix.SetfsgidRetGid(r.gid)
	prevUid, _ := unix.SetfsuidRetUid(r.uid)
	err := fn()
	// setfs[ug]id report no failure, only the previous ids: read them back instead.
	_ = unix.Setfsuid(prevUid)
	_ = unix.Setfsgid(prevGid)
	uid, _ := unix.SetfsuidRetUid(-1)
	gid, _ := unix.SetfsgidRetGid(-1)
	if uid != prevUid || gid != prevGid {
		// Could not switch back: leave the thread locked, so it dies with this goroutine instead
		// of serving others with the sandbox user's ids.
		return err
	}
	runtime.UnlockOSThread()
	return err
}

// Open opens the regular file at path for reading, following symlinks inside the root.
func (r *Root) Open(p string) (f *os.File, info api.FileInfo, err error) {
	err = r.do(func() error { f, info, err = r.openNow(p); return err })
	return f, info, err
}

// Stat describes path without following a final symlink.
func (r *Root) Stat(p string) (info api.FileInfo, err error) {
	err = r.do(func() error { info, err = r.statNow(p); return err })
	return info, err
}

// List describes the entries of the directory at path, sorted by name; a symlink to a directory
// is followed.
func (r *Root) List(p string) (list []api.FileInfo, err error) {
	err = r.do(func() error { list, err = r.listNow(p); return err })
	return list, err
}

// Write creates or replaces the regular file at path with src (at most limit bytes; more is
// ErrTooLarge and leaves nothing behind), atomically, with permission bits mode (0 means 0644).
// A symlink at path is replaced, not followed. Missing parents are ErrNotFound unless parents.
func (r *Root) Write(p string, src io.Reader, mode os.FileMode, limit int64, parents bool) (info api.FileInfo, err error) {
	err = r.do(func() error { info, err = r.writeNow(p, src, mode, limit, parents); return err })
	return info, err
}

// Mkdir creates the directory at path (0755); with parents like mkdir -p.
func (r *Root) Mkdir(p string, parents bool) (info api.FileInfo, err error) {
	err = r.do(func() error { info, err = r.mkdirNow(p, parents); return err })
	return info, err
}

// Remove removes the file, symlink (not its target) or empty directory at path; with recursive a
// whole tree, never following a symlink inside it. Removing "/" is refused.
func (r *Root) Remove(p string, recursive bool) error {
	return r.do(func() error { return r.removeNow(p, recursive) })
}
