//go:build linux

package seccomp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/airlockrun/airlock/internal/testutil"
	"golang.org/x/sys/unix"
)

// helperEnv selects what the re-executed test binary does.
const helperEnv = "AIRLOCK_SECCOMP_HELPER"

// shellProbe runs after the helper has exec'd /bin/sh under the filter: it
// shows the filter survives exec, and that glibc programs which try clone3
// first (posix_spawn in awk's system(), pthread_create in sort) fall back.
const shellProbe = `/bin/true && echo true=ok
unshare -U true 2>/dev/null; echo unshare_cmd=$?
awk 'BEGIN { system("echo awk_system=ok") }'
seq 1 200000 | sort -n --parallel=2 -S 50M | tail -n 1 | sed 's/^/sort_threads=/'
sed -n 's/^Seccomp:[[:space:]]*/seccomp_mode=/p' /proc/self/status
`

func needKernel(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("needs linux/amd64 to run the filter in the kernel")
	}
	testutil.RequiresRoot(t, "the checks are only meaningful where the syscalls would otherwise succeed")
}

// runHelper re-executes this test binary in helper mode and returns its
// combined output and exit error.
func runHelper(t *testing.T, mode string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperSeccompChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("helper %s timed out; output:\n%s", mode, out)
	}
	return string(out), err
}

func TestKernelFilter(t *testing.T) {
	needKernel(t)
	out, err := runHelper(t, "probe")
	if err != nil {
		t.Fatalf("helper failed: %v; output:\n%s", err, out)
	}
	got := parseProbe(out)
	want := map[string]string{
		"unshare":            "EPERM",
		"clone_newuser":      "EPERM",
		"mount":              "EPERM",
		"umount2":            "EPERM",
		"ptrace_traceme":     "EPERM",
		"keyctl":             "EPERM",
		"bpf":                "EPERM",
		"io_uring_setup":     "EPERM",
		"setns":              "EPERM",
		"socket_packet":      "EPERM",
		"socket_inet_raw":    "EPERM",
		"socket_netlink":     "EPERM",
		"socket_inet_stream": "ok",
		"socketpair_unix":    "ok",
		"ioctl_tiocsti":      "EPERM",
		"ioctl_tcgets":       "ENOTTY", // allowed: the kernel itself answered
		"personality_query":  "ok",
		"personality_norand": "EPERM",
		"clone3":             "ENOSYS",
		"syscall_1000":       "ENOSYS",
		"getpid":             "ok",
		"true":               "ok",
		"unshare_cmd":        "1",
		"awk_system":         "ok",
		"sort_threads":       "200000",
		"seccomp_mode":       "2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("helper output:\n%s", out)
	}
}

// TestKernelControl runs the same probes without the filter, proving each
// one would come out differently if the filter did not catch it (as root
// on this kernel), so TestKernelFilter cannot pass vacuously.
func TestKernelControl(t *testing.T) {
	needKernel(t)
	out, err := runHelper(t, "control")
	if err != nil {
		t.Fatalf("helper failed: %v; output:\n%s", err, out)
	}
	got := parseProbe(out)
	for _, k := range []string{"unshare", "clone_newuser", "mount", "umount2", "keyctl", "bpf",
		"setns", "socket_packet", "socket_inet_raw", "socket_netlink", "ioctl_tiocsti",
		"personality_norand", "clone3"} {
		v, ok := got[k]
		if !ok || v == "EPERM" || (k == "clone3" && v == "ENOSYS") {
			t.Errorf("unfiltered %s = %q: the probe does not tell the filter's answer apart", k, v)
		}
	}
	t.Logf("unfiltered: %v", got)
}

func parseProbe(out string) map[string]string {
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			got[k] = v
		}
	}
	return got
}

func TestKernelKillsX32(t *testing.T) {
	needKernel(t)
	out, err := runHelper(t, "x32")
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper was not killed (err %v); output:\n%s", err, out)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("helper ended with %v, want death by SIGSYS; output:\n%s", err, out)
	}
}

