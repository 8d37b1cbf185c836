// Package landlock confines the calling thread's filesystem access with the
// Linux Landlock LSM.
//
// It is a deliberately small, best-effort wrapper: Restrict handles every
// filesystem access right the running kernel's Landlock ABI understands,
// silently drops rights that ABI lacks, and grants either read/execute or full
// access below each configured path. Network access is intentionally left
// alone because airlock enforces network policy elsewhere.
//
// Landlock domains are per thread and inherited across fork and execve, so
// the intended use is: lock the goroutine to its OS thread, set
// PR_SET_NO_NEW_PRIVS, call Restrict, then start the untrusted program from
// that same thread.
package landlock

import (
	"errors"
	"fmt"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by every error that means the kernel cannot
// enforce Landlock at all (not compiled in, or disabled at boot). Callers are
// expected to detect it with errors.Is, warn, and continue unconfined.
var ErrUnavailable = errors.New("landlock unavailable")

// Rule grants access below Path (or to Path itself when it is not a
// directory).
type Rule struct {
	// Path must be absolute so the rule never depends on the working
	// directory. Symlinks are followed, so "/bin" on a merged-/usr system
	// grants access to "/usr/bin". A Path that does not exist is skipped.
	Path string
	// Write false grants reading files, listing directories and executing.
	// Write true grants every filesystem right the running ABI handles.
	Write bool
}

// Options enables optional Landlock scoping (ABI 6 and later). Both are off
// by default because they can break legitimate workloads (for example
// signalling a supervisor or reaching an abstract-socket D-Bus/X11 server).
// On kernels older than ABI 6 they are silently dropped, consistent with the
// best-effort handling of filesystem rights.
type Options struct {
	// ScopeSignals forbids sending signals to processes outside the new
	// Landlock domain.
	ScopeSignals bool
	// ScopeAbstractUnix forbids connecting to abstract UNIX sockets created
	// outside the new Landlock domain.
	ScopeAbstractUnix bool
}

// Filesystem rights grouped by the ABI version that introduced them. The
// kernel rejects a ruleset that handles a right it does not know (EINVAL), so
// these tables are what makes the best-effort downgrade possible.
const (
	// fsRightsV1 are the thirteen rights of the first ABI (Linux 5.13).
	fsRightsV1 uint64 = unix.LANDLOCK_ACCESS_FS_EXECUTE |
		unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	// ABI 2 (5.19) allows reparenting (rename/link across directories);
	// without handling it, ABI 1 denies every cross-directory rename.
	fsRightsV2 = fsRightsV1 | unix.LANDLOCK_ACCESS_FS_REFER
	// ABI 3 (6.2) adds truncate(2)/O_TRUNC.
	fsRightsV3 = fsRightsV2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	// ABI 4 only adds network rights, which this package does not handle.
	// ABI 5 (6.10) adds ioctl(2) on character and block devices.
	fsRightsV5 = fsRightsV3 | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// ABIs 6-8 add scoping, audit flags and TSYNC, but no filesystem rights.
	// ABI 9 (7.1) adds connecting to pathname UNIX sockets.
	fsRightsV9 = fsRightsV5 | unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX

	// fsReadRights is what a read-only Rule grants.
	fsReadRights uint64 = unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_EXECUTE

	// fsFileRights are the only rights the kernel accepts in a rule whose
	// path is not a directory (its ACCESS_FILE mask); anything else yields
	// EINVAL from landlock_add_rule.
	fsFileRights uint64 = unix.LANDLOCK_ACCESS_FS_EXECUTE |
		unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV |
		unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
)

// scopeABI is the first ABI version that understands the scoped field.
const scopeABI = 6

// ABI returns the Landlock ABI version offered by the running kernel. When
// Landlock cannot be used it returns 0 and an error wrapping both
// ErrUnavailable and the kernel's errno.
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, unavailableError(errno)
	}
	if int(v) < 1 {
		// Not expected from any kernel, but a zero ABI must never be
		// reported as success.
		return 0, fmt.Errorf("%w: kernel reported ABI version %d", ErrUnavailable, int(v))
	}
	return int(v), nil
}

// unavailableError explains why the version query failed, keeping the errno
// reachable through errors.Is for callers that want to distinguish causes.
func unavailableError(errno unix.Errno) error {
	switch errno {
	case unix.ENOSYS:
		return fmt.Errorf("%w: kernel built without CONFIG_SECURITY_LANDLOCK: %w", ErrUnavailable, errno)
	case unix.EOPNOTSUPP:
		return fmt.Errorf("%w: disabled at boot (add landlock to the lsm= parameter): %w", ErrUnavailable, errno)
	default:
		return fmt.Errorf("%w: querying ABI version: %w", ErrUnavailable, errno)
	}
}

// fsRights returns the filesystem rights that both this package and a kernel
// offering the given ABI understand. Newer kernels are capped at the rights
// known here, because handling a right whose semantics we have not reviewed
// could change behaviour unpredictably.
func fsRights(abi int) uint64 {
	switch {
	case abi >= 9:
		return fsRightsV9
	case abi >= 5:
		return fsRightsV5
	case abi >= 3:
		return fsRightsV3
	case abi >= 2:
		return fsRightsV2
	case abi >= 1:
		return fsRightsV1
	default:
		return 0
	}
}

