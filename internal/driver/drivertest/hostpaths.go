package drivertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// HostPaths makes host paths for a level's test of the operator's hostTemplate.paths: a directory
// and a file under /usr/local (which the host template hides) and a directory under /opt, each
// holding "host-path-value"; they are removed when t ends. A level configured with them is then
// checked with CheckHostPaths.
func HostPaths(t testing.TB) []string {
	t.Helper()
	var paths []string
	for _, parent := range []string{"/usr/local", "/opt"} {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp(parent, "airlock-hostpath-*")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "value"), []byte("host-path-value"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, dir)
	}
	return append(paths, usrLocalFile(t, "airlock-hostpath-*", "host-path-value"))
}

// usrLocalFile makes a file every host user may read in the host's /usr/local, named after
// pattern (os.CreateTemp's), holding content, and removed when t ends; it returns its path.
func usrLocalFile(t testing.TB, pattern, content string) string {
	t.Helper()
	f, err := os.CreateTemp("/usr/local", pattern)
	if err != nil {
		t.Fatalf("a host file in /usr/local: %v", err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		t.Fatalf("a host file in /usr/local: %v", err)
	}
	return f.Name()
}

// CheckHostPaths checks, in a sandbox of d from the host template, that every path of HostPaths
// (which d's configuration lists) reads as it does on the host, read-only, and that nothing else
// of the host's /usr/local is there.
func CheckHostPaths(t *testing.T, d driver.Driver, paths []string) {
	t.Helper()
	h := &Harness{D: d, name: "HostPaths"}
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	var script strings.Builder
	want := map[string]bool{}
	for _, p := range paths {
		v := p
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			v = p + "/value"
		}
		script.WriteString("cat " + v + "; echo; (echo x > " + v + ") 2>/dev/null && echo writable " + v + "; ")
		want[filepath.Base(p)] = strings.HasPrefix(p, "/usr/local/")
	}
	script.WriteString("ls -A /usr/local")
	res := Exec(t, sb, 10*time.Second, script.String())
	if res.ExitCode != 0 || strings.Count(res.Stdout, "host-path-value") != len(paths) || strings.Contains(res.Stdout, "writable") {
		t.Fatalf("host paths: exit %d stdout %q stderr %q; want each one's value, read-only", res.ExitCode, res.Stdout, res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	var listed []string
	for _, l := range lines[len(paths):] {
		listed = append(listed, strings.Fields(l)...)
	}
	for _, name := range listed {
		if !want[name] {
			t.Errorf("/usr/local in the sandbox has %q, which no host path names", name)
		}
	}
	for name, under := range want {
		if under && !strings.Contains(" "+strings.Join(listed, " ")+" ", " "+name+" ") {
			t.Errorf("/usr/local in the sandbox lacks %q: %q", name, listed)
		}
	}
}