// TestHelperSeccompChild is not a test: it is the child process body for
// the kernel tests, selected by helperEnv, and does nothing otherwise.
func TestHelperSeccompChild(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	// Everything below must happen on the one filtered thread.
	runtime.LockOSThread()
	fail := func(format string, args ...any) {
		fmt.Printf("helper error: "+format+"\n", args...)
		os.Exit(2)
	}
	prog, err := Default().Compile()
	if err != nil {
		fail("compile: %v", err)
	}
	// No core file when the x32 probe is killed.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		fail("setrlimit: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail("no_new_privs: %v", err)
	}
	if mode == "control" {
		probeSyscalls(false)
		os.Exit(0)
	}
	if err := Load(prog); err != nil {
		fail("load: %v", err)
	}

	if mode == "x32" {
		_, _, _ = unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0) // the filter kills: no answer to read
		fmt.Println("x32=survived")
		os.Exit(0)
	}
	probeSyscalls(true)
	os.Stdout.Sync()
	err = syscall.Exec("/bin/sh", []string{"sh", "-c", shellProbe}, os.Environ())
	fail("exec /bin/sh: %v", err)
}

// probeSyscalls makes each syscall in a form that is harmless, or fails
// differently, if the filter lets it through, and prints name=ERRNO.
func probeSyscalls(filtered bool) {
	report := func(name string, errno unix.Errno) {
		if errno == 0 {
			fmt.Printf("%s=ok\n", name)
		} else {
			fmt.Printf("%s=%s\n", name, unix.ErrnoName(errno))
		}
	}
	raw := func(nr uintptr, args ...uintptr) (uintptr, unix.Errno) {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return r, e
	}
	sock := func(name string, nr uintptr, args ...uintptr) {
		fd, e := raw(nr, args...)
		if e == 0 && nr == unix.SYS_SOCKET {
			unix.Close(int(fd))
		}
		report(name, e)
	}
	// Pointer arguments are converted inside the RawSyscall6 call
	// expression itself, the only form in which the Go runtime keeps the
	// pointee alive and in place for the duration of the call.
	none, _ := unix.BytePtrFromString("none")
	tmpfs, _ := unix.BytePtrFromString("tmpfs")
	noSuchDir, _ := unix.BytePtrFromString("/nonexistent-airlock-seccomp-test")

	_, _, e := unix.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(none)),
		uintptr(unsafe.Pointer(noSuchDir)), uintptr(unsafe.Pointer(tmpfs)), 0, 0, 0)
	report("mount", e)
	_, _, e = unix.RawSyscall(unix.SYS_UMOUNT2, uintptr(unsafe.Pointer(noSuchDir)), 0, 0)
	report("umount2", e)
	if filtered {
		// Unfiltered, this would make the parent our tracer.
		_, e = raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME)
		report("ptrace_traceme", e)
	}
	sessionKeyring := -3 // KEY_SPEC_SESSION_KEYRING
	_, e = raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(sessionKeyring), 0)
	report("keyctl", e)
	_, e = raw(unix.SYS_BPF, 0xffff, 0, 0)
	report("bpf", e)
	_, e = raw(unix.SYS_IO_URING_SETUP, 0, 0)
	report("io_uring_setup", e)
	badFD := -1
	_, e = raw(unix.SYS_SETNS, uintptr(badFD), 0)
	report("setns", e)

	sock("socket_packet", unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0x0300) // htons(ETH_P_ALL)
	sock("socket_inet_raw", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	sock("socket_netlink", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	sock("socket_inet_stream", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	var pair [2]int32
	_, _, e = unix.RawSyscall6(unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0,
		uintptr(unsafe.Pointer(&pair)), 0, 0)
	if e == 0 {
		unix.Close(int(pair[0]))
		unix.Close(int(pair[1]))
	}
	report("socketpair_unix", e)

	c := byte('x')
	_, _, e = unix.RawSyscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	report("ioctl_tiocsti", e)
	var tio unix.Termios
	_, _, e = unix.RawSyscall(unix.SYS_IOCTL, 1, unix.TCGETS, uintptr(unsafe.Pointer(&tio)))
	report("ioctl_tcgets", e)
	_, e = raw(unix.SYS_PERSONALITY, 0xffffffff)
	report("personality_query", e)
	_, e = raw(unix.SYS_PERSONALITY, 0x0040000) // ADDR_NO_RANDOMIZE
	report("personality_norand", e)
	_, e = raw(unix.SYS_CLONE3, 0, 0)
	report("clone3", e)
	_, e = raw(1000)
	report("syscall_1000", e)
	pid, e := raw(unix.SYS_GETPID)
	if e == 0 && int(pid) != os.Getpid() {
		fmt.Printf("getpid=returned %d, want %d\n", pid, os.Getpid())
	} else {
		report("getpid", e)
	}
	// Last, because an unfiltered unshare drops our capabilities.
	// CLONE_NEWUSER|CLONE_FS is invalid, so an unfiltered kernel says EINVAL
	// instead of forking this Go process.
	_, e = raw(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS)
	report("clone_newuser", e)
	_, e = raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	report("unshare", e)
}
