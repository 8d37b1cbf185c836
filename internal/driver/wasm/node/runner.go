package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// NodeVersion is the Node.js release whose API this package imitates; process.version reports it.
const NodeVersion = "v22.0.0"

// Mounts is the guest filesystem. Resolve maps an absolute, clean guest path to the filesystem
// mounted there (the longest mount prefix) and the path relative to that mount ("." for its
// root). ok is false when nothing is mounted there. Implementations must confine every path to
// their mount (symlinks included); this package never touches host paths any other way.
//
// A filesystem may return ENOSPC or EXDEV (this package's values) besides wazero's errnos.
type Mounts interface {
	Resolve(guestPath string) (fsys experimentalsys.FS, rel string, ok bool)
}

// Errnos that wazero's experimental/sys lacks; a Mounts filesystem may return them and the
// guest sees them as Node's 'ENOSPC' and 'EXDEV' errors.
const (
	ENOSPC experimentalsys.Errno = 0x1000 + iota
	EXDEV
)

// Config is one run: a node command line and the world it sees.
type Config struct {
	// Args are the arguments after "node": ["-e", CODE, args...], ["-p", EXPR], ["FILE.js",
	// args...], ["--version"], ["-"] or none for a script read from Stdin. Unknown flags make the
	// run exit 9 like node.
	Args []string
	// Env is process.env.
	Env map[string]string
	// Dir is the working directory, an absolute guest path ("/" when empty).
	Dir string
	// Stdin, Stdout and Stderr are the standard streams; nil means empty / discard. Everything
	// written is flushed before Run returns.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// FS is the guest filesystem; nil means none (every path is ENOENT).
	FS Mounts
	// MemoryLimit caps, in bytes, what QuickJS's allocator may hold (at most 4 GiB - 1); 0 means
	// no limit of its own, leaving only the runtime's memory pages limit.
	MemoryLimit int64
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the process exit code: process.exit's or process.exitCode, 1 for an uncaught
	// exception, an unhandled rejection or a crash of the engine, 9 for a bad option.
	ExitCode int
	// OOM is true when the run ended because memory ran out: QuickJS's allocator hit
	// Config.MemoryLimit or the wasm memory hit the runtime's limit, and the resulting error was
	// not caught (or the engine could not even build it). The driver reports limit.memory.
	OOM bool
}

// Runner runs node-style command lines with one compiled quickjs.wasm. Safe for concurrent use:
// every Run has its own module instance.
type Runner struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig

	snap      []byte // linear memory after the prelude ran
	dirty     []span // where snap differs from a fresh instance's memory; nil: write it all
	stackPtr  uint64 // __stack_pointer at snapshot time
	host      hostFuncs
	engineVer string // QuickJS-NG version, e.g. "0.17.0"
	maxPages  uint32 // the wasm memory's page limit in this runtime

	closeOnce sync.Once
}

// hostFuncs are the prelude's entry points, as handles valid in every instance restored from the
// snapshot (they live in the copied linear memory).
type hostFuncs struct {
	boot, step, uncaught, finish, esmResolve, esmLoad uint32
	scratch                                           uint32 // 16 bytes for out-parameters
}

// NewRunner compiles quickjs.wasm into r, instantiates the "env" host module it imports (once per
// runtime; a second Runner on the same runtime reuses it), and builds the memory image runs start
// from. r must already have wasi_snapshot_preview1 instantiated. See the package documentation
// on WithCloseOnContextDone: it works, but slows QuickJS down about nine times.
func NewRunner(ctx context.Context, r wazero.Runtime, wasm []byte) (*Runner, error) {
	if err := ensureEnv(ctx, r); err != nil {
		return nil, err
	}
	run := &Runner{
		rt: r,
		modCfg: wazero.NewModuleConfig().WithName("").WithStartFunctions().
			WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader),
	}
	compiled, err := run.compile(ctx, wasm, 0)
	if err != nil {
		return nil, err
	}
	run.compiled = compiled
	if err := run.buildSnapshot(ctx); err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	// Runs start their memory at the snapshot's size: recompile with that as the minimum. (The
	// template cannot start there: wasi-libc's allocator only uses the initial memory the
	// binary declares, so extra initial pages would be dead weight in the snapshot.)
	if pages := uint32(len(run.snap) / 65536); pages > memMin(compiled) {
		if again, err := run.compile(ctx, wasm, pages); err == nil {
			if memMin(again) == pages {
				compiled.Close(ctx)
				run.compiled = again
			} else {
				again.Close(ctx)
			}
		}
	}
	if err := run.findDirty(ctx); err != nil {
		run.compiled.Close(ctx)
		return nil, err
	}
	return run, nil
}

