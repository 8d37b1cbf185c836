package node

import (
	"bytes"
	"context"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// wasmPath is where scripts/wasm/fetch-quickjs.sh installs quickjs.wasm.
const wasmPath = "/usr/local/lib/airlock/wasm/quickjs/quickjs.wasm"

// testMounts is a tiny Mounts: longest-prefix match over a map of guest paths.
type testMounts map[string]experimentalsys.FS

func (m testMounts) Resolve(p string) (experimentalsys.FS, string, bool) {
	best := ""
	for prefix := range m {
		if (p == prefix || strings.HasPrefix(p, strings.TrimSuffix(prefix, "/")+"/")) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return nil, "", false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, best), "/")
	if rel == "" {
		rel = "."
	}
	return m[best], path.Clean(rel), true
}

var (
	sharedOnce   sync.Once
	sharedRunner *Runner
	sharedErr    error
)

// testRunner returns a Runner on a runtime with a 256 MiB memory cap, shared by the tests.
func testRunner(t testing.TB) *Runner {
	t.Helper()
	wasm := mustReadWasm(t)
	sharedOnce.Do(func() {
		ctx := context.Background()
		sharedRunner, sharedErr = NewRunner(ctx, newTestRuntime(ctx, 4096), wasm)
	})
	if sharedErr != nil {
		t.Fatalf("NewRunner: %v", sharedErr)
	}
	return sharedRunner
}

// newTestRuntime is a runtime as the wasm driver makes one: WASI instantiated, memory pages
// capped (0: wazero's default), and no WithCloseOnContextDone (see the package doc).
func newTestRuntime(ctx context.Context, pages uint32) wazero.Runtime {
	cfg := wazero.NewRuntimeConfig()
	if pages > 0 {
		cfg = cfg.WithMemoryLimitPages(pages)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	return rt
}

func mustReadWasm(t testing.TB) []byte {
	t.Helper()
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Skipf("quickjs.wasm not installed (%v): run scripts/wasm/fetch-quickjs.sh", err)
	}
	return wasm
}

type runOut struct {
	Result
	err            error
	stdout, stderr string
}

// run runs node with args in dir (mounted from a temp dir at /work unless fs is given).
func run(t testing.TB, r *Runner, cfg Config) runOut {
	t.Helper()
	var out, errb bytes.Buffer
	if cfg.Stdout == nil {
		cfg.Stdout = &out
	}
	if cfg.Stderr == nil {
		cfg.Stderr = &errb
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.Run(ctx, cfg)
	return runOut{Result: res, err: err, stdout: out.String(), stderr: errb.String()}
}

func tempMount(t testing.TB) (testMounts, string) {
	dir := t.TempDir()
	return testMounts{"/work": sysfs.DirFS(dir), "/tmp": sysfs.DirFS(t.TempDir())}, dir
}
