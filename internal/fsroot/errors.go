package fsroot

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// pathError is a failed operation on a sandbox path. It unwraps to both the errdefs sentinel,
// which the API edge maps to a status, and the errno, for callers that need the kernel's detail.
type pathError struct {
	op    string
	path  string
	errno unix.Errno
	kind  error // errdefs sentinel; nil if none fits (an internal error)
}

func (e *pathError) Error() string {
	msg := e.errno.Error()
	switch e.errno {
	case unix.EXDEV:
		// openat2 reports an escape attempt as a cross-device link, which would only confuse.
		msg = "path leads outside the sandbox"
	case unix.ELOOP:
		msg = "too many levels of symbolic links, or a link that may not be followed"
	}
	return fmt.Sprintf("%s %s: %s", e.op, e.path, msg)
}

// Unwrap makes errors.Is true for both the sentinel and the errno.
func (e *pathError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.errno}
	}
	return []error{e.kind, e.errno}
}

// wrap adds the operation and path to err and, when it carries an errno, the matching sentinel.
func wrap(op, path string, err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s %s: %w", op, path, err)
	}
	return &pathError{op: op, path: path, errno: errno, kind: kindOf(errno)}
}

// kindOf maps an errno to the errdefs sentinel it stands for.
func kindOf(errno unix.Errno) error {
	switch errno {
	case unix.ENOENT:
		return errdefs.ErrNotFound
	case unix.EEXIST, unix.ENOTEMPTY, unix.ENOTDIR, unix.EISDIR, unix.EROFS, unix.EBUSY, unix.ETXTBSY:
		return errdefs.ErrConflict
	case unix.EACCES, unix.EPERM:
		return errdefs.ErrPermissionDenied
	case unix.EXDEV, unix.ELOOP:
		// EXDEV: resolution would have left the root. ELOOP: a magic link (/proc/*/root, ...)
		// refused by RESOLVE_NO_MAGICLINKS, a symlink refused while removing a tree, or a real
		// loop; the first two are attempts to escape, and the kernel does not tell them apart.
		return errdefs.ErrPermissionDenied
	case unix.ENOSPC, unix.EDQUOT:
		return errdefs.ErrNoSpace
	case unix.EFBIG:
		return errdefs.ErrTooLarge
	case unix.ENAMETOOLONG:
		return errdefs.ErrInvalidArgument
	}
	return nil
}
