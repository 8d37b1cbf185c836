package wasm

import "testing"

// TestMemoryCap: the execs of a sandbox share its cap; a growth past it is refused and counted
// for the exec that asked; what a closed module held counts again once it is freed.
func TestMemoryCap(t *testing.T) {
	const mib = 1 << 20
	c := newMemoryCap(10 * mib)
	a, b := c.forExec(), c.forExec()
	defer a.unmap()
	defer b.unmap()
	ma := a.Allocate(0, 1<<32)
	mb := b.Allocate(0, 1<<32)
	for _, step := range []struct {
		name string
		mem  interface{ Reallocate(uint64) []byte }
		size uint64
		ok   bool
	}{
		{"a grows to 6 MiB", ma, 6 * mib, true},
		{"b cannot have 5 MiB beside it", mb, 5 * mib, false},
		{"b can have 4 MiB", mb, 4 * mib, true},
		{"a cannot grow further", ma, 7 * mib, false},
		{"shrinking asks nothing", ma, 1 * mib, true},
	} {
		buf := step.mem.Reallocate(step.size)
		if (buf != nil) != step.ok || (buf != nil && uint64(len(buf)) != step.size) {
			t.Fatalf("%s: got %d bytes, want ok=%v", step.name, len(buf), step.ok)
		}
	}
	if used, peak := c.reading(); used != 10*mib || peak != 10*mib {
		t.Fatalf("used %d peak %d, want 10 MiB each", used, peak)
	}
	if a.refused.Load() != 1 || b.refused.Load() != 1 {
		t.Fatalf("refusals a=%d b=%d, want one each", a.refused.Load(), b.refused.Load())
	}
	buf := ma.(*linearMemory).Reallocate(6 * mib)
	buf[6*mib-1] = 1 // the mapping is real memory
	ma.Free()
	if used, _ := c.reading(); used != 4*mib {
		t.Fatalf("after a's module closed: used %d, want b's 4 MiB", used)
	}
	if mb.Reallocate(10*mib) == nil {
		t.Fatal("b cannot have what a gave back")
	}
	if a.peakBytes() != 6*mib || b.peakBytes() != 10*mib {
		t.Fatalf("peaks a=%d b=%d", a.peakBytes(), b.peakBytes())
	}
}