// compile compiles wasm with its memory starting at pages (0: as shipped; also the fallback when
// the runtime's memory limit does not allow that) and checks it has the exports this package
// calls.
func (r *Runner) compile(ctx context.Context, wasm []byte, pages uint32) (wazero.CompiledModule, error) {
	var compiled wazero.CompiledModule
	err := errors.New("as shipped")
	if pages > 0 {
		var patched []byte
		if patched, err = withMinPages(wasm, pages); err == nil {
			compiled, err = r.rt.CompileModule(ctx, patched)
		}
	}
	if err != nil {
		if compiled, err = r.rt.CompileModule(ctx, wasm); err != nil {
			return nil, fmt.Errorf("node: compile quickjs.wasm: %w", err)
		}
	}
	exports := compiled.ExportedFunctions()
	for _, name := range exportNames {
		if _, ok := exports[name]; !ok {
			compiled.Close(ctx)
			return nil, fmt.Errorf("node: quickjs.wasm lacks export %q: not the quickjs-wasi build this package expects", name)
		}
	}
	r.maxPages = math.MaxUint16 + 1
	if mem := compiled.ExportedMemories()["memory"]; mem != nil {
		if max, ok := mem.Max(); ok {
			r.maxPages = max
		}
	}
	return compiled, nil
}

func memMin(c wazero.CompiledModule) uint32 {
	if mem := c.ExportedMemories()["memory"]; mem != nil {
		return mem.Min()
	}
	return 0
}

// Close releases the compiled module. Runs in progress are not stopped.
func (r *Runner) Close(ctx context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		err = r.compiled.Close(ctx)
	})
	return err
}

// Version is what `node --version` prints: NodeVersion plus the QuickJS-NG version, because this
// is not Node.
func (r *Runner) Version() string { return NodeVersion + "-quickjs-ng-" + r.engineVer }

// EngineVersion is the QuickJS-NG version inside quickjs.wasm, e.g. "0.17.0".
func (r *Runner) EngineVersion() string { return r.engineVer }

// Run runs one node command line in a fresh QuickJS state and waits for it, event loop included. The error is non-nil only when the run could not be carried out or was stopped: when
// ctx is done it wraps ctx.Err() (errors.Is(err, context.DeadlineExceeded)), and the Result is
// still filled in as far as known (OOM in particular). A script that fails is a Result, not an
// error.
func (r *Runner) Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Stdin == nil {
		cfg.Stdin = strings.NewReader("")
	}
	if cfg.Dir == "" {
		cfg.Dir = "/"
	}
	if !strings.HasPrefix(cfg.Dir, "/") {
		return Result{ExitCode: -1}, fmt.Errorf("node: working directory %q is not absolute", cfg.Dir)
	}
	if cfg.MemoryLimit < 0 {
		return Result{ExitCode: -1}, fmt.Errorf("node: negative memory limit %d", cfg.MemoryLimit)
	}
	inv, err := parseArgs(cfg.Args)
	if err != nil {
		fmt.Fprintf(cfg.Stderr, "node: %v\n", err)
		return Result{ExitCode: 9}, nil
	}
	switch inv.mode {
	case modeVersion:
		fmt.Fprintln(cfg.Stdout, r.Version())
		return Result{}, nil
	case modeHelp:
		_, _ = io.WriteString(cfg.Stdout, usage)
		return Result{}, nil
	}

	v := newVM(r, &cfg, inv)
	defer v.closeFiles()
	res, err := v.run(ctx)
	v.flush()
	return res, err
}

