// Package fsroot performs file operations inside a sandbox's root filesystem that cannot reach
// the host, however hostile the symlinks the sandbox plants: the kernel resolves every path with
// openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS), and only the final name is acted on, with *at()
// calls on the resolved parent directory. ResolveIn resolves a path of a root filesystem being
// assembled the same way, in user space, for mounts to be made on it.
package fsroot

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// openat2Retries bounds the retries of openat2's EAGAIN, which RESOLVE_IN_ROOT returns when a
// rename or mount anywhere on the system raced with a ".." step; the next try usually succeeds.
const openat2Retries = 32

// Root is a directory that file operations cannot leave. Its methods take absolute,
// slash-separated sandbox paths ("/workspace/a.txt"), cleaned lexically first; an empty or
// relative path or one with a NUL byte is an *errdefs.FieldError for "path". Errors wrap both an
// errdefs sentinel and the errno. The methods are safe for concurrent use; Close must come last.
type Root struct {
	dir      *os.File
	uid, gid int
	asOwner  bool // operations run with fsuid/fsgid uid:gid (NewAsOwner)
}

// New wraps dir (an open directory, e.g. O_PATH of /proc/PID/root); Root takes ownership and
// Close closes it. Files and directories it creates are chowned to uid:gid, the host ids of the
// sandbox's user, so that the sandbox can use them; -1 leaves an id unchanged.
func New(dir *os.File, uid, gid int) *Root {
	return &Root{dir: dir, uid: uid, gid: gid}
}

// Close closes the root directory.
func (r *Root) Close() error { return r.dir.Close() }

// openNow opens the regular file at path for reading, following symlinks inside the root.
func (r *Root) openNow(p string) (*os.File, api.FileInfo, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return nil, api.FileInfo{}, err
	}
	// O_NONBLOCK so that a FIFO planted at path cannot hang the open; it is rejected below.
	fd, err := r.resolve(clean, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, api.FileInfo{}, wrap("open", clean, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, api.FileInfo{}, wrap("open", clean, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return nil, api.FileInfo{}, &pathError{op: "open", path: clean, errno: unix.EISDIR, kind: errdefs.ErrInvalidArgument}
	default:
		unix.Close(fd)
		return nil, api.FileInfo{}, fmt.Errorf("open %s: not a regular file: %w", clean, errdefs.ErrInvalidArgument)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, api.FileInfo{}, wrap("open", clean, err)
	}
	return os.NewFile(uintptr(fd), clean), fileInfo(clean, &st, ""), nil
}

// statNow describes path without following a final symlink.
func (r *Root) statNow(p string) (api.FileInfo, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return api.FileInfo{}, err
	}
	info, err := r.stat(clean)
	if err != nil {
		return api.FileInfo{}, wrap("stat", clean, err)
	}
	return info, nil
}

func (r *Root) stat(clean string) (api.FileInfo, error) {
	if clean == "/" {
		fd, err := r.resolve("/", unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return api.FileInfo{}, err
		}
		defer unix.Close(fd)
		return infoOf(fd, clean)
	}
	dir, name, err := r.parent(clean)
	if err != nil {
		return api.FileInfo{}, err
	}
	defer unix.Close(dir)
	return statAt(dir, name, clean)
}

// listNow describes the entries of the directory at path, sorted by name. A symlink to a directory
// is followed, so that the directory it names is listed.
func (r *Root) listNow(p string) ([]api.FileInfo, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	fd, err := r.resolve(clean, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, wrap("list", clean, err)
	}
	dir := os.NewFile(uintptr(fd), clean)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, wrap("list", clean, err)
	}
	slices.Sort(names)
	infos := make([]api.FileInfo, 0, len(names))
	for _, name := range names {
		info, err := statAt(fd, name, path.Join(clean, name))
		if errors.Is(err, unix.ENOENT) {
			continue // removed since it was read; the sandbox keeps running
		}
		if err != nil {
			return nil, wrap("list", path.Join(clean, name), err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// cleanPath validates an absolute sandbox path and cleans it. Cleaning removes every "..", so the
// final component of a path other than "/" is always a real name.
func cleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errdefs.Invalid("path", "must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", errdefs.Invalid("path", "must not contain a NUL byte")
	case p[0] != '/':
		return "", errdefs.Invalid("path", "%q is not absolute", p)
	}
	return path.Clean(p), nil
}

// resolve opens the cleaned path p with flags, resolved by the kernel as if the root were "/".
func (r *Root) resolve(p string, flags int) (fd int, err error) {
	rc, err := r.dir.SyscallConn()
	if err != nil {
		return -1, err
	}
	// Control holds the root fd open for the call, so a concurrent Close cannot swap it.
	cerr := rc.Control(func(root uintptr) {
		fd, err = openat2(int(root), p, flags, unix.RESOLVE_IN_ROOT|unix.RESOLVE_NO_MAGICLINKS)
	})
	if cerr != nil {
		return -1, cerr
	}
	return fd, err
}

// parent resolves the directory holding the cleaned, non-root path p and returns an O_PATH fd of
// it and the final name, to be acted on with *at() calls that do not follow it.
func (r *Root) parent(p string) (int, string, error) {
	fd, err := r.resolve(path.Dir(p), unix.O_PATH|unix.O_DIRECTORY)
	return fd, path.Base(p), err
}

// openat2 is unix.Openat2 with O_CLOEXEC, retrying the EAGAIN of a racing rename and EINTR.
func openat2(dirfd int, p string, flags int, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolve}
	for range openat2Retries {
		fd, err := unix.Openat2(dirfd, p, &how)
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// infoOf describes the open file fd; clean is the path to report.
func infoOf(fd int, clean string) (api.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return api.FileInfo{}, err
	}
	return fileInfo(clean, &st, ""), nil
}

// statAt describes name in dir without following it; clean is the path to report.
func statAt(dir int, name, clean string) (api.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return api.FileInfo{}, err
	}
	var target string
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, unix.PathMax)
		// A failure means the link was replaced since the stat; it is then described without
		// its target rather than failing a listing.
		if n, err := unix.Readlinkat(dir, name, buf); err == nil {
			target = string(buf[:n])
		}
	}
	return fileInfo(clean, &st, target), nil
}

// fileInfo converts a stat result to its wire form.
func fileInfo(clean string, st *unix.Stat_t, target string) api.FileInfo {
	typ := api.FileOther
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		typ = api.FileRegular
	case unix.S_IFDIR:
		typ = api.FileDir
	case unix.S_IFLNK:
		typ = api.FileSymlink
	}
	return api.FileInfo{
		Name:    path.Base(clean),
		Path:    clean,
		Type:    typ,
		Size:    st.Size,
		Mode:    fmt.Sprintf("%04o", st.Mode&07777),
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC(),
		Target:  target,
	}
}
