package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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

// runtimes holds the wazero runtime every wasm sandbox of this airlock shares and the compiled
// interpreters. Compiling CPython takes seconds, so it happens once, on first use, and its
// machine code is kept in a cache on disk: a later airlock loads it instead.
type runtimes struct {
	cacheDir string
	log      *slog.Logger
	python   *interp
	js       *interp

	once sync.Once
	done chan struct{} // closed when load has finished
	// Set by load.
	rtPy, rtJS wazero.Runtime
	pyMod      wazero.CompiledModule
	pyErr      error
	jsRunner   *node.Runner
	jsErr      error
}

func openRuntimes(dir, cacheDir string, log *slog.Logger) *runtimes {
	r := &runtimes{cacheDir: cacheDir, log: log, done: make(chan struct{})}
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
	if err := json.Unmarshal(b, &i.m); err != nil || i.m.Wasm == "" || i.m.Sha256 == "" {
		i.err = fmt.Errorf("its manifest.json is unreadable (%v); reinstall: %s", err, fix)
	}
	return i
}

func (r *runtimes) list() []*interp { return []*interp{r.python, r.js} }

// start begins loading in the background, once.
func (r *runtimes) start() {
	r.once.Do(func() { go r.load() })
}

// wait starts loading if nothing did yet and waits for it.
func (r *runtimes) wait(ctx context.Context) error {
	r.start()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the WebAssembly interpreters to compile: %w", ctx.Err())
	}
}

func (r *runtimes) load() {
	defer close(r.done)
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(r.cacheDir)
	if err != nil {
		r.log.Warn("wasm compilation cache unavailable; interpreters compile anew in every airlock", "dir", r.cacheDir, "err", err)
	}
	// Two runtimes. CPython's can only be stopped from outside, so its runtime closes a module
	// whose context is done, at the cost of a check on every loop back-edge. QuickJS stops
	// itself (its interrupt hook watches the context), and without those checks it runs 2.5–6×
	// faster.
	r.rtPy, r.pyErr = newRuntime(ctx, cache, true)
	r.rtJS, r.jsErr = newRuntime(ctx, cache, false)
	if b, err := r.python.read(); err != nil {
		r.pyErr = errors.Join(r.pyErr, err)
	} else if r.pyErr == nil {
		t0 := time.Now()
		r.pyMod, r.pyErr = r.rtPy.CompileModule(ctx, b)
		r.log.Info("compiled the python interpreter", "took", time.Since(t0), "err", r.pyErr)
	}
	if b, err := r.js.read(); err != nil {
		r.jsErr = errors.Join(r.jsErr, err)
	} else if r.jsErr == nil {
		t0 := time.Now()
		r.jsRunner, r.jsErr = node.NewRunner(ctx, r.rtJS, b)
		r.log.Info("compiled the javascript interpreter", "took", time.Since(t0), "err", r.jsErr)
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

// pythonModule returns the compiled CPython, waiting for it to compile.
func (r *runtimes) pythonModule(ctx context.Context) (wazero.Runtime, wazero.CompiledModule, error) {
	if err := r.wait(ctx); err != nil {
		return nil, nil, err
	}
	if r.pyErr != nil {
		return nil, nil, fmt.Errorf("%v: %w", r.pyErr, errdefs.ErrUnavailable)
	}
	return r.rtPy, r.pyMod, nil
}

// jsRunnerFor returns the node-style runner, waiting for QuickJS to compile.
func (r *runtimes) jsRunnerFor(ctx context.Context) (*node.Runner, error) {
	if err := r.wait(ctx); err != nil {
		return nil, err
	}
	if r.jsErr != nil {
		return nil, fmt.Errorf("%v: %w", r.jsErr, errdefs.ErrUnavailable)
	}
	return r.jsRunner, nil
}
