package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
)

// guest wraps one instance of quickjs.wasm and its C interface (the qjs_* exports). Every
// JSValue crosses the boundary as a pointer to a malloc'd JSValue (a "handle"); whoever
// receives a handle owns it and frees it with freeValue. In results, the zero handle means
// "an exception is pending".
type guest struct {
	ctx context.Context // carries the *vm for the env host functions
	mod api.Module
	mem api.Memory

	scratch uint32 // 16 bytes of guest memory for out-parameters

	// fns holds one api.Function per export per call depth: host functions call back into the
	// guest (host_call → qjs_eval → host_module_load → qjs_call ...), and wazero forbids
	// re-entering the same api.Function before its previous call returned.
	fns   [][numExports]api.Function
	depth int
}

// export names one of the quickjs.wasm exports guest calls.
type export int

const (
	fMalloc export = iota
	fFree
	fEval
	fCall
	fFreeValue
	fNewString
	fNewNumber
	fNewArrayBuffer
	fGetString
	fFreeCString
	fGetFloat
	fGetAB
	fGetUndefined
	fGetNull
	fGetTrue
	fGetFalse
	fIsException
	fIsString
	fIsAB
	fIsNumber
	fIsNull
	fIsError
	fIsFunction
	fThrow
	fGetException
	fExecJob
	fJobPending
	fGetPropStr
	fSetPropStr
	fNewHostFunc
	fSetMemLimit
	fSetMaxStack
	fPromiseState
	fPromiseResult
	fValuePtr
	fGC
	fInitialize
	fInit
	fVersion
	fSetInterrupt
	fSetRejection
	fSetLoader
	numExports
)

// exportNames are the wasm names of the exports, checked once by NewRunner so that a
// mismatched quickjs.wasm fails early and clearly.
var exportNames = [numExports]string{
	fMalloc: "wasm_malloc", fFree: "wasm_free", fEval: "qjs_eval", fCall: "qjs_call",
	fFreeValue: "qjs_free_value", fNewString: "qjs_new_string", fNewNumber: "qjs_new_number",
	fNewArrayBuffer: "qjs_new_array_buffer", fGetString: "qjs_get_string_len",
	fFreeCString: "qjs_free_cstring", fGetFloat: "qjs_get_float64", fGetAB: "qjs_get_array_buffer",
	fGetUndefined: "qjs_get_undefined", fGetNull: "qjs_get_null", fGetTrue: "qjs_get_true",
	fGetFalse: "qjs_get_false", fIsException: "qjs_is_exception", fIsString: "qjs_is_string",
	fIsAB: "qjs_is_array_buffer", fIsNumber: "qjs_is_number", fIsNull: "qjs_is_null",
	fIsError: "qjs_is_error", fIsFunction: "qjs_is_function", fThrow: "qjs_throw",
	fGetException: "qjs_get_exception", fExecJob: "qjs_execute_pending_job",
	fJobPending: "qjs_is_job_pending", fGetPropStr: "qjs_get_prop_string",
	fSetPropStr: "qjs_set_prop_string", fNewHostFunc: "qjs_new_host_function",
	fSetMemLimit: "qjs_set_memory_limit",
	fSetMaxStack: "qjs_set_max_stack_size", fPromiseState: "qjs_promise_state",
	fPromiseResult: "qjs_promise_result", fValuePtr: "qjs_get_value_ptr", fGC: "qjs_run_gc",
	fInitialize: "_initialize", fInit: "qjs_init", fVersion: "qjs_get_quickjs_version",
	fSetInterrupt: "qjs_set_interrupt_handler", fSetRejection: "qjs_set_promise_rejection_handler",
	fSetLoader: "qjs_set_module_loader",
}

func newGuest(ctx context.Context, mod api.Module) *guest {
	return &guest{ctx: ctx, mod: mod, mem: mod.Memory()}
}

