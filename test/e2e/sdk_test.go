package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/testutil"
)

// TestSDKs runs each SDK's own suite (docs/tests.md) — the TypeScript SDK's `npm test`, the Python
// SDK's unittest — against a real airlock serve that the suite starts, with this binary, on a
// data dir this test gives it; the two run in parallel. Afterwards nothing of that airlock may be
// left on the host. The suites build on what `make sdk` installed (sdk/typescript/node_modules).
func TestSDKs(t *testing.T) {
	testutil.RequiresRoot(t, "the SDKs' suites make sandboxes")
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name, dir string
		argv      []string
	}{
		{"typescript", "sdk/typescript", []string{"npm", "test", "--silent"}},
		{"python", "sdk/python", []string{"python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."}},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(s.argv[0]); err != nil {
				t.Fatalf("%s is needed for the %s SDK's suite (make deps installs it): %v", s.argv[0], s.name, err)
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			addInstance(dataDir)
			ctx, cancel := context.WithTimeout(bg(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
			cmd.Dir = filepath.Join(root, s.dir)
			cmd.Env = append(append([]string{}, runEnv...), "AIRLOCK_BIN="+airlockBin, "AIRLOCK_TEST_DATA_DIR="+dataDir,
				testutil.RequireRootEnv+"=1", "HOME="+os.Getenv("HOME"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s (in %s): %v\n%s", strings.Join(s.argv, " "), s.dir, err, out)
			}
			if testing.Verbose() {
				t.Logf("%s", out)
			}
			if left := append(instanceLeaks(dataDir), runSockets(dataDir)...); len(left) > 0 {
				t.Errorf("the %s SDK's suite left behind: %s", s.name, strings.Join(left, "; "))
			}
		})
	}
}
