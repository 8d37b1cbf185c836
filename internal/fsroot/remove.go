package fsroot

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// removeNow removes the file, symlink (not its target) or empty directory at path. With recursive it
// removes a directory tree, never following a symlink inside it. Removing "/" is refused.
func (r *Root) removeNow(p string, recursive bool) error {
	clean, err := cleanPath(p)
	if err != nil {
		return err
	}
	if clean == "/" {
		return errdefs.Invalid("path", "the root directory cannot be removed")
	}
	if err := r.remove(clean, recursive); err != nil {
		return wrap("remove", clean, err)
	}
	return nil
}

func (r *Root) remove(clean string, recursive bool) error {
	dir, name, err := r.parent(clean)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dir, name, 0)
	}
	if recursive {
		if err := removeContents(dir, name); err != nil {
			return err
		}
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// removeContents empties the directory name in dir. It descends only through fds opened without
// following symlinks or leaving the directory, so a symlink swapped in for a subdirectory fails
// the removal instead of leading it elsewhere.
func removeContents(dir int, name string) error {
	fd, err := openat2(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW,
		unix.RESOLVE_BENEATH|unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	// Read all names first: unlinking while reading a directory may skip entries.
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err = removeContents(fd, n); err == nil {
				err = unix.Unlinkat(fd, n, unix.AT_REMOVEDIR)
			}
		} else if err == nil {
			err = unix.Unlinkat(fd, n, 0)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) { // ENOENT: already gone, as wanted
			return err
		}
	}
	return nil
}
