// Package rlimit raises airlock's own resource limits where a sandbox needs more than airlock
// inherited: a sandbox's init inherits them, and in its user namespace may lower them but never
// raise them.
package rlimit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// nrOpenPath is the host's ceiling on any process's RLIMIT_NOFILE (sysctl fs.nr_open).
const nrOpenPath = "/proc/sys/fs/nr_open"

// mu serializes the read-modify-write of this process's RLIMIT_NOFILE.
var mu sync.Mutex

// EnsureNoFile makes this process's hard RLIMIT_NOFILE at least n, so that a sandbox started next
// can have n open files: the process level's init and runc's init set their limit inside the
// sandbox's user namespace, where the hard limit they inherited is a ceiling. Only the hard limit
// moves, and only when a sandbox asks for more (a host whose hard limit is 65536 or more is never
// touched); the processes this one starts afterwards inherit its soft limit (which Go raised to
// the old hard one at start) instead of the soft limit airlock itself was started with. An n above
// the host's fs.nr_open cannot be had: that is an ErrUnavailable naming resources.maxOpenFiles.
func EnsureNoFile(n uint64) error {
	mu.Lock()
	defer mu.Unlock()
	var lim unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if lim.Max >= n {
		return nil
	}
	if ceiling, err := nrOpen(); err == nil && n > ceiling {
		return errdefs.Unavailable("resources.maxOpenFiles", "%d open files: this host allows at most %d per process (sysctl fs.nr_open)", n, ceiling)
	}
	raised := unix.Rlimit{Cur: lim.Cur, Max: n}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &raised, nil); err != nil {
		return errdefs.Unavailable("resources.maxOpenFiles", "%d open files: airlock's own hard limit (RLIMIT_NOFILE) is %d, and raising it needs CAP_SYS_RESOURCE: %v", n, lim.Max, err)
	}
	return nil
}

func nrOpen() (uint64, error) {
	b, err := os.ReadFile(nrOpenPath)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
