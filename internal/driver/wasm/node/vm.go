package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// vmKey is the context key under which a run's *vm travels into the env host functions: one
// "env" module serves every concurrent run, so they cannot use globals.
type vmKey struct{}

func vmFrom(ctx context.Context) *vm {
	v, _ := ctx.Value(vmKey{}).(*vm)
	return v
}

// vm is the host side of one run. Only the goroutine running it touches it (wazero calls host
// functions on the caller's goroutine), so it needs no lock.
type vm struct {
	r        *Runner
	cfg      *Config
	inv      invocation
	g        *guest
	template bool // building the snapshot: no run, no output
	done     <-chan struct{}
	start    time.Time

	stdout, stderr *outBuf
	lastFlush      time.Time

	exitRequested bool // process.exit was called; exitCode holds its code
	exitCode      int
	oom           bool

	rejections []rejection // unhandled so far, in order

	files  map[int]*openFile // fs.openSync descriptors
	nextFD int

	stdinDone bool
}

// rejection is a promise rejected with no handler yet; both are handles the vm owns.
type rejection struct {
	id              uint32 // the promise object's address, for matching "handled later"
	promise, reason uint32
}

func newVM(r *Runner, cfg *Config, inv invocation) *vm {
	v := &vm{r: r, cfg: cfg, inv: inv, start: time.Now(), nextFD: 3, files: map[int]*openFile{}}
	v.stdout = &outBuf{w: cfg.Stdout}
	v.stderr = &outBuf{w: cfg.Stderr}
	v.stdout.other, v.stderr.other = v.stderr, v.stdout
	return v
}

// main boots the prelude with this run's configuration, which runs the script, then drives the
// event loop. It returns the exit code of a run that ended by itself.
func (v *vm) main() (int, error) {
	g := v.g
	h := &v.r.host
	bootArgs := v.bootArgs()
	args := make([]uint32, len(bootArgs))
	for i, a := range bootArgs {
		if args[i] = g.newString(a); args[i] == 0 {
			return v.outOfMemory(), nil
		}
	}
	res, err := g.callFn(h.boot, args...)
	for _, a := range args {
		g.freeValue(a)
	}
	if err != nil {
		return 0, err
	}
	if code, stop := v.settle(res); stop {
		return v.finish(code)
	}
	for {
		if code, stop := v.drainJobs(); stop {
			return v.finish(code)
		}
		res, err := g.callFn(h.step)
		if err != nil {
			return 0, err
		}
		if g.isException(res) {
			if code, stop := v.settle(res); stop {
				return v.finish(code)
			}
			continue
		}
		wait := g.num(res)
		g.freeValue(res)
		switch {
		case wait < 0: // nothing left to do
			return v.finish(-1)
		case wait > 0:
			v.flush()
			t := time.NewTimer(time.Duration(wait * float64(time.Millisecond)))
			select {
			case <-v.done:
				t.Stop()
				return 0, errStopped
			case <-t.C:
			}
		}
	}
}

var errStopped = errors.New("stopped")

// stopped reports whether the run's context is done.
func (v *vm) stopped() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// drainJobs runs promise jobs until none is left, then reports the first unhandled rejection.
// stop means the run must end with code.
func (v *vm) drainJobs() (code int, stop bool) {
	g := v.g
	for g.must(fJobPending) != 0 {
		if int32(g.must(fExecJob)) < 0 {
			ex := g.getException()
			if code, stop := v.uncaught(ex, false, 0); stop {
				return code, true
			}
		}
	}
	for len(v.rejections) > 0 {
		rj := v.rejections[0]
		v.rejections = v.rejections[1:]
		code, stop := v.uncaught(rj.reason, true, rj.promise) // takes both
		if stop {
			return code, true
		}
		// A handler ran: it may have queued jobs.
		for g.must(fJobPending) != 0 {
			if int32(g.must(fExecJob)) < 0 {
				if code, stop := v.uncaught(g.getException(), false, 0); stop {
					return code, true
				}
			}
		}
	}
	return 0, false
}

// settle frees a call's result handle; when it is an exception it handles it as uncaught.
func (v *vm) settle(res uint32) (int, bool) {
	g := v.g
	if res == 0 {
		return v.outOfMemory(), true
	}
	if !g.isException(res) {
		g.freeValue(res)
		return 0, false
	}
	g.freeValue(res)
	return v.uncaught(g.getException(), false, 0)
}

