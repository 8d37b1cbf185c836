package landlock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// Environment variables used to turn a re-executed test binary into the
// helper process; the sandbox must be applied in a fresh process because a
// Landlock domain can never be removed again.
const (
	envHelper = "AIRLOCK_LANDLOCK_HELPER" // helper mode: "fs" or "scope"
	envDirA   = "AIRLOCK_LANDLOCK_DIR_A"  // read-only directory
	envDirB   = "AIRLOCK_LANDLOCK_DIR_B"  // writable directory
	envParent = "AIRLOCK_LANDLOCK_PARENT" // pid outside the domain

	// checkPrefix marks helper output lines the parent parses.
	checkPrefix = "LANDLOCK-CHECK"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// requireLandlock skips the test, loudly, when the kernel cannot enforce
// Landlock.
func requireLandlock(t *testing.T) int {
	t.Helper()
	abi, err := ABI()
	if err != nil {
		t.Skipf("SKIPPING: Landlock not available on this kernel: %v", err)
	}
	return abi
}

func TestABI(t *testing.T) {
	abi, err := ABI()
	if err != nil {
		t.Fatalf("ABI() = %d, %v; want a Landlock-enabled kernel", abi, err)
	}
	if abi <= 0 {
		t.Fatalf("ABI() = %d with nil error", abi)
	}
	t.Logf("kernel Landlock ABI version %d (rights handled: %#x)", abi, fsRights(abi))
}

func TestUnavailableError(t *testing.T) {
	tests := []struct {
		errno unix.Errno
		want  string
	}{
		{unix.ENOSYS, "CONFIG_SECURITY_LANDLOCK"},
		{unix.EOPNOTSUPP, "disabled at boot"},
		{unix.EINVAL, "querying ABI version"},
	}
	for _, tt := range tests {
		t.Run(tt.errno.Error(), func(t *testing.T) {
			err := unavailableError(tt.errno)
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%v does not wrap ErrUnavailable", err)
			}
			if !errors.Is(err, tt.errno) {
				t.Errorf("%v does not wrap %v", err, tt.errno)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestFSRights(t *testing.T) {
	tests := []struct {
		abi  int
		want uint64
	}{
		{0, 0},
		{1, 0x1fff},
		{2, 0x3fff},
		{3, 0x7fff},
		{4, 0x7fff},
		{5, 0xffff},
		{7, 0xffff},
		{8, 0xffff},
		{9, 0x1ffff},
		{42, 0x1ffff}, // future ABIs are capped at what this package knows
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("abi", tt.abi), func(t *testing.T) {
			if got := fsRights(tt.abi); got != tt.want {
				t.Errorf("fsRights(%d) = %#x, want %#x", tt.abi, got, tt.want)
			}
		})
	}
}

func TestScopeRights(t *testing.T) {
	both := Options{ScopeSignals: true, ScopeAbstractUnix: true}
	tests := []struct {
		name string
		abi  int
		opts Options
		want uint64
	}{
		{"default", 7, Options{}, 0},
		{"signals", 6, Options{ScopeSignals: true}, unix.LANDLOCK_SCOPE_SIGNAL},
		{"abstract", 6, Options{ScopeAbstractUnix: true}, unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{"both", 7, both, unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{"dropped before ABI 6", 5, both, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scopeRights(tt.abi, tt.opts); got != tt.want {
				t.Errorf("scopeRights(%d, %+v) = %#x, want %#x", tt.abi, tt.opts, got, tt.want)
			}
		})
	}
}

func TestRuleAccess(t *testing.T) {
	const (
		read  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_EXECUTE
		fileR = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_EXECUTE
	)
	tests := []struct {
		name    string
		write   bool
		isDir   bool
		handled uint64
		want    uint64
	}{
		{"read dir", false, true, fsRightsV5, read},
		{"read file drops READ_DIR", false, false, fsRightsV5, fileR},
		{"write dir gets everything handled", true, true, fsRightsV5, fsRightsV5},
		{"write dir ABI1 has no REFER", true, true, fsRightsV1, fsRightsV1},
		{"write file ABI5", true, false, fsRightsV5, fileR | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
			unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{"write file ABI1", true, false, fsRightsV1, fileR | unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{"write dir ABI9", true, true, fsRightsV9, fsRightsV9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ruleAccess(tt.write, tt.isDir, tt.handled)
			if got != tt.want {
				t.Errorf("ruleAccess(%v, %v, %#x) = %#x, want %#x", tt.write, tt.isDir, tt.handled, got, tt.want)
			}
			if got&^tt.handled != 0 {
				t.Errorf("access %#x exceeds handled %#x", got, tt.handled)
			}
		})
	}
}

// TestOpenBeneath covers the path handling, including skipping paths that do
// not exist; it needs no Landlock support.
func TestOpenBeneath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantOK  bool
		wantDir bool
		wantErr bool
	}{
		{"directory", dir, true, true, false},
		{"regular file", file, true, false, false},
		{"symlink to directory is followed", link, true, true, false},
		{"missing", filepath.Join(dir, "missing"), false, false, false},
		{"missing parent", filepath.Join(dir, "missing", "child"), false, false, false},
		{"below a regular file", filepath.Join(file, "child"), false, false, false},
		{"relative", "relative/path", false, false, true},
		{"empty", "", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd, isDir, ok, err := openBeneath(tt.path)
			if ok {
				defer unix.Close(fd)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("openBeneath(%q) error = %v, wantErr %v", tt.path, err, tt.wantErr)
			}
			if ok != tt.wantOK || isDir != tt.wantDir {
				t.Errorf("openBeneath(%q) = ok %v dir %v, want ok %v dir %v", tt.path, ok, isDir, tt.wantOK, tt.wantDir)
			}
			if !ok && fd != -1 {
				t.Errorf("openBeneath(%q) returned fd %d with ok=false", tt.path, fd)
			}
		})
	}
}

// TestAddRules exercises landlock_add_rule against a real ruleset without
// enforcing it, so it is harmless to the test process. It checks that
// missing paths are skipped and that a regular-file path (even a writable
// one) does not trip the kernel's EINVAL for directory-only rights.
func TestAddRules(t *testing.T) {
	abi := requireLandlock(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		rules []Rule
		want  int
	}{
		{"none", nil, 0},
		{"missing path skipped", []Rule{{Path: filepath.Join(dir, "missing")}}, 0},
		{"missing among present", []Rule{{Path: dir}, {Path: "/nonexistent/airlock"}, {Path: dir, Write: true}}, 2},
		{"read file", []Rule{{Path: "/etc/ld.so.cache"}}, 1},
		{"write file", []Rule{{Path: file, Write: true}}, 1},
		{"write device", []Rule{{Path: "/dev/null", Write: true}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd, err := createRuleset(fsRights(abi), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			got, err := addRules(fd, tt.rules, fsRights(abi))
			if err != nil {
				t.Fatalf("addRules: %v", err)
			}
			if got != tt.want {
				t.Errorf("addRules added %d rules, want %d", got, tt.want)
			}
		})
	}
}

func TestCreateRulesetWithScopes(t *testing.T) {
	abi := requireLandlock(t)
	if abi < scopeABI {
		t.Skipf("SKIPPING: ABI %d has no scoping", abi)
	}
	fd, err := createRuleset(fsRights(abi), scopeRights(abi, Options{ScopeSignals: true, ScopeAbstractUnix: true}))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

// runHelper re-executes the test binary in helper mode and returns the
// results of the named checks it printed.
func runHelper(t *testing.T, mode string, env ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{envHelper + "=" + mode}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("helper output:\n%s%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("helper process failed: %v", err)
	}
	results := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		name, result, ok := strings.Cut(strings.TrimPrefix(sc.Text(), checkPrefix+" "), "\t")
		if ok && strings.HasPrefix(sc.Text(), checkPrefix) {
			results[name] = result
		}
	}
	return results
}

// TestEnforcement applies a real ruleset in a child process and checks,
// from the restricted thread, that the granted and denied accesses behave
// as documented, including across execve.
func TestEnforcement(t *testing.T) {
	requireLandlock(t)
	a, b := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(a, "file"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile("/etc/hostname"); err != nil {
		t.Skipf("SKIPPING: /etc/hostname is needed as a denied-read target: %v", err)
	}
	results := runHelper(t, "fs", envDirA+"="+a, envDirB+"="+b)
	for _, name := range fsCheckNames() {
		t.Run(name, func(t *testing.T) {
			switch got, ok := results[name]; {
			case !ok:
				t.Errorf("helper did not run check %q", name)
			case got != "ok":
				t.Errorf("%s", got)
			}
		})
	}
}

// TestScopeSignals checks that Options.ScopeSignals is actually applied.
func TestScopeSignals(t *testing.T) {
	if abi := requireLandlock(t); abi < scopeABI {
		t.Skipf("SKIPPING: ABI %d has no signal scoping", abi)
	}
	results := runHelper(t, "scope", fmt.Sprint(envParent, "=", os.Getpid()))
	if got := results["signal parent denied"]; got != "ok" {
		t.Errorf("signal parent denied: %q", got)
	}
}

// fsCheck is one access attempt made from inside the sandbox.
type fsCheck struct {
	name string
	run  func(a, b string) error // returns nil when behaviour is as expected
}

func fsChecks() []fsCheck {
	return []fsCheck{
		{"read A/file allowed", func(a, _ string) error {
			data, err := os.ReadFile(filepath.Join(a, "file"))
			if err == nil && string(data) != "hello" {
				return fmt.Errorf("read %q", data)
			}
			return err
		}},
		{"list A allowed", func(a, _ string) error {
			_, err := os.ReadDir(a)
			return err
		}},
		{"write A/new denied", func(a, _ string) error {
			return wantErrno(os.WriteFile(filepath.Join(a, "new"), []byte("x"), 0o644), unix.EACCES)
		}},
		{"overwrite A/file denied", func(a, _ string) error {
			return wantErrno(os.WriteFile(filepath.Join(a, "file"), []byte("x"), 0o644), unix.EACCES)
		}},
		{"remove A/file denied", func(a, _ string) error {
			return wantErrno(os.Remove(filepath.Join(a, "file")), unix.EACCES)
		}},
		{"write B/new allowed", func(_, b string) error {
			return os.WriteFile(filepath.Join(b, "new"), []byte("x"), 0o644)
		}},
		{"mkdir and rename across dirs in B allowed", func(_, b string) error {
			if err := os.Mkdir(filepath.Join(b, "sub"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(b, "moved"), nil, 0o644); err != nil {
				return err
			}
			return os.Rename(filepath.Join(b, "moved"), filepath.Join(b, "sub", "moved"))
		}},
		{"read /etc/hostname denied", func(_, _ string) error {
			_, err := os.ReadFile("/etc/hostname")
			return wantErrno(err, unix.EACCES)
		}},
		{"exec cat /etc/hostname denied", func(_, _ string) error {
			out, err := exec.Command("/bin/cat", "/etc/hostname").CombinedOutput()
			if err == nil {
				return fmt.Errorf("cat succeeded: %q", out)
			}
			if !strings.Contains(string(out), "Permission denied") {
				return fmt.Errorf("cat failed for another reason: %w: %q", err, out)
			}
			return nil
		}},
		{"exec ls B allowed", func(_, b string) error {
			out, err := exec.Command("/bin/ls", b).CombinedOutput()
			if err != nil {
				return fmt.Errorf("ls: %w: %q", err, out)
			}
			if !strings.Contains(string(out), "new") {
				return fmt.Errorf("ls output %q lacks new", out)
			}
			return nil
		}},
		{"exec touch in A denied", func(a, _ string) error {
			out, err := exec.Command("/bin/touch", filepath.Join(a, "touched")).CombinedOutput()
			if err == nil {
				return fmt.Errorf("touch succeeded: %q", out)
			}
			if !strings.Contains(string(out), "Permission denied") {
				return fmt.Errorf("touch failed for another reason: %w: %q", err, out)
			}
			return nil
		}},
	}
}

func fsCheckNames() []string {
	var names []string
	for _, c := range fsChecks() {
		names = append(names, c.name)
	}
	return names
}

// wantErrno says how err is not the errno want.
func wantErrno(err error, want unix.Errno) error {
	switch {
	case err == nil:
		return fmt.Errorf("it succeeded, want %s", unix.ErrnoName(want))
	case !errors.Is(err, want):
		return fmt.Errorf("got %w, want %s", err, unix.ErrnoName(want))
	}
	return nil
}

// TestHelperProcess is not a real test: it only does work when re-executed
// by runHelper. Everything runs on one locked goroutine without subtests,
// because Landlock restricts only the calling thread and t.Run would move
// work to other goroutines (and thus possibly unrestricted threads).
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("helper process; runs only when re-executed by other tests")
	}
	// Never unlocked: the runtime then discards the restricted thread
	// when this goroutine exits.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_NO_NEW_PRIVS: %v", err)
	}
	report := func(name string, err error) {
		result := "ok"
		if err != nil {
			result = err.Error()
			t.Errorf("%s: %v", name, err)
		}
		fmt.Printf("%s %s\t%s\n", checkPrefix, name, result)
	}

	switch mode {
	case "fs":
		a, b := os.Getenv(envDirA), os.Getenv(envDirB)
		abi, err := Restrict([]Rule{
			{Path: a},
			{Path: b, Write: true},
			{Path: "/usr"},
			{Path: "/bin"},
			{Path: "/lib"},
			{Path: "/lib64"},
			{Path: "/etc/ld.so.cache"}, // a regular-file rule
			// os/exec opens /dev/null for unset stdio; a
			// character-device rule must also not fail.
			{Path: "/dev/null", Write: true},
			{Path: "/nonexistent/airlock/path"},
		})
		if err != nil {
			t.Fatalf("Restrict: %v", err)
		}
		fmt.Printf("restricted with ABI %d\n", abi)
		for _, c := range fsChecks() {
			report(c.name, c.run(a, b))
		}
	case "scope":
		var parent int
		if _, err := fmt.Sscan(os.Getenv(envParent), &parent); err != nil {
			t.Fatalf("parent pid: %v", err)
		}
		if err := unix.Kill(parent, 0); err != nil {
			t.Fatalf("signalling parent before Restrict: %v", err)
		}
		if _, err := RestrictWith(nil, Options{ScopeSignals: true}); err != nil {
			t.Fatalf("RestrictWith: %v", err)
		}
		if err := wantErrno(unix.Kill(parent, 0), unix.EPERM); err != nil {
			report("signal parent denied", fmt.Errorf("kill(parent, 0): %w", err))
		} else {
			report("signal parent denied", nil)
		}
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
}
