//go:build linux

package seccomp

import (
	"slices"

	"golang.org/x/sys/unix"
)

var (
	allow  = ActAllow
	eperm  = ActErrno(unix.EPERM)
	enosys = ActErrno(unix.ENOSYS)
)

// allowed is the plain allowlist. It starts from Docker's default profile
// (minus the calls listed in denied) and adds the newer calls glibc, Go,
// Python and Node use. Only names of the 64-bit ABIs airlock supports are
// listed; 32-bit compat names such as chown32 would never match.
var allowed = []string{
	// Files, directories and metadata.
	"read", "write", "open", "openat", "openat2", "close", "close_range",
	"creat", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs",
	"fstatfs", "lseek", "pread64", "pwrite64", "readv", "writev", "preadv",
	"pwritev", "preadv2", "pwritev2", "access", "faccessat", "faccessat2",
	"dup", "dup2", "dup3", "fcntl", "flock", "fsync", "fdatasync", "sync",
	"syncfs", "sync_file_range", "truncate", "ftruncate", "fallocate",
	"fadvise64", "readahead", "getdents", "getdents64", "getcwd", "chdir",
	"fchdir", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
	"rmdir", "link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat",
	"readlink", "readlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2",
	"chown", "fchown", "lchown", "fchownat", "umask", "mknod", "mknodat",
	"utime", "utimes", "futimesat", "utimensat", "setxattr", "lsetxattr",
	"fsetxattr", "setxattrat", "getxattr", "lgetxattr", "fgetxattr",
	"getxattrat", "listxattr", "llistxattr", "flistxattr", "listxattrat",
	"removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"file_getattr", "file_setattr", "copy_file_range", "sendfile", "splice",
	"tee", "vmsplice", "cachestat", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch", "fanotify_mark",

	// Memory.
	"brk", "mmap", "munmap", "mremap", "mprotect", "msync", "mincore",
	"madvise", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
	"remap_file_pages", "membarrier", "memfd_create", "pkey_mprotect",
	"pkey_alloc", "pkey_free", "map_shadow_stack", "mseal", "get_mempolicy",

	// Processes, threads and scheduling. clone and clone3 have rules.
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4",
	"waitid", "getpid", "getppid", "gettid", "getpgid", "setpgid",
	"getpgrp", "getsid", "setsid", "set_tid_address", "set_robust_list",
	"get_robust_list", "rseq", "arch_prctl", "prctl", "set_thread_area",
	"get_thread_area", "futex", "futex_waitv", "futex_wake", "futex_wait",
	"futex_requeue", "sched_yield", "sched_setparam", "sched_getparam",
	"sched_setscheduler", "sched_getscheduler", "sched_get_priority_max",
	"sched_get_priority_min", "sched_rr_get_interval", "sched_setaffinity",
	"sched_getaffinity", "sched_setattr", "sched_getattr", "getcpu",
	"getpriority", "setpriority", "ioprio_get", "ioprio_set", "getrlimit",
	"setrlimit", "prlimit64", "getrusage", "times", "pidfd_open",
	"pidfd_send_signal", "process_mrelease", "seccomp", "restart_syscall",

	// Credentials. Changing ids is harmless without capabilities and under
	// no_new_privs, and tools probe these and expect a normal error.
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
	"getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
	"setresgid", "setfsuid", "setfsgid", "setgroups", "capget", "capset",

	// Signals.
	"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask",
	"rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo",
	"rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "pause",
	"signalfd", "signalfd4",

	// Time and timers (reading and sleeping only; setting the clock is denied).
	"time", "gettimeofday", "clock_gettime", "clock_getres", "nanosleep",
	"clock_nanosleep", "alarm", "getitimer", "setitimer", "timer_create",
	"timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
	"timerfd_create", "timerfd_settime", "timerfd_gettime",

	// Polling, events and plain (non io_uring) AIO.
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"epoll_ctl_old", "epoll_wait_old", "eventfd", "eventfd2", "pipe",
	"pipe2", "io_setup", "io_destroy", "io_submit", "io_cancel",
	"io_getevents", "io_pgetevents",

	// Sockets. socket and socketpair have rules.
	"connect", "accept", "accept4", "bind", "listen", "shutdown",
	"getsockname", "getpeername", "setsockopt", "getsockopt", "sendto",
	"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",

	// System V and POSIX IPC (namespaced per sandbox).
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
	"semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open",
	"mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
	"mq_getsetattr",

	// System information.
	"uname", "sysinfo", "getrandom",
}

// denied get EPERM: they are known and dangerous (kernel attack surface,
// escaping or inspecting other processes, host-global state), and a clear
// "Operation not permitted" tells tools and people the sandbox said no
// rather than that the kernel lacks the feature.
var denied = []string{
	// Debugging and reading other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"process_madvise", "perf_event_open", "lookup_dcookie",
	// Large kernel attack surface.
	"bpf", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "keyctl", "add_key", "request_key",
	// Mounts, namespaces and filesystem views.
	"mount", "umount2", "mount_setattr", "pivot_root", "chroot", "fsopen",
	"fsconfig", "fsmount", "fspick", "open_tree", "open_tree_attr",
	"move_mount", "listmount", "statmount", "listns", "unshare", "setns",
	"open_by_handle_at", "name_to_handle_at", "fanotify_init", "quotactl",
	"quotactl_fd", "nfsservctl",
	// Host-global state: modules, kexec, swap, power, logs, clocks, names.
	"init_module", "finit_module", "delete_module", "create_module",
	"get_kernel_syms", "query_module", "kexec_load", "kexec_file_load",
	"swapon", "swapoff", "reboot", "syslog", "acct", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "vhangup", "sethostname",
	"setdomainname",
	// Hardware and legacy-ABI access.
	"iopl", "ioperm", "modify_ldt", "vm86", "vm86old", "uselib", "_sysctl",
	// NUMA placement (Docker gates these on CAP_SYS_NICE).
	"mbind", "set_mempolicy", "set_mempolicy_home_node", "move_pages",
	"migrate_pages",
	// Self-restriction and LSM state: the sandbox already confines us.
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"lsm_set_self_attr", "memfd_secret",
	// Reserved or never implemented in mainline.
	"afs_syscall", "tuxcall", "security", "vserver",
}

