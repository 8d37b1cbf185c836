//go:build linux && !amd64 && !arm64

package seccomp

// native is nil on architectures airlock has no syscall table for, which
// makes Compile fail instead of emitting a filter with wrong numbers.
var native *arch
