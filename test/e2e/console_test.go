package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/testutil"
)

// chromiumPath is Debian's Chromium, which make deps installs (scripts/setup.sh).
const chromiumPath = "/usr/bin/chromium"

// TestConsole runs the web console's browser suite (web/console/test/console.test.mjs,
// docs/tests.md): Debian's Chromium, headless, driven by playwright-core, signs in, watches and
// drives sandboxes through the console against a real airlock serve with two tenants and an
// admin key; at the end every request the page made must have been an API route with its key.
// Each case saves a screenshot in a directory kept after the test (logged; AIRLOCK_CONSOLE_ARTIFACTS
// chooses it); with AIRLOCK_DOC_SCREENSHOTS=DIR the main views go to DIR too (docs/img: the
// README's). Afterwards nothing of that airlock may be left on the host.
func TestConsole(t *testing.T) {
	testutil.RequiresRoot(t, "the console's suite makes sandboxes")
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(root, "web", "console")
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the console's suite needs Debian's chromium (make deps installs it): %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("the console's suite needs Node.js: %v", err)
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("the console's suite needs its npm packages (make console installs them): %v", err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	t1, t2, admin := newKey(t, dataDir, "t1"), newKey(t, dataDir, "t2"), newAdminKey(t, dataDir)
	d := startDaemon(t, dataDir)
	resp, err := http.Get(d.url + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/: %d: the binary under test has no console (make console, then build it):\n%s", resp.StatusCode, page)
	}

	artifacts := os.Getenv("AIRLOCK_CONSOLE_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(os.TempDir(), "airlock-console", time.Now().Format("20060102-150405"))
	}
	t.Logf("screenshots and the page's requests: %s", artifacts)
	env := append(append([]string{}, runEnv...), "AIRLOCK_URL="+d.url, "AIRLOCK_KEY="+t1, "AIRLOCK_KEY_T2="+t2,
		"AIRLOCK_ADMIN_KEY="+admin, "AIRLOCK_ARTIFACTS="+artifacts, "CHROMIUM="+chromiumPath)
	if docs := os.Getenv("AIRLOCK_DOC_SCREENSHOTS"); docs != "" {
		if !filepath.IsAbs(docs) {
			docs = filepath.Join(root, docs)
		}
		env = append(env, "AIRLOCK_DOC_SCREENSHOTS="+docs)
	}
	ctx, cancel := context.WithTimeout(bg(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "test/console.test.mjs")
	cmd.Dir = web
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the console's suite (node --test in web/console): %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if left := append(instanceLeaks(dataDir), runSockets(dataDir)...); len(left) > 0 {
		t.Errorf("the console's suite left behind: %s", strings.Join(left, "; "))
	}
}
