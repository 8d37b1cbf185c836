package wasm

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

type sysStat = sys.Stat_t

// confinedFS is one host directory as a guest sees it, through wazero's WASI. wazero's own DirFS
// joins the guest's path to the directory as it is: it neither cleans ".." away nor refuses to
// follow a symlink out of the directory (wazero/wazero#2321: sandboxing its WASI is out of its
// scope). confinedFS adds that confinement:
//   - every path is cleaned lexically as if rooted at the mount, so ".." never leaves it;
//   - the guest cannot make symlinks, and no symlink found on a path is followed (ELOOP), so a
//     link that got into the directory another way (a host-side write to a bound directory) leads
//     nowhere;
//   - writes are allowed only beneath the writable guest paths and never beneath the read-only
//     ones (filesystem.readOnly), everything else is EROFS, as the read-only root of the other
//     levels;
//   - the sandbox's open files are counted against its maxOpenFiles (EMFILE);
//   - blocked guest paths (filesystem.blocked) are EACCES;
//   - writes the jail's memory could not pay for are EIO (guard, see storeGuard).
//
// The kernel caps the size of what is written (the sandbox's store is a tmpfs of diskMb).
type confinedFS struct {
	inner    experimentalsys.FS
	dir      string   // the host directory
	at       string   // the guest path it is mounted at
	writable []string // guest paths beneath which writes are allowed; "/" for all
	readOnly []string // guest paths beneath which writes are refused, writable or not
	blocked  []string // guest paths that are inaccessible
	files    *openFiles
	guard    *storeGuard // nil: no guard
}

// storeGuard refuses writes to the store that the jail's memory could not pay for: the store's
// pages are charged to the jail's cgroup (memoryMb), and a write past what it has left would be
// the kernel's OOM kill of the worker, with every command it runs. A write fails (EIO: wazero
// has no ENOSPC) instead, and the sandbox goes on.
type storeGuard struct {
	room    func(delta uint64) bool // whether delta more bytes fit (jailBudget)
	mu      sync.Mutex              // guards since
	since   uint64                  // bytes written since room last said yes
	refused atomic.Int64            // writes refused
}

// guardEvery is how many bytes may be written between two looks at the room left.
const guardEvery = 1 << 20

// allow says whether n more bytes may be written.
func (g *storeGuard) allow(n int) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since+uint64(n) < guardEvery {
		g.since += uint64(n)
		return true
	}
	if !g.room(g.since + uint64(n)) {
		g.refused.Add(1)
		return false
	}
	g.since = 0
	return true
}

// openFiles counts a sandbox's open files against its limit.
type openFiles struct {
	n     atomic.Int64
	limit int64
}

func (o *openFiles) take() bool {
	if o.n.Add(1) > o.limit {
		o.n.Add(-1)
		return false
	}
	return true
}

func (o *openFiles) release() { o.n.Add(-1) }

func newConfinedFS(dir, at string, writable, blocked []string, files *openFiles) *confinedFS {
	return &confinedFS{inner: sysfs.DirFS(dir), dir: dir, at: at, writable: writable, blocked: blocked, files: files}
}

var _ experimentalsys.FS = (*confinedFS)(nil)

// clean turns a guest path relative to the mount into one that cannot leave it: "" or "." is the
// mount's root.
func clean(p string) string {
	c := path.Clean("/" + p)
	if c == "/" {
		return "."
	}
	return c[1:]
}

// guest is the guest path of rel.
func (c *confinedFS) guest(rel string) string {
	if rel == "." {
		return c.at
	}
	return path.Join(c.at, rel)
}