// scopeRights converts opts into the ruleset's scoped bitmask, or 0 when the
// ABI predates scoping.
func scopeRights(abi int, opts Options) uint64 {
	if abi < scopeABI {
		return 0
	}
	var s uint64
	if opts.ScopeSignals {
		s |= unix.LANDLOCK_SCOPE_SIGNAL
	}
	if opts.ScopeAbstractUnix {
		s |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	return s
}

// ruleAccess computes the allowed_access of a path-beneath rule. It is
// always a subset of handled (the kernel rejects anything else) and, for
// non-directories, a subset of the file-only rights.
func ruleAccess(write, isDir bool, handled uint64) uint64 {
	access := fsReadRights
	if write {
		access = handled
	}
	if !isDir {
		access &= fsFileRights
	}
	return access & handled
}

// Restrict is RestrictWith(rules, Options{}).
func Restrict(rules []Rule) (int, error) {
	return RestrictWith(rules, Options{})
}

// RestrictWith confines the calling OS thread (and everything it later forks
// or executes) to rules, returning the kernel's Landlock ABI version.
//
// The caller must hold runtime.LockOSThread for as long as the restriction
// matters and must have set PR_SET_NO_NEW_PRIVS (or hold CAP_SYS_ADMIN in its
// user namespace). Every filesystem right known to the running ABI is
// handled, so anything not granted by a rule is denied. Rules whose Path does
// not exist are skipped. When Landlock is unavailable the result is 0 and an
// error wrapping ErrUnavailable; any other error means the thread may have
// been left unrestricted and the caller must not proceed as if confined.
func RestrictWith(rules []Rule, opts Options) (int, error) {
	abi, err := ABI()
	if err != nil {
		return 0, err
	}

	fd, err := createRuleset(fsRights(abi), scopeRights(abi, opts))
	if err != nil {
		return abi, err
	}
	defer unix.Close(fd)

	if _, err := addRules(fd, rules, fsRights(abi)); err != nil {
		return abi, err
	}

	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		if errno == unix.EPERM {
			return abi, fmt.Errorf("landlock_restrict_self: %w (set PR_SET_NO_NEW_PRIVS first)", errno)
		}
		return abi, fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return abi, nil
}

// createRuleset returns a ruleset fd handling fsAccess and scoped. Network
// rights are never handled.
func createRuleset(fsAccess, scoped uint64) (int, error) {
	attr := unix.LandlockRulesetAttr{
		Handled_access_fs: fsAccess,
		Scoped:            scoped,
	}
	// x/sys's struct carries every field of the newest UAPI, but older
	// kernels return E2BIG for a size they do not know unless the excess
	// is zero. Passing only the prefix we actually use keeps the call
	// meaningful on every ABI: handled_access_fs alone is ABI 1,
	// scoped (after handled_access_net) is ABI 6.
	size := unsafe.Offsetof(attr.Handled_access_fs) + unsafe.Sizeof(attr.Handled_access_fs)
	if scoped != 0 {
		size = unsafe.Offsetof(attr.Scoped) + unsafe.Sizeof(attr.Scoped)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	return int(fd), nil
}

// addRules adds one path-beneath rule per entry of rules to the ruleset fd
// and reports how many were added; missing paths are skipped.
func addRules(rulesetFD int, rules []Rule, handled uint64) (int, error) {
	added := 0
	for _, r := range rules {
		ok, err := addRule(rulesetFD, r, handled)
		if err != nil {
			return added, err
		}
		if ok {
			added++
		}
	}
	return added, nil
}

// addRule adds a single rule, returning false when its path does not exist.
func addRule(rulesetFD int, r Rule, handled uint64) (bool, error) {
	fd, isDir, ok, err := openBeneath(r.Path)
	if err != nil || !ok {
		return false, err
	}
	defer unix.Close(fd)

	access := ruleAccess(r.Write, isDir, handled)
	if access == 0 {
		// The kernel rejects empty rules with ENOMSG; granting
		// nothing is the same as having no rule.
		return false, nil
	}
	// The kernel struct is packed (12 bytes) and read with its own
	// sizeof, so the trailing padding of the Go struct is never seen.
	attr := unix.LandlockPathBeneathAttr{
		Allowed_access: access,
		Parent_fd:      int32(fd),
	}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("landlock_add_rule %q: %w", r.Path, errno)
	}
	return true, nil
}

// openBeneath opens path as the anchor of a path-beneath rule. O_PATH is
// enough for Landlock and works even on files the caller cannot read or
// execute. ok is false, with a nil error, when the path (or one of its
// parents) does not exist, so optional locations such as /lib64 can be listed
// unconditionally.
func openBeneath(path string) (fd int, isDir, ok bool, err error) {
	if !filepath.IsAbs(path) {
		return -1, false, false, fmt.Errorf("landlock rule path %q is not absolute", path)
	}
	fd, err = unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return -1, false, false, nil
	}
	if err != nil {
		return -1, false, false, fmt.Errorf("open landlock rule path %q: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false, false, fmt.Errorf("stat landlock rule path %q: %w", path, err)
	}
	return fd, st.Mode&unix.S_IFMT == unix.S_IFDIR, true, nil
}
