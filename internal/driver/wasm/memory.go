package wasm

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// memoryCap enforces a sandbox's memoryMb on the linear memories of its running modules, through
// the allocator each exec gives wazero (forExec). Each memory is one anonymous
// mapping reserved at its cap up front (address space only: pages cost RAM once touched), so it
// grows in place, never copied; a growth that would pass the sandbox's cap is refused, which the
// guest sees as memory.grow returning -1 (CPython: MemoryError; QuickJS: out of memory), and is
// recorded so the exec can report limit.memory.
//
// The cap is the sandbox's, shared by its concurrent execs, like a cgroup's.
type memoryCap struct {
	limit uint64 // bytes
	// budget, when set, is a second check of growths but a memory's first allocation, which
	// wazero cannot take a refusal of: it says how many more bytes the process may take (see
	// jailBudget) and how many it holds. Looking costs a few reads of /proc, so grow asks again
	// only once the growths since it last did pass half of what it said was left.
	budget func() (avail, resident uint64)

	mu   sync.Mutex // guards used, peak, grown and allowance
	used uint64     // bytes of linear memory the sandbox's live modules have
	peak uint64
	// grown is the growth since the budget last looked, allowance how much may pass before
	// it looks again.
	grown, allowance uint64
}

func newMemoryCap(limit uint64) *memoryCap { return &memoryCap{limit: limit} }

// forExec returns the allocator of one exec's modules: the sandbox's cap, with the exec's own
// peak kept for its result.
func (c *memoryCap) forExec() *execMemory { return &execMemory{cap: c} }

// execMemory is the memory of one exec's modules; it implements experimental.MemoryAllocator.
type execMemory struct {
	cap  *memoryCap
	mu   sync.Mutex // guards used, peak
	used uint64
	peak uint64
	// refused counts this exec's growths the cap refused.
	refused atomic.Int64
	// oom is set when the interpreter reports its own allocator's limit reached (QuickJS has
	// one, set to the cap, which it may reach before its linear memory does).
	oom atomic.Bool
	// mapped are the mappings of the exec's memories, unmapped by unmap once the exec is over.
	mapped [][]byte
	// resident is the most memory the process held when the budget looked, during the exec.
	resident atomic.Uint64
}

func (e *execMemory) sawResident(n uint64) {
	for {
		old := e.resident.Load()
		if n <= old || e.resident.CompareAndSwap(old, n) {
			return
		}
	}
}

// unmap returns the exec's mappings to the kernel; the exec's modules are all closed.
func (e *execMemory) unmap() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.mapped {
		_ = unix.Munmap(b) // it fails only for what was never mapped
	}
	e.mapped = nil
}

// Allocate implements experimental.MemoryAllocator.
func (e *execMemory) Allocate(_, max uint64) experimental.LinearMemory {
	return &linearMemory{cap: e.cap, exec: e, reserve: min(max, e.cap.limit)}
}

func (e *execMemory) add(delta int64) {
	e.mu.Lock()
	e.used = uint64(int64(e.used) + delta)
	e.peak = max(e.peak, e.used)
	e.mu.Unlock()
}

// peakBytes is the most linear memory the exec's modules had at once.
func (e *execMemory) peakBytes() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peak
}

// reading returns the bytes in use and the peak since the sandbox began.
func (c *memoryCap) reading() (used, peak uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.peak
}

// grow accounts a memory's growth by delta bytes, or refuses it; first says it is the memory's
// first allocation. resident is the process's memory the budget saw (0: not asked).
func (c *memoryCap) grow(delta uint64, first bool) (ok bool, resident uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used+delta > c.limit {
		return false, 0
	}
	if !first && c.budget != nil {
		if c.grown += delta; c.grown > c.allowance {
			var avail uint64
			avail, resident = c.budget()
			if delta > avail {
				c.grown, c.allowance = 0, 0
				return false, resident
			}
			c.grown, c.allowance = 0, (avail-delta)/2
		}
	}
	c.used += delta
	c.peak = max(c.peak, c.used)
	return true, resident
}

func (c *memoryCap) release(n uint64) {
	c.mu.Lock()
	c.used -= n
	c.mu.Unlock()
}

// linearMemory is one module's memory: a mapping of reserve bytes, of which len are in use.
type linearMemory struct {
	cap     *memoryCap
	exec    *execMemory
	reserve uint64
	buf     []byte // the whole mapping; nil until the first Reallocate
	len     uint64
	failed  bool // the mapping could not be made
}

// Reallocate implements experimental.LinearMemory. It returns nil — a refused growth — past the
// sandbox's cap or the memory's reservation.
func (m *linearMemory) Reallocate(size uint64) []byte {
	if size <= m.len {
		return m.buf[:size:size]
	}
	if size > m.reserve || m.failed {
		m.exec.refused.Add(1)
		return nil
	}
	ok, resident := m.cap.grow(size-m.len, m.buf == nil)
	m.exec.sawResident(resident)
	if !ok {
		m.exec.refused.Add(1)
		return nil
	}
	if m.buf == nil {
		b, err := unix.Mmap(-1, 0, int(max(m.reserve, uint64(unix.Getpagesize()))), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			m.failed = true
			m.cap.release(size - m.len)
			return nil
		}
		m.buf = b
		m.exec.mu.Lock()
		m.exec.mapped = append(m.exec.mapped, b)
		m.exec.mu.Unlock()
	}
	m.exec.add(int64(size - m.len))
	m.len = size
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory: the memory no longer counts against the cap. Its
// mapping stays until the exec is over (execMemory.unmap): wazero frees a memory when its module
// is closed, which process exit does from inside a host call, before the call has unwound.
func (m *linearMemory) Free() {
	m.cap.release(m.len)
	m.exec.add(-int64(m.len))
	m.len = 0
}
