//go:build linux

package seccomp

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func needAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("needs linux/amd64: expected syscall numbers are x86_64's")
	}
}

func compileDefault(t *testing.T) []unix.SockFilter {
	t.Helper()
	prog, err := Default().Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return prog
}

// call builds seccomp_data for an x86_64 syscall.
func call(nr uint32, args ...uint64) seccompData {
	d := seccompData{nr: nr, arch: unix.AUDIT_ARCH_X86_64, ip: 0x401000}
	copy(d.args[:], args)
	return d
}

func TestDefaultProgram(t *testing.T) {
	needAMD64(t)
	prog := compileDefault(t)
	var (
		allow  = ActAllow
		eperm  = ActErrno(unix.EPERM)
		enosys = ActErrno(unix.ENOSYS)
		kill   = ActKillProcess
		hi     = uint64(0xdead_beef) << 32 // garbage in the ignored upper half
	)
	tests := []struct {
		name string
		d    seccompData
		want Action
	}{
		{"read", call(unix.SYS_READ, 0, 0, 0), allow},
		{"write", call(unix.SYS_WRITE, 1), allow},
		{"execve", call(unix.SYS_EXECVE), allow},
		{"openat", call(unix.SYS_OPENAT), allow},
		{"futex", call(unix.SYS_FUTEX), allow},
		{"rseq", call(unix.SYS_RSEQ), allow},
		{"setuid", call(unix.SYS_SETUID), allow},
		{"seccomp", call(unix.SYS_SECCOMP), allow},
		{"syscall 0 (read) is the lowest", call(0), allow},
		{"unknown 1000", call(1000), enosys},
		{"unknown 0x3fffffff", call(0x3fffffff), enosys},
		{"minus one", call(0xffffffff), enosys},
		{"unlisted rseq_slice_yield", call(unix.SYS_RSEQ_SLICE_YIELD), enosys},
		{"ptrace", call(unix.SYS_PTRACE), eperm},
		{"bpf", call(unix.SYS_BPF), eperm},
		{"mount", call(unix.SYS_MOUNT), eperm},
		{"unshare", call(unix.SYS_UNSHARE, unix.CLONE_NEWUSER), eperm},
		{"setns", call(unix.SYS_SETNS), eperm},
		{"keyctl", call(unix.SYS_KEYCTL), eperm},
		{"io_uring_setup", call(unix.SYS_IO_URING_SETUP), eperm},
		{"open_by_handle_at", call(unix.SYS_OPEN_BY_HANDLE_AT), eperm},
		{"landlock_create_ruleset", call(unix.SYS_LANDLOCK_CREATE_RULESET), eperm},
		{"memfd_secret", call(unix.SYS_MEMFD_SECRET), eperm},
		{"clone NEWUSER", call(unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone NEWNET", call(unix.SYS_CLONE, unix.CLONE_NEWNET), eperm},
		{"clone NEWNS high garbage", call(unix.SYS_CLONE, hi|unix.CLONE_NEWNS), eperm},
		{"clone thread", call(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|
			unix.CLONE_SIGHAND|unix.CLONE_THREAD|unix.CLONE_SYSVSEM|unix.CLONE_SETTLS|
			unix.CLONE_PARENT_SETTID|unix.CLONE_CHILD_CLEARTID), allow},
		{"clone fork", call(unix.SYS_CLONE, uint64(unix.SIGCHLD)), allow},
		{"clone vfork high garbage", call(unix.SYS_CLONE, hi|unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)), allow},
		{"clone3", call(unix.SYS_CLONE3), enosys},
		{"socket AF_PACKET", call(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW), eperm},
		{"socket AF_NETLINK", call(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_DGRAM), eperm},
		{"socket AF_VSOCK", call(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM), eperm},
		{"socket AF_INET raw", call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), eperm},
		{"socket AF_INET6 raw cloexec", call(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC), eperm},
		{"socket AF_INET SOCK_PACKET", call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_PACKET), eperm},
		{"socket AF_INET stream cloexec", call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC), allow},
		{"socket AF_INET6 dgram nonblock", call(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK), allow},
		{"socket AF_UNIX raw-looking type", call(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_RAW), allow},
		{"socket AF_UNIX stream", call(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM), allow},
		{"socketpair AF_UNIX", call(unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM), allow},
		{"socketpair AF_INET", call(unix.SYS_SOCKETPAIR, unix.AF_INET, unix.SOCK_STREAM), eperm},
		{"ioctl TIOCSTI", call(unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm},
		{"ioctl TIOCSTI high garbage", call(unix.SYS_IOCTL, 0, hi|unix.TIOCSTI), eperm},
		{"ioctl TIOCLINUX", call(unix.SYS_IOCTL, 0, unix.TIOCLINUX), eperm},
		{"ioctl TCGETS", call(unix.SYS_IOCTL, 0, unix.TCGETS), allow},
		{"ioctl FIONREAD (TIOCINQ)", call(unix.SYS_IOCTL, 3, unix.TIOCINQ), allow},
		{"personality query", call(unix.SYS_PERSONALITY, 0xffffffff), allow},
		{"personality PER_LINUX", call(unix.SYS_PERSONALITY, 0), allow},
		{"personality ADDR_NO_RANDOMIZE", call(unix.SYS_PERSONALITY, 0x0040000), eperm},
		{"i386 arch", seccompData{nr: unix.SYS_READ, arch: unix.AUDIT_ARCH_I386}, kill},
		{"aarch64 arch", seccompData{nr: unix.SYS_READ, arch: unix.AUDIT_ARCH_AARCH64}, kill},
		{"x32 read", call(x32SyscallBit | unix.SYS_READ), kill},
		{"x32 execve", call(x32SyscallBit | 520), kill},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := interpret(prog, tc.d)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("interpret = %v, want %v", got, tc.want)
			}
			if vm := vmRun(t, prog, tc.d); vm != tc.want {
				t.Errorf("x/net/bpf VM = %v, want %v", vm, tc.want)
			}
			if ref := reference(Default(), native, tc.d); ref != tc.want {
				t.Errorf("reference = %v, want %v (test table disagrees with policy)", ref, tc.want)
			}
		})
	}
}

