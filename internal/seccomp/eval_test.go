//go:build linux

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seccompData mirrors struct seccomp_data as the kernel hands it to a filter.
type seccompData struct {
	nr   uint32
	arch uint32
	ip   uint64
	args [6]uint64
}

// bytes lays d out natively, exactly as the kernel does.
func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.NativeEndian.PutUint32(b[0:], d.nr)
	binary.NativeEndian.PutUint32(b[4:], d.arch)
	binary.NativeEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// Opcodes of the classic BPF subset Compile emits.
const (
	opLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	opAndK   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	opJa     = unix.BPF_JMP | unix.BPF_JA
	opJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	opJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	opJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	opRetK   = unix.BPF_RET | unix.BPF_K
)

// interpret runs prog on d the way the kernel would. It deliberately knows
// only the instructions Compile should produce, so anything else is a bug.
func interpret(prog []unix.SockFilter, d seccompData) (Action, error) {
	buf := d.bytes()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case opLdAbsW:
			if in.K%4 != 0 || in.K+4 > uint32(len(buf)) {
				return 0, fmt.Errorf("pc %d: bad load offset %d", pc, in.K)
			}
			a = binary.NativeEndian.Uint32(buf[in.K:])
		case opAndK:
			a &= in.K
		case opJa:
			pc += int(in.K)
		case opJeqK, opJgeK, opJsetK:
			var taken bool
			switch in.Code {
			case opJeqK:
				taken = a == in.K
			case opJgeK:
				taken = a >= in.K
			default:
				taken = a&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case opRetK:
			return Action(in.K), nil
		default:
			return 0, fmt.Errorf("pc %d: unexpected opcode %#x", pc, in.Code)
		}
	}
	return 0, fmt.Errorf("fell off the end of the program")
}

// vmRun runs prog in golang.org/x/net/bpf's VM as an independent check of
// interpret. The VM loads big-endian, so each word is stored big-endian
// holding the value a native load would see.
func vmRun(t *testing.T, prog []unix.SockFilter, d seccompData) Action {
	t.Helper()
	native := d.bytes()
	be := make([]byte, len(native))
	for off := 0; off < len(native); off += 4 {
		binary.BigEndian.PutUint32(be[off:], binary.NativeEndian.Uint32(native[off:]))
	}
	insns := make([]bpf.Instruction, len(prog))
	for i, f := range prog {
		insns[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble()
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v", err)
	}
	out, err := vm.Run(be)
	if err != nil {
		t.Fatalf("vm.Run: %v", err)
	}
	return Action(uint32(out))
}

// longestPath returns the most instructions any single evaluation executes.
// All jumps go forward, so a backwards pass over the program suffices.
func longestPath(prog []unix.SockFilter) int {
	n := len(prog)
	cost := make([]int, n+1)
	at := func(i int) int {
		if i >= n {
			return 0
		}
		return cost[i]
	}
	for pc := n - 1; pc >= 0; pc-- {
		in := prog[pc]
		switch in.Code {
		case opRetK:
			cost[pc] = 1
		case opJa:
			cost[pc] = 1 + at(pc+1+int(in.K))
		case opJeqK, opJgeK, opJsetK:
			cost[pc] = 1 + max(at(pc+1+int(in.Jt)), at(pc+1+int(in.Jf)))
		default:
			cost[pc] = 1 + at(pc+1)
		}
	}
	return cost[0]
}

// reference evaluates p directly from its Go description: the meaning the
// compiled program must have.
func reference(p *Policy, a *arch, d seccompData) Action {
	if d.arch != a.audit {
		return ActKillProcess
	}
	if a.x32 && d.nr&x32SyscallBit != 0 && d.nr != 0xffffffff {
		return ActKillProcess
	}
	for name, r := range p.Syscalls {
		if nr, ok := a.table[name]; !ok || nr != d.nr {
			continue
		}
	checks:
		for _, c := range r.Checks {
			for _, cond := range c.Conds {
				v := uint32(d.args[cond.Arg])
				switch {
				case cond.Op == OpAnySet && v&cond.Value == 0:
					continue checks
				case cond.Op == OpEqual && cond.Mask != 0 && v&cond.Mask != cond.Value:
					continue checks
				case cond.Op == OpEqual && cond.Mask == 0 && v != cond.Value:
					continue checks
				}
			}
			return c.Action
		}
		return r.Action
	}
	return p.DefaultAction
}
