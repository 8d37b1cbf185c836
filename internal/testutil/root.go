// Package testutil holds what the tests of many packages share. It is imported by tests only.
package testutil

import (
	"os"
	"testing"
)

// RequireRootEnv, set to 1, makes RequiresRoot fail a test instead of skipping it: a run meant
// to prove enforcement (make test, CI) must not pass by skipping the sandboxes.
const RequireRootEnv = "AIRLOCK_TEST_REQUIRE_ROOT"

// RequiresRoot skips t, saying why, unless the test runs as root: the tests that make
// namespaces, cgroups, mounts or files of other users cannot run otherwise.
func RequiresRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(RequireRootEnv) == "1" {
		t.Fatalf("needs root (%s), and %s=1 says skipping is not allowed", why, RequireRootEnv)
	}
	t.Skipf("needs root: %s", why)
}
