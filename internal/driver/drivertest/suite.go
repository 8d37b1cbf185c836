// Package drivertest is the conformance suite every isolation level passes: each test does the
// bad thing inside a sandbox (memory bomb, fork bomb, disk fill, reading host files, blocked
// syscalls, escaping the timeout) and checks that it fails and the host is fine. A level runs it
// from its own test with Run; a level that cannot express a test skips it by name, with a reason.
// The cases' commands are written in POSIX shell and, where a case can say the same in it, in
// Python, for levels that have an interpreter but no shell (Options.Lang, dialect.go).
package drivertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Options adapts the suite to a level.
type Options struct {
	// Skip names tests the level cannot run, each with the reason printed in the test log. A name
	// "Case/part" skips one part of a case only (its parts are the subtests it runs, such as
	// "ExitCodes/killed by signal" or "Streams/signals").
	Skip map[string]string
	// Lang is the dialect the cases' commands are written in: "" (LangShell, the default) is
	// POSIX shell, run as /bin/sh -c, with the usual commands beside it; "python" (LangPython) is
	// Python 3, run as python3 -c, for levels without a shell. A case with no form in the level's
	// dialect fails unless Skip names it.
	Lang string
	// Leaks returns the host resources the level's sandboxes still hold (processes, mounts,
	// cgroups, ...). The suite calls it after tearing sandboxes down and expects nothing.
	Leaks func() []string
	// OwnKernel says the level's sandboxes run a kernel of their own (gVisor): the host's memory
	// cgroup charges that kernel for everything, so a memory bomb that allocates faster than
	// init's kill at the sandbox's limit can meet the host's limit (with its headroom), whose
	// OOM kill ends the whole sandbox. The bomb still fails and the host is fine; the sandbox
	// may not survive it.
	OwnKernel bool
	// Slowdown multiplies the deadlines of the calls the cases make through Harness.Exec (1 when
	// 0): a level on a software CPU (a VM under TCG) runs every command several times slower.
	// The limits the cases test (a command's own timeout, sizes, counts) stay as they are.
	Slowdown float64
}

// Case is one conformance test.
type Case struct {
	Name string
	Run  func(t *testing.T, h *Harness)
	// Python says the case has a Python form (Options.Lang "python"); every case has a shell form.
	Python bool
}

// Harness gives a test sandboxes from the driver under test and cleans them up.
type Harness struct {
	D    driver.Driver
	opts Options
	name string // the case running: for messages, and the skips of its parts
}

// Run runs every case against d.
func Run(t *testing.T, d driver.Driver, opts Options) {
	if c := d.Capabilities(); !c.Available {
		t.Skipf("level %s unavailable on this host: %s", c.Level, c.Reason)
	}
	if opts.Lang != LangShell && opts.Lang != LangPython {
		t.Fatalf("Options.Lang %q: want %q (shell) or %q", opts.Lang, LangShell, LangPython)
	}
	for _, c := range Cases() {
		h := &Harness{D: d, opts: opts, name: c.Name}
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := opts.Skip[c.Name]; ok {
				t.Skipf("level %s cannot run this: %s", d.Name(), why)
			}
			if opts.Lang == LangPython && !c.Python {
				t.Fatalf("case %s has no python form; give it one or name a skip", c.Name)
			}
			// Registered first, so it runs last: after every sandbox of the case is destroyed.
			t.Cleanup(func() { h.CheckLeaks(t) })
			c.Run(t, h)
		})
	}
}

// New creates a sandbox with spec (defaulted and validated) and destroys it when t ends.
func (h *Harness) New(t *testing.T, spec sandbox.Spec) driver.Sandbox {
	t.Helper()
	sb, err := h.TryNew(t, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return sb
}

// TryNew is New for a create that may be refused: it returns the level's error.
func (h *Harness) TryNew(t *testing.T, spec sandbox.Spec) (driver.Sandbox, error) {
	t.Helper()
	spec.Isolation = h.D.Name()
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := h.D.Create(ctx, sandbox.NewID("sbx_"), spec)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { Destroy(context.Background(), t, sb) })
	return sb, nil
}

// Exec runs a shell command with a timeout and captured output.
func Exec(t *testing.T, sb driver.Sandbox, timeout time.Duration, script string) sandbox.ExecResult {
	t.Helper()
	return ExecReq(t, sb, timeout, sandbox.ExecRequest{Command: []string{"/bin/sh", "-c", script}})
}

// ExecReq runs req (ID and capture filled in) with a timeout.
func ExecReq(t *testing.T, sb driver.Sandbox, timeout time.Duration, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req.ID = sandbox.NewID("exec_")
	req.Capture = true
	res, err := sb.Exec(ctx, req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	return res
}

// CheckLeaks fails t if the level reports leftover host resources. Teardown can lag a moment
// behind Destroy (the kernel frees namespaces asynchronously), so it retries briefly.
func (h *Harness) CheckLeaks(t *testing.T) {
	t.Helper()
	if h.opts.Leaks == nil {
		return
	}
	var leaks []string
	for i := 0; i < 50; i++ {
		if leaks = h.opts.Leaks(); len(leaks) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("leaked after teardown: %s", strings.Join(leaks, "; "))
}

// hasEvent reports whether res carries a limit event of type typ.
func hasEvent(res sandbox.ExecResult, typ string) bool {
	for _, e := range res.LimitEvents {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func expect(t *testing.T, res sandbox.ExecResult, exit int, stdout string) {
	t.Helper()
	if res.ExitCode != exit || (stdout != "" && strings.TrimSpace(res.Stdout) != stdout) {
		t.Fatalf("got exit %d stdout %q stderr %q; want exit %d stdout %q", res.ExitCode, res.Stdout, res.Stderr, exit, stdout)
	}
}

// hostForks checks the host can still start a process (during a fork bomb, say).
func hostForks(t *testing.T) {
	t.Helper()
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Fatalf("host cannot fork: %v", err)
	}
}

// hostSecret makes a file on the host that no sandbox may read; it returns its path.
func hostSecret(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := dir + "/secret"
	if err := os.WriteFile(p, []byte("host-secret-value"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustContain(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s: %q does not contain %q", what, s, sub)
	}
}

func within(t *testing.T, what string, got, lo, hi float64) {
	t.Helper()
	if got < lo || got > hi {
		t.Fatalf("%s = %.3f, want between %.3f and %.3f", what, got, lo, hi)
	}
}

// Destroy destroys sb for a test, failing t if it cannot: what a sandbox fails to release is a
// leak.
func Destroy(ctx context.Context, t testing.TB, sb driver.Sandbox) {
	t.Helper()
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("destroy %s: %v", sb.ID(), err)
	}
}
