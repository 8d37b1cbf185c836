//go:build linux

package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Action is a seccomp filter return value (SECCOMP_RET_*), i.e. what the
// kernel does with a syscall.
type Action uint32

const (
	// ActAllow lets the syscall run.
	ActAllow Action = unix.SECCOMP_RET_ALLOW
	// ActKillProcess kills the whole process with SIGSYS. It is reserved for
	// syscalls that no legitimate program of the native ABI makes (foreign
	// architectures, x32), where failing loudly is better than guessing.
	ActKillProcess Action = unix.SECCOMP_RET_KILL_PROCESS
)

// ActErrno fails the syscall with errno e without running it.
func ActErrno(e unix.Errno) Action {
	return Action(unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA)
}

// String renders the action for test failures and debugging.
func (a Action) String() string {
	switch {
	case a == ActAllow:
		return "ALLOW"
	case a == ActKillProcess:
		return "KILL_PROCESS"
	case uint32(a)&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		e := unix.Errno(uint32(a) & unix.SECCOMP_RET_DATA)
		if name := unix.ErrnoName(e); name != "" {
			return "ERRNO(" + name + ")"
		}
		return fmt.Sprintf("ERRNO(%d)", uint32(e))
	default:
		return fmt.Sprintf("Action(%#x)", uint32(a))
	}
}

// Op is the comparison a Cond performs.
type Op uint8

const (
	// OpEqual holds when (arg & Mask) == Value; a zero Mask compares the
	// whole 32-bit word.
	OpEqual Op = iota
	// OpAnySet holds when arg & Value != 0 (Mask is ignored).
	OpAnySet
)

// Cond tests the low 32 bits of one syscall argument.
//
// Only the low half is ever examined: every argument airlock filters on is
// an int or unsigned int in the kernel's syscall prototype (socket domain and
// type, ioctl request, personality), or is explicitly truncated to 32 bits by
// the kernel before use (legacy clone flags, see Default), so the upper half
// cannot change what the kernel does and testing it would only reject calls
// the kernel treats identically.
type Cond struct {
	Arg   uint8 // argument index, 0..5
	Op    Op
	Mask  uint32
	Value uint32
}

// Check is one step of a Rule: when all Conds hold, the syscall gets Action.
type Check struct {
	Conds  []Cond
	Action Action
}

// Rule decides one syscall. Checks are tried in order and the first whose
// conditions all hold wins; if none does (or there are none), Action applies.
type Rule struct {
	Checks []Check
	Action Action
}

// Policy is a seccomp allowlist: a Rule per syscall name, and a default for
// every syscall it does not name.
type Policy struct {
	// DefaultAction answers syscalls not named in Syscalls, including
	// numbers the kernel does not know.
	DefaultAction Action
	// Syscalls maps a kernel syscall name (as in the Linux syscall tables,
	// e.g. "newfstatat") to its rule. Names that do not exist on the native
	// architecture are skipped, so one policy serves every architecture.
	Syscalls map[string]Rule
}

// set records the same unconditional action for each name, and panics on a
// name listed twice because that is a bug in the policy table, not input.
func (p *Policy) set(a Action, names ...string) {
	for _, n := range names {
		p.setRule(n, Rule{Action: a})
	}
}

func (p *Policy) setRule(name string, r Rule) {
	if _, dup := p.Syscalls[name]; dup {
		panic("seccomp: syscall listed twice in policy: " + name)
	}
	p.Syscalls[name] = r
}

func (c Cond) validate() error {
	if c.Arg > 5 {
		return fmt.Errorf("argument index %d out of range", c.Arg)
	}
	if c.Op != OpEqual && c.Op != OpAnySet {
		return fmt.Errorf("unknown op %d", c.Op)
	}
	return nil
}