// fn returns the api.Function for e at the current call depth.
func (g *guest) fn(e export) api.Function {
	for len(g.fns) <= g.depth {
		g.fns = append(g.fns, [numExports]api.Function{})
	}
	f := g.fns[g.depth][e]
	if f == nil {
		f = g.mod.ExportedFunction(exportNames[e])
		g.fns[g.depth][e] = f
	}
	return f
}

// call invokes an export with i32 parameters and returns its first result
// (0 when it has none). A non-nil error means the instance trapped, exited
// (process.exit, a closed module) or was stopped by its context.
func (g *guest) call(e export, params ...uint64) (uint64, error) {
	f := g.fn(e)
	g.depth++
	defer func() { g.depth-- }()
	var buf [8]uint64
	stack := buf[:]
	if len(params) > len(stack) {
		stack = make([]uint64, len(params))
	}
	copy(stack, params)
	if err := f.CallWithStack(g.ctx, stack); err != nil {
		return 0, err
	}
	return stack[0], nil
}

// must is call for exports that cannot fail except by trapping; a trap there
// is propagated as a panic and turned back into an error by Run.
func (g *guest) must(e export, params ...uint64) uint32 {
	r, err := g.call(e, params...)
	if err != nil {
		panic(guestFault{err})
	}
	return uint32(r)
}

// guestFault carries an error out of deeply nested helpers up to Run. Inside
// a host function the panic unwinds through wazero, which returns it (or its
// recovered value) from the outermost Call.
type guestFault struct{ err error }

func (f guestFault) Error() string { return f.err.Error() }
func (f guestFault) Unwrap() error { return f.err }

// malloc allocates n bytes of guest memory (plain malloc, not QuickJS's
// accounted allocator). It returns 0 when the guest is out of memory.
func (g *guest) malloc(n int) uint32 {
	if n == 0 {
		n = 1
	}
	return g.must(fMalloc, uint64(n))
}

func (g *guest) free(p uint32) {
	if p != 0 {
		g.must(fFree, uint64(p))
	}
}

// freeValue releases a handle.
func (g *guest) freeValue(h uint32) {
	if h != 0 {
		g.must(fFreeValue, uint64(h))
	}
}

func (g *guest) read(p, n uint32) []byte {
	b, ok := g.mem.Read(p, n)
	if !ok {
		panic(guestFault{fmt.Errorf("guest memory read out of range: %d+%d", p, n)})
	}
	return b
}

func (g *guest) u32(p uint32) uint32 { return binary.LittleEndian.Uint32(g.read(p, 4)) }

// putBytes copies b into fresh guest memory, NUL-terminated; 0 when out of memory.
func (g *guest) putBytes(b []byte) uint32 {
	p := g.malloc(len(b) + 1)
	if p == 0 {
		return 0
	}
	if !g.mem.Write(p, b) || !g.mem.WriteByte(p+uint32(len(b)), 0) {
		panic(guestFault{fmt.Errorf("guest memory write out of range at %d", p)})
	}
	return p
}

// newString makes a JS string from UTF-8 (or WTF-8) text.
func (g *guest) newString(s string) uint32 {
	p := g.putBytes([]byte(s))
	if p == 0 {
		return 0
	}
	h := g.must(fNewString, uint64(p), uint64(len(s)))
	g.free(p)
	return h
}

// newArrayBuffer makes an ArrayBuffer holding a copy of b.
func (g *guest) newArrayBuffer(b []byte) uint32 {
	p := g.malloc(len(b))
	if p == 0 {
		return 0
	}
	g.mem.Write(p, b)
	h := g.must(fNewArrayBuffer, uint64(p), uint64(len(b)))
	g.free(p)
	return h
}

func (g *guest) newNumber(f float64) uint32 {
	return g.must(fNewNumber, math.Float64bits(f))
}

func (g *guest) undefined() uint32 { return g.must(fGetUndefined) }
func (g *guest) null() uint32      { return g.must(fGetNull) }
func (g *guest) boolean(b bool) uint32 {
	if b {
		return g.must(fGetTrue)
	}
	return g.must(fGetFalse)
}

