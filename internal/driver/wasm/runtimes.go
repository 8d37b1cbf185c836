package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/airlockrun/airlock/internal/driver/wasm/node"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Languages the level runs.
const (
	langPython = "python"
	langJS     = "javascript"
)

// manifest is what scripts/wasm/*.sh record beside an interpreter they installed.
type manifest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Wasm    string `json:"wasm"`
	Sha256  string `json:"sha256"`
	Licence string `json:"licence"`
}

// interp is one installed interpreter.
type interp struct {
	lang string
	dir  string
	m    manifest
	err  error // not installed, or its manifest is unreadable
}

func (i *interp) describe() string {
	if i.err != nil {
		return i.err.Error()
	}
	return fmt.Sprintf("%s %s (%s), sha256 %s", i.m.Name, i.m.Version, i.m.Licence, shortHash(i.m.Sha256))
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// runtimes holds the compiled interpreters. Compiling CPython takes seconds, so its machine code
// is kept in a cache on disk: the daemon compiles each interpreter once into it (precompile), and
// every worker loads it from there (read-only), each interpreter on its first use.
type runtimes struct {
	cacheDir string
	log      *slog.Logger
	python   *interp
	js       *interp

	cacheOnce sync.Once
	cache     wazero.CompilationCache // nil: none (it could not be opened)

	pyOnce sync.Once
	rtPy   wazero.Runtime
	pyMod  wazero.CompiledModule
	pyErr  error

	jsOnce   sync.Once
	rtJS     wazero.Runtime
	jsRunner *node.Runner
	jsErr    error
}

func openRuntimes(dir, cacheDir string, log *slog.Logger) *runtimes {
	r := &runtimes{cacheDir: cacheDir, log: log}
	r.python = readInterp(langPython, filepath.Join(dir, "python"), "build it with scripts/wasm/build-python.sh (make wasm-runtimes)")
	r.js = readInterp(langJS, filepath.Join(dir, "quickjs"), "fetch it with scripts/wasm/fetch-quickjs.sh (make wasm-runtimes)")
	return r
}

func readInterp(lang, dir, fix string) *interp {
	i := &interp{lang: lang, dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		i.err = fmt.Errorf("not installed (%s)", fix)
		return i
	}
	if err := json.Unmarshal(b, &i.m); err != nil {
		i.err = fmt.Errorf("its manifest.json is unreadable (%w); reinstall: %s", err, fix)
	} else if i.m.Wasm == "" || i.m.Sha256 == "" {
		i.err = fmt.Errorf("its manifest.json names no wasm file or no sha256; reinstall: %s", fix)
	}
	return i
}

func (r *runtimes) list() []*interp { return []*interp{r.python, r.js} }

// compilationCache opens the cache once.
func (r *runtimes) compilationCache() wazero.CompilationCache {
	r.cacheOnce.Do(func() {
		c, err := wazero.NewCompilationCacheWithDir(r.cacheDir)
		if err != nil {
			r.log.Warn("wasm compilation cache unavailable; interpreters compile anew", "dir", r.cacheDir, "err", err)
			return
		}
		r.cache = c
	})
	return r.cache
}

// Two runtimes. CPython's can only be stopped from outside, so its runtime closes a module whose
// context is done, at the cost of a check on every loop back-edge. QuickJS stops itself (its
// interrupt hook watches the context), and without those checks it runs 2.5–6× faster.

func (r *runtimes) loadPython() {
	r.rtPy, r.pyErr = r.load(r.python, true, func(ctx context.Context, rt wazero.Runtime, b []byte) (err error) {
		r.pyMod, err = rt.CompileModule(ctx, b)
		return err
	})
}

func (r *runtimes) loadJS() {
	r.rtJS, r.jsErr = r.load(r.js, false, func(ctx context.Context, rt wazero.Runtime, b []byte) (err error) {
		r.jsRunner, err = node.NewRunner(ctx, rt, b)
		return err
	})
}

// load readies interpreter i on a runtime of its own: ready compiles its module b (and prepares
// what runs need), from the cache when it holds the machine code.
func (r *runtimes) load(i *interp, closeOnDone bool, ready func(context.Context, wazero.Runtime, []byte) error) (wazero.Runtime, error) {
	ctx := context.Background()
	b, err := i.read()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	try := func(cache wazero.CompilationCache) (wazero.Runtime, error) {
		rt, err := newRuntime(ctx, cache, closeOnDone)
		if err == nil {
			err = ready(ctx, rt, b)
		}
		return rt, err
	}
	rt, err := try(r.compilationCache())
	if err != nil && r.cache != nil {
		// A read-only cache without this interpreter's code (another build of airlock filled
		// it): compile it here, without the cache.
		r.log.Warn("the "+i.lang+" interpreter did not load from the compilation cache; compiling it", "err", err)
		if rt != nil {
			rt.Close(ctx)
		}
		rt, err = try(nil)
	}
	r.log.Info("compiled the "+i.lang+" interpreter", "took", time.Since(t0), "err", err)
	// Loading read the module and its machine code into the heap, and copied the code out:
	// give that back now rather than at the next collection (a worker's memory is its sandbox's).
	debug.FreeOSMemory()
	return rt, err
}

// close releases the runtimes and the cache's compiled code (the daemon, once it has filled the
// cache, keeps none of it).
func (r *runtimes) close() {
	ctx := context.Background()
	for _, rt := range []wazero.Runtime{r.rtPy, r.rtJS} {
		if rt != nil {
			rt.Close(ctx)
		}
	}
	if r.cache != nil {
		r.cache.Close(ctx)
	}
}

// newRuntime returns a compiling wazero runtime with WASI, on the shared cache (nil: none).
func newRuntime(ctx context.Context, cache wazero.CompilationCache, closeOnDone bool) (wazero.Runtime, error) {
	cfg := wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(closeOnDone)
	if cache != nil {
		cfg = cfg.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return rt, fmt.Errorf("instantiate WASI: %w", err)
	}
	return rt, nil
}

// read returns the interpreter's module, checked against the sha256 its manifest records.
func (i *interp) read() ([]byte, error) {
	if i.err != nil {
		return nil, fmt.Errorf("the %s interpreter is %w", i.lang, i.err)
	}
	b, err := os.ReadFile(filepath.Join(i.dir, i.m.Wasm))
	if err != nil {
		return nil, fmt.Errorf("the %s interpreter: %w", i.lang, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != i.m.Sha256 {
		return nil, fmt.Errorf("the %s interpreter %s does not match its manifest (sha256 %s, manifest says %s); reinstall it",
			i.lang, filepath.Join(i.dir, i.m.Wasm), shortHash(got), shortHash(i.m.Sha256))
	}
	return b, nil
}

// pythonModule returns the compiled CPython, loading it on first use.
func (r *runtimes) pythonModule(context.Context) (wazero.Runtime, wazero.CompiledModule, error) {
	r.pyOnce.Do(r.loadPython)
	if r.pyErr != nil {
		return nil, nil, fmt.Errorf("%w: %w", r.pyErr, errdefs.ErrUnavailable)
	}
	return r.rtPy, r.pyMod, nil
}

// jsRunnerFor returns the node-style runner, loading QuickJS on first use.
func (r *runtimes) jsRunnerFor(context.Context) (*node.Runner, error) {
	r.jsOnce.Do(r.loadJS)
	if r.jsErr != nil {
		return nil, fmt.Errorf("%w: %w", r.jsErr, errdefs.ErrUnavailable)
	}
	return r.jsRunner, nil
}