// uncaught hands an uncaught exception (or unhandled rejection reason, with its promise) to the
// prelude, which prints it like node or passes it to process.on('uncaughtException') listeners.
// It takes ex and promise (0 for none).
func (v *vm) uncaught(ex uint32, rejection bool, promise uint32) (int, bool) {
	g := v.g
	if v.stopped() {
		// QuickJS's "interrupted" error: the run's context ended; nothing to print.
		panic(guestFault{errStopped})
	}
	if promise != 0 {
		defer g.freeValue(promise)
	}
	if g.must(fIsNull, uint64(ex)) != 0 && !rejection {
		// QuickJS throws null when it cannot even allocate the out-of-memory error.
		g.freeValue(ex)
		return v.outOfMemory(), true
	}
	if v.isOOMError(ex) {
		v.oom = true
	}
	kind := g.boolean(rejection)
	p := promise
	if p == 0 {
		p = g.undefined()
		defer g.freeValue(p)
	}
	res, err := g.callFn(v.r.host.uncaught, ex, kind, p)
	g.freeValue(kind)
	g.freeValue(ex)
	if err != nil {
		panic(guestFault{err})
	}
	if res == 0 || g.isException(res) {
		// Printing the error failed (typically out of memory again).
		if res != 0 {
			g.freeValue(res)
			g.freeValue(g.getException())
		}
		if v.oom {
			return v.outOfMemory(), true
		}
		v.stderr.WriteString("Uncaught exception (and printing it failed)\n")
		return 1, true
	}
	code := int(g.num(res))
	g.freeValue(res)
	if code < 0 {
		return 0, false // a listener handled it; keep running
	}
	return code, true
}

// isOOMError reports whether ex is QuickJS's InternalError "out of memory".
func (v *vm) isOOMError(ex uint32) bool {
	g := v.g
	if g.must(fIsError, uint64(ex)) == 0 {
		return false
	}
	s, ok := g.str(ex)
	return ok && s == "InternalError: out of memory"
}

// outOfMemory reports an out-of-memory end the guest could not report itself.
func (v *vm) outOfMemory() int {
	v.oom = true
	v.stderr.WriteString("InternalError: out of memory\n")
	return 1
}

// finish runs process 'exit' listeners and returns the final exit code; code < 0 means the
// loop ran dry and process.exitCode decides.
func (v *vm) finish(code int) (int, error) {
	g := v.g
	c := g.newNumber(float64(code))
	res, err := g.callFn(v.r.host.finish, c)
	g.freeValue(c)
	if err != nil {
		return 0, err
	}
	if res == 0 || g.isException(res) {
		if res != 0 {
			g.freeValue(res)
			ex := g.getException()
			if c, stop := v.uncaught(ex, false, 0); stop {
				return c, nil
			}
		}
		if code < 0 {
			code = 1
		}
		return code, nil
	}
	final := int(g.num(res))
	g.freeValue(res)
	return final, nil
}

// bootArgs are the prelude's boot() arguments: mode, code, script, working directory, the
// script arguments joined by NUL, process.env as JSON (parsed only if the script reads it), and
// the rarely used options as JSON ("" when there are none). Strings rather than one JSON
// document, because JSON.parse in QuickJS under wazero costs tens of ns a byte.
func (v *vm) bootArgs() []string {
	inv := v.inv
	env := v.cfg.Env
	if env == nil {
		env = map[string]string{}
	}
	envJSON, _ := json.Marshal(env)
	extra := ""
	if len(inv.execArgv) > 0 || len(inv.preload) > 0 || inv.inputType != "" || inv.unhandled != "" {
		b, _ := json.Marshal(map[string]any{
			"execArgv": inv.execArgv, "preload": inv.preload, "inputType": inv.inputType, "unhandled": inv.unhandled,
		})
		extra = string(b)
	}
	return []string{inv.mode.String(), inv.code, inv.script, v.cfg.Dir, strings.Join(inv.args, "\x00"), string(envJSON), extra}
}

// The env host functions. Each finds its run through the context.

func hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	v := vmFrom(ctx)
	namePtr, nameLen := uint32(stack[0]), uint32(stack[1])
	argc, argvPtr := uint32(stack[3]), uint32(stack[4])
	name, _ := mod.Memory().Read(namePtr, nameLen)
	op := opTable[string(name)]
	if v == nil || op == nil {
		stack[0] = 0
		if v != nil {
			v.g.throwValue(v.g.newString("host function " + string(name) + " is unknown"))
		}
		return
	}
	var argBuf [8]uint32
	args := argBuf[:0]
	if argc > 0 {
		raw, ok := mod.Memory().Read(argvPtr, 4*argc)
		if !ok {
			panic(guestFault{errors.New("host_call: argv out of range")})
		}
		for i := uint32(0); i < argc; i++ {
			args = append(args, binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	stack[0] = uint64(op(v, args))
}

func hostInterrupt(ctx context.Context, _ api.Module, stack []uint64) {
	stack[0] = 0
	v := vmFrom(ctx)
	if v == nil {
		return
	}
	select {
	case <-v.done:
		stack[0] = 1
		return
	default:
	}
	// Long computations still show their output as it is produced.
	if v.stdout.pending() || v.stderr.pending() {
		if now := time.Now(); now.Sub(v.lastFlush) > 50*time.Millisecond {
			v.flush()
		}
	}
}

func hostPromiseRejection(ctx context.Context, _ api.Module, stack []uint64) {
	v := vmFrom(ctx)
	// i32 parameters: only the low 32 bits of each stack slot are defined.
	promise, reason, handled := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]) != 0
	if v == nil {
		return
	}
	g := v.g
	if v.template {
		g.freeValue(promise)
		g.freeValue(reason)
		return
	}
	id := g.must(fValuePtr, uint64(promise))

	if handled {
		for i, rj := range v.rejections {
			if rj.id == id {
				g.freeValue(rj.promise)
				g.freeValue(rj.reason)
				v.rejections = append(v.rejections[:i], v.rejections[i+1:]...)
				break
			}
		}
		g.freeValue(promise)
		g.freeValue(reason)
		return
	}
	v.rejections = append(v.rejections, rejection{id: id, promise: promise, reason: reason})
}

func hostModuleNormalize(ctx context.Context, _ api.Module, stack []uint64) {
	v := vmFrom(ctx)
	basePtr, specPtr := uint32(stack[0]), uint32(stack[1])
	stack[0] = 0
	if v == nil {
		return
	}
	stack[0] = uint64(v.callHostString(v.r.host.esmResolve, v.g.cString(basePtr), v.g.cString(specPtr)))
}

func hostModuleLoad(ctx context.Context, _ api.Module, stack []uint64) {
	v := vmFrom(ctx)
	namePtr, outLen := uint32(stack[0]), uint32(stack[1])
	stack[0] = 0
	if v == nil {
		return
	}
	p := v.callHostString(v.r.host.esmLoad, v.g.cString(namePtr))
	if p == 0 {
		return
	}
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(v.g.cString(p))))
	v.g.mem.Write(outLen, n[:])
	stack[0] = uint64(p)
}

// callHostString calls a prelude function with string arguments and returns its string result
// as malloc'd, NUL-terminated guest memory (what the module loader trampolines want), or 0 with
// the exception left pending.
func (v *vm) callHostString(fn uint32, args ...string) uint32 {
	g := v.g
	hs := make([]uint32, len(args))
	for i, a := range args {
		hs[i] = g.newString(a)
	}
	res, err := g.callFn(fn, hs...)
	for _, h := range hs {
		g.freeValue(h)
	}
	if err != nil {
		panic(guestFault{err})
	}
	if res == 0 {
		return 0
	}
	if g.isException(res) {
		g.freeValue(res)
		return 0
	}
	s, ok := g.str(res)
	g.freeValue(res)
	if !ok {
		return 0
	}
	return g.putBytes([]byte(s))
}

// hostTimezoneOffset makes local time UTC: the guest sees no host timezone.
func hostTimezoneOffset(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

// outBuf buffers one output stream. Writes to one stream first flush the other, so that
// interleaved stdout and stderr keep their order when they share a destination.
type outBuf struct {
	w     io.Writer
	buf   []byte
	other *outBuf
}

const outBufMax = 32 << 10

// write buffers b; it cannot fail (see flush).
func (o *outBuf) write(b []byte) {
	if o.other.pending() {
		o.other.flush()
	}
	o.buf = append(o.buf, b...)
	if len(o.buf) >= outBufMax {
		o.flush()
	}
}

// Write implements io.Writer; it never fails.
func (o *outBuf) Write(b []byte) (int, error) { o.write(b); return len(b), nil }

func (o *outBuf) WriteString(s string) { o.write([]byte(s)) }

func (o *outBuf) pending() bool { return len(o.buf) > 0 }

// flush writes out what is buffered; write errors (a closed pipe) drop the output like a node
// process whose stdout went away, rather than failing the run.
func (o *outBuf) flush() {
	if len(o.buf) > 0 {
		_, _ = o.w.Write(o.buf)
		o.buf = o.buf[:0]
	}
}

func (v *vm) flush() {
	v.stdout.flush()
	v.stderr.flush()
	v.lastFlush = time.Now()
}
