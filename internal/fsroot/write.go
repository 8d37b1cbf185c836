package fsroot

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

const (
	defaultFileMode = 0o644
	dirMode         = 0o755
)

// writeNow creates or replaces the regular file at path with the content of src, at most limit
// bytes (a negative limit means no limit; more is ErrTooLarge), with permission mode (0 means
// 0644). It writes a temporary file in the same directory and renames it over path, so that a
// reader never sees a half-written file and a failed write leaves nothing behind. A symlink at
// path is replaced, not followed. The parent directory must exist (ErrNotFound otherwise) unless
// parents is true; missing parents are then created 0755 and chowned.
func (r *Root) writeNow(p string, src io.Reader, mode os.FileMode, limit int64, parents bool) (api.FileInfo, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return api.FileInfo{}, err
	}
	if clean == "/" {
		return api.FileInfo{}, errdefs.Invalid("path", "the root directory is not a file")
	}
	if mode = mode.Perm(); mode == 0 {
		mode = defaultFileMode
	}
	var (
		dir     int
		created []string
	)
	if parents {
		dir, created, err = r.mkdirAll(path.Dir(clean))
	} else {
		dir, err = r.resolve(path.Dir(clean), unix.O_PATH|unix.O_DIRECTORY)
	}
	if err != nil {
		r.rmdirs(created)
		return api.FileInfo{}, wrap("write", clean, err)
	}
	info, err := r.writeAt(dir, path.Base(clean), clean, src, uint32(mode), limit)
	unix.Close(dir)
	if err != nil {
		r.rmdirs(created) // nothing is left behind, not even the parents
		return api.FileInfo{}, err
	}
	return info, nil
}

// writeAt is Write once the parent directory dir is open.
func (r *Root) writeAt(dir int, name, clean string, src io.Reader, mode uint32, limit int64) (api.FileInfo, error) {
	// Refuse a directory before reading the upload; the rename would fail only after it.
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return api.FileInfo{}, wrap("write", clean, unix.EISDIR)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return api.FileInfo{}, wrap("write", clean, err)
	}

	tmp, err := r.writeTemp(dir, src, mode, limit, &st)
	if errors.Is(err, errdefs.ErrTooLarge) {
		return api.FileInfo{}, fmt.Errorf("write %s: larger than %d bytes: %w", clean, limit, err)
	}
	if err != nil {
		return api.FileInfo{}, wrap("write", clean, err)
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		_ = unix.Unlinkat(dir, tmp, 0) // the rename's error is the one to report
		return api.FileInfo{}, wrap("write", clean, err)
	}
	return fileInfo(clean, &st, ""), nil
}

// writeTemp writes src to a new temporary file in dir, owned by the sandbox user and with mode,
// fills st with its stat and returns its name. On error nothing is left behind.
func (r *Root) writeTemp(dir int, src io.Reader, mode uint32, limit int64, st *unix.Stat_t) (string, error) {
	var (
		name string
		fd   int
		err  error
	)
	for range 10 {
		if name, err = tempName(); err != nil {
			return "", err
		}
		// O_EXCL never follows a symlink, and O_NOFOLLOW says so again.
		fd, err = unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), name)
	err = fillTemp(f, src, mode, r.uid, r.gid, limit, st)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlinkat(dir, name, 0) // the write's error is the one to report
		return "", err
	}
	return name, nil
}

// fillTemp gives the new file f its owner and mode, copies src into it and stats it.
func fillTemp(f *os.File, src io.Reader, mode uint32, uid, gid int, limit int64, st *unix.Stat_t) error {
	fd := int(f.Fd())
	// chown before chmod: chown clears setuid/setgid bits, and the explicit chmod ignores umask.
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	if limit >= 0 && limit < math.MaxInt64 {
		// Read one byte more than allowed, to tell "exactly limit" from "too large".
		src = io.LimitReader(src, limit+1)
	}
	n, err := io.Copy(f, src)
	if err != nil {
		return err
	}
	if limit >= 0 && n > limit {
		return errdefs.ErrTooLarge
	}
	// No fsync: the rename already hides partial content from readers, and sandbox files are
	// not promised to survive a host crash.
	return unix.Fstat(fd, st)
}

