// Package seccomp builds and installs airlock's seccomp-bpf syscall filter.
//
// The filter is an allowlist: every syscall the sandboxed code may make is
// named, a short list of known-dangerous ones is answered with EPERM so that
// tools fail with a clear "Operation not permitted", and anything else
// (including syscalls newer than this table) gets ENOSYS, which libc and
// language runtimes treat as "not implemented here" and fall back from.
//
// A Policy is compiled to a classic BPF program whose syscall dispatch is a
// balanced binary search over ranges of syscall numbers, so the cost of a
// syscall is a handful of comparisons rather than a scan of ~350 entries.
// Load installs the program on the calling thread only; the sandbox launcher
// is expected to do that on a locked OS thread right before execve, so the
// filter applies to the sandboxed program and everything it spawns.
//
// Only linux/amd64 is tested; linux/arm64 has a syscall table but is
// untested, and other architectures get an error from Compile.
package seccomp