// str converts a handle to a Go string (JS ToString semantics; lone
// surrogates come back as WTF-8). ok is false when the conversion threw.
func (g *guest) str(h uint32) (string, bool) {
	p := g.must(fGetString, uint64(h), uint64(g.scratch))
	if p == 0 {
		return "", false
	}
	n := g.u32(g.scratch)
	s := string(g.read(p, n))
	g.must(fFreeCString, uint64(p))
	return s, true
}

// num converts a handle to a float64 (JS ToNumber; NaN on failure).
func (g *guest) num(h uint32) float64 {
	r, err := g.call(fGetFloat, uint64(h))
	if err != nil {
		panic(guestFault{err})
	}
	return math.Float64frombits(r)
}

func (g *guest) isString(h uint32) bool      { return g.must(fIsString, uint64(h)) != 0 }
func (g *guest) isArrayBuffer(h uint32) bool { return g.must(fIsAB, uint64(h)) != 0 }
func (g *guest) isException(h uint32) bool   { return g.must(fIsException, uint64(h)) != 0 }

// bytes returns a copy of an ArrayBuffer's contents, or the UTF-8 of a string.
func (g *guest) bytes(h uint32) ([]byte, bool) {
	if g.isString(h) {
		s, ok := g.str(h)
		return []byte(s), ok
	}
	if !g.isArrayBuffer(h) {
		return nil, false
	}
	p := g.must(fGetAB, uint64(h), uint64(g.scratch))
	n := g.u32(g.scratch)
	if p == 0 || n == 0 {
		return []byte{}, true
	}
	return append([]byte(nil), g.read(p, n)...), true
}

// throwValue makes h the pending exception and frees h.
func (g *guest) throwValue(h uint32) {
	if h == 0 {
		return
	}
	ex := g.must(fThrow, uint64(h))
	g.freeValue(ex)
	g.freeValue(h)
}

// eval evaluates code and returns the result handle (never 0 unless the guest
// is out of memory); the caller checks isException.
func (g *guest) eval(code, filename string, flags int) uint32 {
	pc := g.putBytes([]byte(code))
	pf := g.putBytes([]byte(filename))
	if pc == 0 || pf == 0 {
		g.free(pc)
		g.free(pf)
		return 0
	}
	h := g.must(fEval, uint64(pc), uint64(len(code)), uint64(pf), uint64(flags))
	g.free(pc)
	g.free(pf)
	return h
}

// callFn calls fn(args...) with this = undefined and returns the result handle.
// It returns an error only when the guest trapped or exited.
func (g *guest) callFn(fn uint32, args ...uint32) (uint32, error) {
	undef := g.undefined()
	defer g.freeValue(undef)
	var argv uint32
	if len(args) > 0 {
		argv = g.malloc(4 * len(args))
		if argv == 0 {
			return 0, nil
		}
		defer g.free(argv)
		b := make([]byte, 4*len(args))
		for i, a := range args {
			binary.LittleEndian.PutUint32(b[4*i:], a)
		}
		g.mem.Write(argv, b)
	}
	r, err := g.call(fCall, uint64(fn), uint64(undef), uint64(len(args)), uint64(argv))
	return uint32(r), err
}

// getException takes the pending exception (a handle the caller frees).
func (g *guest) getException() uint32 { return g.must(fGetException) }

// cString reads a NUL-terminated string at p.
func (g *guest) cString(p uint32) string {
	var out []byte
	for {
		b, ok := g.mem.ReadByte(p)
		if !ok || b == 0 {
			return string(out)
		}
		out = append(out, b)
		p++
	}
}

// validUTF8 replaces invalid UTF-8 like Node's decoder does (U+FFFD per bad
// byte), so strings handed to QuickJS are well formed.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]rune, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = append(out, r) // RuneError for a bad byte, n == 1
		b = b[n:]
	}
	return string(out)
}