// tempName returns a hidden, random name for an upload in progress. It does not embed the final
// name, which could push it over NAME_MAX.
func tempName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return ".airlock-" + hex.EncodeToString(b[:]) + ".tmp", nil
}

// mkdirNow creates the directory at path, mode 0755 and owned by the sandbox user. With parents it
// works like mkdir -p: missing parents are created too, and an existing directory is no error.
func (r *Root) mkdirNow(p string, parents bool) (api.FileInfo, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return api.FileInfo{}, err
	}
	info, err := r.mkdir(clean, parents)
	if err != nil {
		return api.FileInfo{}, wrap("mkdir", clean, err)
	}
	return info, nil
}

func (r *Root) mkdir(clean string, parents bool) (api.FileInfo, error) {
	if parents {
		fd, _, err := r.mkdirAll(clean)
		if err != nil {
			return api.FileInfo{}, err
		}
		defer unix.Close(fd)
		return infoOf(fd, clean)
	}
	if clean == "/" {
		return api.FileInfo{}, unix.EEXIST
	}
	dir, name, err := r.parent(clean)
	if err != nil {
		return api.FileInfo{}, err
	}
	defer unix.Close(dir)
	if err := r.mkdirat(dir, name); err != nil {
		return api.FileInfo{}, err
	}
	return statAt(dir, name, clean)
}

// mkdirAll resolves the cleaned directory path p, creating what is missing like mkdir -p, and
// returns an O_PATH fd of it and the paths it created, outermost first. Every prefix is resolved
// by the kernel within the root, and a missing component is created in the fd of the prefix
// before it.
func (r *Root) mkdirAll(p string) (fd int, created []string, err error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY
	fd, err = r.resolve(p, flags)
	if !errors.Is(err, unix.ENOENT) {
		return fd, nil, err
	}
	dir, err := r.resolve("/", flags)
	if err != nil {
		return -1, nil, err
	}
	prefix := "/"
	for _, name := range strings.Split(p[1:], "/") {
		prefix = path.Join(prefix, name)
		fd, err = r.resolve(prefix, flags)
		if errors.Is(err, unix.ENOENT) {
			err = r.mkdirat(dir, name)
			switch {
			case err == nil:
				created = append(created, prefix)
				fd, err = r.resolve(prefix, flags)
			case errors.Is(err, unix.EEXIST):
				// Created concurrently, or a dangling symlink, which mkdir -p does not follow
				// either: then it stands in the way.
				if fd, err = r.resolve(prefix, flags); errors.Is(err, unix.ENOENT) {
					err = unix.EEXIST
				}
			}
		}
		unix.Close(dir)
		if err != nil {
			return -1, created, err
		}
		dir = fd
	}
	return dir, created, nil
}

// rmdirs removes the directories that mkdirAll created for a write that then failed, innermost
// first. Each is removed only if still empty; failures leave at worst an empty directory.
func (r *Root) rmdirs(created []string) {
	for _, p := range slices.Backward(created) {
		dir, name, err := r.parent(p)
		if err != nil {
			return
		}
		_ = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR) // one not empty stays, as said above
		unix.Close(dir)
	}
}

// mkdirat creates the directory name in dir, owned by the sandbox user with mode 0755.
func (r *Root) mkdirat(dir int, name string) error {
	if err := unix.Mkdirat(dir, name, dirMode); err != nil {
		return err
	}
	// Chown through an fd opened without following, so that a symlink swapped in after the
	// mkdir is refused rather than its target chowned.
	fd, err := openat2(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW,
		unix.RESOLVE_BENEATH|unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, r.uid, r.gid); err != nil {
		return err
	}
	return unix.Fchmod(fd, dirMode) // the mkdir mode was masked by umask
}
