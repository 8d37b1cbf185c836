//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Load installs prog as a seccomp filter on the calling OS thread only.
//
// There is deliberately no SECCOMP_FILTER_FLAG_TSYNC: the launcher filters
// the one locked thread that is about to execve the sandboxed program, and
// leaves the rest of its own Go runtime alone. The caller must hold
// runtime.LockOSThread (otherwise the goroutine may move off the filtered
// thread) and must have set PR_SET_NO_NEW_PRIVS on this thread.
//
// Nothing after the seccomp syscall allocates or makes another syscall, so
// Load itself cannot trip over the filter it just installed.
func Load(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > maxProgLen {
		return fmt.Errorf("seccomp: program has %d instructions, want 1..%d", len(prog), maxProgLen)
	}
	// Without no_new_privs the kernel answers EACCES (we have no
	// CAP_SYS_ADMIN in the sandbox); say what is actually missing.
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return os.NewSyscallError("prctl(PR_GET_NO_NEW_PRIVS)", err)
	}
	if nnp != 1 {
		return errors.New("seccomp: PR_SET_NO_NEW_PRIVS is not set on this thread")
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// RawSyscall, not Syscall: it skips the scheduler hooks, so nothing in
	// the runtime runs between the filter taking effect and our return.
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		// The filter was not installed, so building an error is safe.
		return os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER)", errno)
	}
	return nil
}