// run takes an instance, boots the prelude, drives the event loop and converts how the guest
// ended into a Result.
func (v *vm) run(ctx context.Context) (res Result, err error) {
	gctx := context.WithValue(ctx, vmKey{}, v)
	v.done = ctx.Done()
	in, err := v.r.newInstance(gctx)
	if err != nil {
		if ctx.Err() != nil {
			return Result{ExitCode: -1}, fmt.Errorf("node: stopped: %w", ctx.Err())
		}
		return Result{ExitCode: -1}, fmt.Errorf("node: start quickjs.wasm: %w", err)
	}
	defer in.mod.Close(context.WithoutCancel(ctx))
	v.g = in.g

	defer func() {
		rec := recover()
		if rec == nil && err == nil {
			return
		}
		if rec != nil {
			gf, ok := rec.(guestFault)
			if !ok {
				panic(rec)
			}
			err = gf.err
		}
		res, err = v.classify(ctx, err)
	}()

	limit := v.cfg.MemoryLimit
	if limit > math.MaxUint32 {
		limit = math.MaxUint32
	}
	v.g.must(fSetMemLimit, uint64(limit))
	code, err := v.main()
	if err != nil {
		return Result{}, err
	}
	return Result{ExitCode: code, OOM: v.oom}, nil
}

// classify turns an error out of the guest into a Result: process.exit, a stopped context, or a
// crash (a wasm trap), which is reported on stderr like node reports a fatal error.
func (v *vm) classify(ctx context.Context, err error) (Result, error) {
	if v.exitRequested {
		return Result{ExitCode: v.exitCode, OOM: v.oom}, nil
	}
	if ctx.Err() != nil {
		return Result{ExitCode: -1, OOM: v.oom}, fmt.Errorf("node: stopped: %w", ctx.Err())
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		// The module was closed under us without process.exit: only the runtime does that.
		return Result{ExitCode: -1, OOM: v.oom}, fmt.Errorf("node: module closed: %w", err)
	}
	if v.memoryExhausted() {
		v.oom = true
	}
	msg := firstLine(err.Error())
	if v.oom {
		fmt.Fprintf(v.stderr, "FATAL ERROR: JavaScript heap out of memory (%s)\n", msg)
	} else {
		fmt.Fprintf(v.stderr, "FATAL ERROR: QuickJS crashed: %s\n", msg)
	}
	return Result{ExitCode: 1, OOM: v.oom}, nil
}

// memoryExhausted reports whether the instance's linear memory is within a few pages of its cap,
// which is how a failed memory.grow shows from outside.
func (v *vm) memoryExhausted() bool {
	if v.g == nil {
		return false
	}
	pages := v.g.mem.Size() / 65536
	return pages+16 >= v.r.maxPages
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ensureEnv instantiates the "env" module quickjs.wasm imports, unless r already has one (from
// another Runner: the functions are stateless and find their run through the context).
func ensureEnv(ctx context.Context, r wazero.Runtime) error {
	if m := r.Module("env"); m != nil {
		if _, ok := m.ExportedFunctionDefinitions()["host_call"]; !ok {
			return errors.New(`node: the runtime already has an "env" module that is not this package's`)
		}
		return nil
	}
	i32 := api.ValueTypeI32
	b := r.NewHostModuleBuilder("env")
	def := func(name string, fn api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(fn, params, results).WithName(name).Export(name)
	}
	def("host_call", hostCall, []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32})
	def("host_interrupt", hostInterrupt, nil, []api.ValueType{i32})
	def("host_promise_rejection", hostPromiseRejection, []api.ValueType{i32, i32, i32}, nil)
	def("host_module_normalize", hostModuleNormalize, []api.ValueType{i32, i32}, []api.ValueType{i32})
	def("host_module_load", hostModuleLoad, []api.ValueType{i32, i32}, []api.ValueType{i32})
	def("host_get_timezone_offset", hostTimezoneOffset, []api.ValueType{i32, i32}, []api.ValueType{i32})
	if _, err := b.Instantiate(ctx); err != nil {
		if r.Module("env") != nil { // lost a race with another NewRunner
			return nil
		}
		return fmt.Errorf("node: instantiate env host module: %w", err)
	}
	return nil
}

const usage = `Usage: node [options] [ script.js | -e "script" | - ] [arguments]

This is airlock's node-compatible runner on QuickJS-NG (WebAssembly), not Node.js.

Options:
  -e, --eval script       evaluate script
  -p, --print script      evaluate script and print the result
  -c, --check             syntax check script without executing
  -r, --require module    preload a module (CommonJS)
  --input-type=module     treat --eval or stdin input as an ES module
  -v, --version           print the version
  -h, --help              print this help
  -                       script read from stdin (default when no script is given)
`
