//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }.
// Argument words are read at their low address, which is the low 32 bits on
// the little-endian architectures supported here.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

const (
	// maxProgLen is the kernel's BPF_MAXINSNS.
	maxProgLen = 4096
	// x32SyscallBit is __X32_SYSCALL_BIT, set in every x32 syscall number.
	x32SyscallBit = 0x40000000
	// maxSkip is the farthest a conditional jump (8-bit jt/jf) can reach.
	maxSkip = 255
)

// arch describes a native architecture: its AUDIT_ARCH_* token, whether it
// also carries x32 syscalls, and its syscall table.
type arch struct {
	name  string
	audit uint32
	x32   bool
	table map[string]uint32
}

// nativeTable returns the native syscall table, or nil when unsupported.
func nativeTable() map[string]uint32 {
	if native == nil {
		return nil
	}
	return native.table
}

// Compile translates p into a classic BPF program for the native
// architecture, ready for Load.
//
// The program first rejects foreign architectures (and, on x86_64, x32
// syscall numbers) with SECCOMP_RET_KILL_PROCESS, then dispatches on the
// syscall number with a balanced binary search over ranges of consecutive
// numbers sharing one rule, so a syscall costs O(log ranges) comparisons.
func (p *Policy) Compile() ([]unix.SockFilter, error) {
	if native == nil {
		return nil, fmt.Errorf("seccomp: no syscall table for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return p.compileFor(native)
}

func (p *Policy) compileFor(a *arch) ([]unix.SockFilter, error) {
	insns, err := p.program(a)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// run is a range of syscall numbers, from start up to the next run's start,
// that all get the same rule.
type run struct {
	start uint32
	rule  Rule
}

func (p *Policy) program(a *arch) ([]bpf.Instruction, error) {
	rules := map[uint32]Rule{}
	names := map[uint32]string{}
	for name, r := range p.Syscalls {
		nr, ok := a.table[name]
		if !ok {
			continue // not a syscall on this architecture
		}
		if other, dup := names[nr]; dup {
			return nil, fmt.Errorf("seccomp: %s and %s are both syscall %d on %s", name, other, nr, a.name)
		}
		for _, c := range r.Checks {
			for _, cond := range c.Conds {
				if err := cond.validate(); err != nil {
					return nil, fmt.Errorf("seccomp: rule for %s: %w", name, err)
				}
			}
		}
		rules[nr], names[nr] = r, name
	}
	tree, err := dispatch(ranges(rules, Rule{Action: p.DefaultAction}))
	if err != nil {
		return nil, err
	}

	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(ActKillProcess)},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if a.x32 {
		// x32 syscalls pass the arch check (same AUDIT_ARCH_X86_64) but use
		// a different numbering, so our table would misjudge them. No
		// x86_64 program makes them by accident, and they have been used
		// to slip past filters, so they kill the process like a foreign
		// architecture does. Number -1 is exempt: it is "no syscall"
		// (ptrace uses it to skip one) and falls through to the default.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32SyscallBit, SkipFalse: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff, SkipTrue: 1},
			bpf.RetConstant{Val: uint32(ActKillProcess)},
		)
	}
	prog = append(prog, tree...)
	if len(prog) > maxProgLen {
		return nil, fmt.Errorf("seccomp: program has %d instructions, limit is %d", len(prog), maxProgLen)
	}
	return prog, nil
}

// ranges partitions the whole 32-bit syscall number space into runs,
// merging neighbours with the same unconditional action (gaps get def).
// Rules with argument checks always stay alone in their run.
func ranges(rules map[uint32]Rule, def Rule) []run {
	nrs := make([]uint32, 0, len(rules))
	for nr := range rules {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)

	var runs []run
	add := func(start uint32, r Rule) {
		if n := len(runs); n > 0 && len(r.Checks) == 0 && len(runs[n-1].rule.Checks) == 0 &&
			runs[n-1].rule.Action == r.Action {
			return
		}
		runs = append(runs, run{start: start, rule: r})
	}
	next, wrapped := uint32(0), false
	for _, nr := range nrs {
		if nr > next {
			add(next, def)
		}
		add(nr, rules[nr])
		next = nr + 1
		wrapped = next == 0
	}
	if len(runs) == 0 || !wrapped {
		add(next, def)
	}
	return runs
}

// dispatch emits a self-contained block that, with the syscall number in A,
// returns the action for it. Every path in the block ends in a return, so
// blocks can be concatenated without fixing up any jump.
func dispatch(runs []run) ([]bpf.Instruction, error) {
	if len(runs) == 1 {
		return leaf(runs[0].rule)
	}
	mid := len(runs) / 2
	lo, err := dispatch(runs[:mid])
	if err != nil {
		return nil, err
	}
	hi, err := dispatch(runs[mid:])
	if err != nil {
		return nil, err
	}
	var out []bpf.Instruction
	if len(lo) <= maxSkip {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: runs[mid].start, SkipTrue: uint8(len(lo))})
	} else {
		// The upper half is out of reach of jt; hop over it with ja,
		// whose offset is 32 bits, at the cost of one more instruction.
		out = append(out,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: runs[mid].start, SkipFalse: 1},
			bpf.Jump{Skip: uint32(len(lo))},
		)
	}
	out = append(out, lo...)
	return append(out, hi...), nil
}

// leaf emits a rule's decision list: each check's conditions in turn, any
// failing condition skipping to the next check, and the rule's own action
// when no check matched.
func leaf(r Rule) ([]bpf.Instruction, error) {
	var out []bpf.Instruction
	for _, c := range r.Checks {
		// Build the check back to front so each condition knows how many
		// instructions it must skip to leave the check.
		tail := []bpf.Instruction{bpf.RetConstant{Val: uint32(c.Action)}}
		for i := len(c.Conds) - 1; i >= 0; i-- {
			if len(tail) > maxSkip {
				return nil, fmt.Errorf("seccomp: check with %d conditions is too long", len(c.Conds))
			}
			tail = append(condCode(c.Conds[i], uint8(len(tail))), tail...)
		}
		out = append(out, tail...)
	}
	return append(out, bpf.RetConstant{Val: uint32(r.Action)}), nil
}

// condCode loads the argument and falls through when c holds, or skips
// miss instructions past the jump when it does not.
func condCode(c Cond, miss uint8) []bpf.Instruction {
	code := []bpf.Instruction{bpf.LoadAbsolute{Off: offArgs + 8*uint32(c.Arg), Size: 4}}
	if c.Op == OpAnySet {
		return append(code, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: c.Value, SkipFalse: miss})
	}
	if c.Mask != 0 {
		code = append(code, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: c.Mask})
	}
	return append(code, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.Value, SkipFalse: miss})
}