// argSamples are argument words that exercise every rule in Default.
var argSamples = [][]uint64{
	{},
	{unix.AF_UNIX, unix.SOCK_STREAM},
	{unix.AF_INET, unix.SOCK_RAW | unix.SOCK_NONBLOCK},
	{unix.AF_INET6, unix.SOCK_PACKET},
	{unix.AF_INET6, unix.SOCK_STREAM},
	{unix.AF_PACKET, unix.SOCK_DGRAM},
	{unix.CLONE_NEWPID | uint64(unix.SIGCHLD), unix.TIOCSTI},
	{unix.CLONE_NEWTIME, unix.TIOCLINUX},
	{0x20008, unix.TCGETS},
	{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
}

// TestMatchesReference sweeps every syscall number around the table (and
// some far away) with sample arguments, comparing the compiled program to
// the policy's direct meaning. This is what proves the search tree right.
func TestMatchesReference(t *testing.T) {
	needAMD64(t)
	checkAgainstReference(t, Default())
}

// TestTrampolines forces ja trampolines: alternating actions stop ranges
// from merging, so the tree's lower halves outgrow an 8-bit jump.
func TestTrampolines(t *testing.T) {
	needAMD64(t)
	p := &Policy{DefaultAction: ActErrno(unix.ENOSYS), Syscalls: map[string]Rule{}}
	for name, nr := range native.table {
		if nr%2 == 0 {
			p.Syscalls[name] = Rule{Action: ActAllow}
		} else {
			p.Syscalls[name] = Rule{Action: ActErrno(unix.EPERM)}
		}
	}
	prog := checkAgainstReference(t, p)
	ja := 0
	for _, in := range prog {
		if in.Code == opJa {
			ja++
		}
	}
	if ja == 0 {
		t.Fatalf("expected ja trampolines in a %d-instruction program", len(prog))
	}
	t.Logf("alternating policy: %d instructions, %d trampolines, worst-case path %d", len(prog), ja, longestPath(prog))
}

func checkAgainstReference(t *testing.T, p *Policy) []unix.SockFilter {
	t.Helper()
	prog, err := p.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	nrs := []uint32{0x40000000 - 1, 0x7fffffff, 0x80000000, 0xbfffffff, 0xfffffffe, 0xffffffff}
	for nr := uint32(0); nr < 1100; nr++ {
		nrs = append(nrs, nr, x32SyscallBit|nr)
	}
	for _, nr := range nrs {
		for _, args := range argSamples {
			d := call(nr, args...)
			got, err := interpret(prog, d)
			if err != nil {
				t.Fatalf("nr %d: %v", nr, err)
			}
			if want := reference(p, native, d); got != want {
				t.Fatalf("nr %d args %#x: program says %v, policy says %v", nr, args, got, want)
			}
		}
	}
	return prog
}

func TestProgramSize(t *testing.T) {
	needAMD64(t)
	prog := compileDefault(t)
	if len(prog) > maxProgLen {
		t.Fatalf("program has %d instructions, kernel limit is %d", len(prog), maxProgLen)
	}
	worst := longestPath(prog)
	t.Logf("Default(): %d syscalls named, %d instructions, worst-case path %d instructions",
		len(Default().Syscalls), len(prog), worst)
	// A linear scan would be ~350; a balanced tree over ~100 ranges plus
	// the prologue and the socket rule stays far below that.
	if worst > 32 {
		t.Errorf("worst-case path %d instructions; the dispatch is not logarithmic", worst)
	}
}

func TestCompileRejectsBadRules(t *testing.T) {
	needAMD64(t)
	p := &Policy{DefaultAction: ActAllow, Syscalls: map[string]Rule{
		"ioctl": {Checks: []Check{{Conds: []Cond{{Arg: 6}}, Action: ActAllow}}},
	}}
	if _, err := p.Compile(); err == nil {
		t.Fatal("Compile accepted argument index 6")
	}
	empty := &Policy{DefaultAction: ActErrno(unix.ENOSYS)}
	prog, err := empty.Compile()
	if err != nil {
		t.Fatalf("empty policy: %v", err)
	}
	if got, _ := interpret(prog, call(unix.SYS_READ)); got != ActErrno(unix.ENOSYS) {
		t.Fatalf("empty policy answered read with %v", got)
	}
}

func TestPolicyNames(t *testing.T) {
	needAMD64(t)
	p := Default()
	notOnAMD64 := []string{"vm86", "vm86old"}
	for name := range p.Syscalls {
		if _, ok := native.table[name]; !ok && !slices.Contains(notOnAMD64, name) {
			t.Errorf("policy names %q, which is not an x86_64 syscall (typo?)", name)
		}
	}
	// Every x86_64 syscall must be a decision, not an accident: either
	// classified in Default or knowingly left to the ENOSYS default.
	unlisted := []string{"ustat", "sysfs", "getpmsg", "putpmsg", "uretprobe", "uprobe",
		"lsm_get_self_attr", "lsm_list_modules", "rseq_slice_yield"}
	for name := range native.table {
		if _, ok := p.Syscalls[name]; !ok && !slices.Contains(unlisted, name) {
			t.Errorf("x86_64 syscall %q is not classified in Default", name)
		}
	}
	// The product contract's EPERM list, spelled out so a policy edit that
	// drops one fails here rather than in a security review.
	contract := strings.Fields(`ptrace process_vm_readv process_vm_writev bpf
		perf_event_open userfaultfd keyctl add_key request_key io_uring_setup
		io_uring_enter io_uring_register fsopen fsconfig fsmount fspick open_tree
		move_mount mount umount2 pivot_root chroot unshare setns open_by_handle_at
		name_to_handle_at modify_ldt kexec_load kexec_file_load init_module
		finit_module delete_module swapon swapoff reboot syslog acct settimeofday
		clock_settime clock_adjtime adjtimex lookup_dcookie quotactl quotactl_fd
		nfsservctl vhangup iopl ioperm mount_setattr uselib _sysctl kcmp
		pidfd_getfd process_madvise move_pages migrate_pages mbind set_mempolicy
		fanotify_init open_tree_attr lsm_set_self_attr vm86 vm86old create_module
		get_kernel_syms query_module afs_syscall tuxcall security vserver listmount
		statmount landlock_create_ruleset landlock_add_rule landlock_restrict_self
		memfd_secret`)
	for _, name := range contract {
		if r, ok := p.Syscalls[name]; !ok || len(r.Checks) != 0 || r.Action != ActErrno(unix.EPERM) {
			t.Errorf("%s is not an unconditional EPERM in Default", name)
		}
	}
	if n := len(p.Syscalls); n < 300 {
		t.Errorf("Default names only %d syscalls", n)
	}
}

func TestBlocked(t *testing.T) {
	b := Blocked()
	if !slices.IsSorted(b) {
		t.Error("Blocked() is not sorted")
	}
	for _, want := range []string{"ptrace", "bpf", "mount", "unshare", "setns", "keyctl", "io_uring_setup"} {
		if !slices.Contains(b, want) {
			t.Errorf("Blocked() lacks %s", want)
		}
	}
	p := Default()
	for _, name := range b {
		r := p.Syscalls[name]
		if len(r.Checks) != 0 || r.Action != ActErrno(unix.EPERM) {
			t.Errorf("Blocked() lists %s, but Default answers it with %v", name, r.Action)
		}
	}
	if runtime.GOARCH == "amd64" && slices.Contains(b, "vm86") {
		t.Error("Blocked() lists vm86, which x86_64 does not have")
	}
}