// Syscalls this policy deliberately leaves to the default (ENOSYS): ustat,
// sysfs, getpmsg, putpmsg (obsolete or unimplemented), uretprobe and uprobe
// (kernel trampolines that current kernels let through seccomp anyway),
// lsm_get_self_attr, lsm_list_modules and rseq_slice_yield (new, unused by
// common runtimes; ENOSYS makes callers fall back).

// clone flags that create namespaces. CLONE_NEWTIME (0x80) sits in the
// CSIGNAL byte of legacy clone, where the kernel reads it as the exit signal,
// so it cannot actually request a time namespace there; keeping it in the
// mask only rejects exit signals >= 128, which are not valid signals.
const cloneNSFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// sockTypeMask is the kernel's SOCK_TYPE_MASK: the type without the
// SOCK_NONBLOCK and SOCK_CLOEXEC flag bits.
const sockTypeMask = 0xf

// Default returns airlock's process-level policy: the allowlist above,
// EPERM for the denied list, argument rules for clone, socket, socketpair,
// ioctl and personality, ENOSYS for clone3 and for everything unknown.
func Default() *Policy {
	p := &Policy{DefaultAction: enosys, Syscalls: map[string]Rule{}}
	p.set(allow, allowed...)
	p.set(eperm, denied...)

	// clone3 hides its flags behind a pointer seccomp cannot read, so it
	// always claims to be missing; glibc and others then fall back to
	// clone, whose flags are a register we can inspect.
	p.setRule("clone3", Rule{Action: enosys})

	// Legacy clone's flags are an unsigned long, but the kernel only uses
	// lower_32_bits(flags), so testing the low word is exact.
	p.setRule("clone", Rule{
		Checks: []Check{{Conds: []Cond{{Arg: 0, Op: OpAnySet, Value: cloneNSFlags}}, Action: eperm}},
		Action: allow,
	})

	// Only local and IP sockets: no netlink, packet, vsock, bluetooth, etc.
	// Raw IP sockets are refused, and so is (AF_INET, SOCK_PACKET), which
	// the kernel silently turns into an AF_PACKET socket. Once AF_UNIX (any
	// type) is out of the way, a raw or packet type is refused whatever the
	// domain, since every other domain is refused anyway; testing the type
	// before the domain keeps the rule short.
	p.setRule("socket", Rule{
		Checks: []Check{
			{Conds: []Cond{{Arg: 0, Value: unix.AF_UNIX}}, Action: allow},
			{Conds: []Cond{{Arg: 1, Mask: sockTypeMask, Value: unix.SOCK_RAW}}, Action: eperm},
			{Conds: []Cond{{Arg: 1, Mask: sockTypeMask, Value: unix.SOCK_PACKET}}, Action: eperm},
			{Conds: []Cond{{Arg: 0, Value: unix.AF_INET}}, Action: allow},
			{Conds: []Cond{{Arg: 0, Value: unix.AF_INET6}}, Action: allow},
		},
		Action: eperm,
	})
	p.setRule("socketpair", Rule{
		Checks: []Check{{Conds: []Cond{{Arg: 0, Value: unix.AF_UNIX}}, Action: allow}},
		Action: eperm,
	})

	// TIOCSTI and TIOCLINUX can push keystrokes into a terminal shared with
	// a more privileged process. The request is an unsigned int.
	p.setRule("ioctl", Rule{
		Checks: []Check{
			{Conds: []Cond{{Arg: 1, Value: unix.TIOCSTI}}, Action: eperm},
			{Conds: []Cond{{Arg: 1, Value: unix.TIOCLINUX}}, Action: eperm},
		},
		Action: allow,
	})

	// Docker's personality rule: PER_LINUX, PER_LINUX32, UNAME26,
	// PER_LINUX32|UNAME26 and the 0xffffffff query. Others (for example
	// ADDR_NO_RANDOMIZE) would weaken the process, so they get EPERM.
	var pers []Check
	for _, v := range []uint32{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff} {
		pers = append(pers, Check{Conds: []Cond{{Arg: 0, Value: v}}, Action: allow})
	}
	p.setRule("personality", Rule{Checks: pers, Action: eperm})
	return p
}

// Blocked returns, sorted, the syscalls that Default answers with EPERM
// unconditionally, limited to those that exist on the native architecture
// when it is supported. clone, socket, socketpair, ioctl and personality are
// not included: they are refused only for some arguments.
func Blocked() []string {
	tab := nativeTable()
	var out []string
	for _, n := range denied {
		if tab != nil {
			if _, ok := tab[n]; !ok {
				continue
			}
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