func beneath(p string, dirs []string) bool {
	for _, d := range dirs {
		if d == "/" || p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// resolve cleans p and checks that no directory on the way to it is a symlink (nor it, when
// follow) and that it is not blocked.
func (c *confinedFS) resolve(p string, follow bool) (string, experimentalsys.Errno) {
	rel := clean(p)
	if beneath(c.guest(rel), c.blocked) {
		return "", experimentalsys.EACCES
	}
	if rel == "." {
		return rel, 0
	}
	parts := strings.Split(rel, "/")
	host := c.dir
	for i, part := range parts {
		host = filepath.Join(host, part)
		if i == len(parts)-1 && !follow {
			break
		}
		fi, err := os.Lstat(host)
		if err != nil {
			break // what does not exist cannot be a link; the operation itself reports it
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", experimentalsys.ELOOP
		}
	}
	return rel, 0
}

// resolveWrite is resolve for an operation that changes rel: it must lie beneath a writable path.
func (c *confinedFS) resolveWrite(p string, follow bool) (string, experimentalsys.Errno) {
	rel, errno := c.resolve(p, follow)
	if errno != 0 {
		return "", errno
	}
	if g := c.guest(rel); !beneath(g, c.writable) || beneath(g, c.readOnly) {
		return "", experimentalsys.EROFS
	}
	return rel, 0
}

const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_TRUNC | experimentalsys.O_APPEND

func (c *confinedFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	var rel string
	var errno experimentalsys.Errno
	if flag&writeFlags != 0 {
		rel, errno = c.resolveWrite(p, true)
	} else {
		rel, errno = c.resolve(p, true)
	}
	if errno != 0 {
		return nil, errno
	}
	if !c.files.take() {
		// WASI has EMFILE, but wazero's errno set has not: EAGAIN is the nearest it passes on.
		return nil, experimentalsys.EAGAIN
	}
	// O_NOFOLLOW as well: the last component cannot have become a link since resolve looked.
	f, errno := c.inner.OpenFile(rel, flag|experimentalsys.O_NOFOLLOW, perm)
	if errno != 0 {
		c.files.release()
		return nil, errno
	}
	return &countedFile{File: f, files: c.files, guard: c.guard}, 0
}

// countedFile gives its slot back to the sandbox's open files when closed, and writes through
// the store's guard.
type countedFile struct {
	experimentalsys.File
	files  *openFiles
	guard  *storeGuard
	closed atomic.Bool
}

func (f *countedFile) Write(b []byte) (int, experimentalsys.Errno) {
	if !f.guard.allow(len(b)) {
		return 0, experimentalsys.EIO
	}
	return f.File.Write(b)
}

func (f *countedFile) Pwrite(b []byte, off int64) (int, experimentalsys.Errno) {
	if !f.guard.allow(len(b)) {
		return 0, experimentalsys.EIO
	}
	return f.File.Pwrite(b, off)
}

func (f *countedFile) Close() experimentalsys.Errno {
	if f.closed.CompareAndSwap(false, true) {
		defer f.files.release()
	}
	return f.File.Close()
}

func (c *confinedFS) Lstat(p string) (st sysStat, errno experimentalsys.Errno) {
	rel, errno := c.resolve(p, false)
	if errno != 0 {
		return st, errno
	}
	return c.inner.Lstat(rel)
}

func (c *confinedFS) Stat(p string) (st sysStat, errno experimentalsys.Errno) {
	rel, errno := c.resolve(p, true)
	if errno != 0 {
		return st, errno
	}
	return c.inner.Stat(rel)
}

func (c *confinedFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	rel, errno := c.resolveWrite(p, false)
	if errno != 0 {
		return errno
	}
	return c.inner.Mkdir(rel, perm)
}

func (c *confinedFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	rel, errno := c.resolveWrite(p, true)
	if errno != 0 {
		return errno
	}
	// Nothing the guest makes is setuid or setgid: there is no one to gain anything, but the
	// host may read this directory (a bound one) later.
	return c.inner.Chmod(rel, perm&fs.ModePerm)
}

func (c *confinedFS) Rename(from, to string) experimentalsys.Errno {
	f, errno := c.resolveWrite(from, false)
	if errno != 0 {
		return errno
	}
	t, errno := c.resolveWrite(to, false)
	if errno != 0 {
		return errno
	}
	return c.inner.Rename(f, t)
}

func (c *confinedFS) Rmdir(p string) experimentalsys.Errno {
	rel, errno := c.resolveWrite(p, false)
	if errno != 0 {
		return errno
	}
	return c.inner.Rmdir(rel)
}

func (c *confinedFS) Unlink(p string) experimentalsys.Errno {
	rel, errno := c.resolveWrite(p, false)
	if errno != 0 {
		return errno
	}
	return c.inner.Unlink(rel)
}

func (c *confinedFS) Link(oldPath, newPath string) experimentalsys.Errno {
	o, errno := c.resolveWrite(oldPath, false)
	if errno != 0 {
		return errno
	}
	n, errno := c.resolveWrite(newPath, false)
	if errno != 0 {
		return errno
	}
	return c.inner.Link(o, n)
}

// Symlink is refused: a link is the one way a path could lead out of the directory.
func (c *confinedFS) Symlink(_, _ string) experimentalsys.Errno { return experimentalsys.EPERM }

func (c *confinedFS) Readlink(p string) (string, experimentalsys.Errno) {
	rel, errno := c.resolve(p, false)
	if errno != 0 {
		return "", errno
	}
	return c.inner.Readlink(rel)
}

func (c *confinedFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	rel, errno := c.resolveWrite(p, true)
	if errno != 0 {
		return errno
	}
	return c.inner.Utimens(rel, atim, mtim)
}

// mount is a filesystem at a guest path.
type mount struct {
	at string
	fs experimentalsys.FS
}

// mounts is a sandbox's guest filesystem: the mounts, longest guest path first, as the guest's
// libc resolves a path to its preopened directories.
type mounts []mount

func (m mounts) sorted() mounts {
	sort.SliceStable(m, func(i, j int) bool { return len(m[i].at) > len(m[j].at) })
	return m
}

// Resolve implements node.Mounts: the filesystem mounted at the longest prefix of p, an absolute
// guest path, and p relative to it.
func (m mounts) Resolve(p string) (experimentalsys.FS, string, bool) {
	p = path.Clean(p)
	for _, mt := range m {
		switch {
		case mt.at == "/":
			return mt.fs, clean(p), true
		case p == mt.at:
			return mt.fs, ".", true
		case strings.HasPrefix(p, mt.at+"/"):
			return mt.fs, clean(p[len(mt.at):]), true
		}
	}
	return nil, "", false
}
