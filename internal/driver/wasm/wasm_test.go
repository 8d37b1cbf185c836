package wasm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/pid1"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/testutil"
)

// cacheDir is the compilation cache the package's drivers share, as the airlocks of one host do:
// only the first compiles the interpreters.
var cacheDir string

func TestMain(m *testing.M) {
	// This test binary is also every jail's init and every worker (the process level re-executes
	// /proc/self/exe as init; the worker binary is this executable).
	if pid1.IsInit() {
		pid1.Run()
	}
	if wasm.IsWorker() {
		wasm.Worker()
	}
	dir, err := os.MkdirTemp("", "airlock-wasm-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newDriver returns the wasm level on a state directory of the test's, with the interpreters make
// wasm-runtimes installed. They are part of `make test`'s setup, so their absence fails the test.
func newDriver(t testing.TB) (*wasm.Driver, string) {
	return newDriverWith(t, nil)
}

// newDriverWith is newDriver with changes to the configuration.
func newDriverWith(t testing.TB, change func(*wasm.Config)) (*wasm.Driver, string) {
	t.Helper()
	testutil.RequiresRoot(t, "the wasm level runs its workers in process-level jails")
	state := t.TempDir()
	cfg := wasm.Config{StateDir: state, CacheDir: cacheDir}
	if change != nil {
		change(&cfg)
	}
	d := wasm.New(cfg, newProcess(t, state), testLog())
	c := d.Capabilities()
	if !c.Available || len(c.Features) < 3 {
		t.Fatalf("wasm level without both interpreters (run make wasm-runtimes): %s %+v", c.Reason, c.Checks)
	}
	t.Cleanup(func() {
		if left := d.Leftovers(); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	return d, state
}

func testLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newProcess is the process level the wasm level makes its jails with: a cgroup parent and uid
// range of this test binary's, adoptable sandboxes (as the daemon's), state under state.
func newProcess(t testing.TB, state string) wasm.Jails {
	return drivertest.ProcessLevel(t, drivertest.ProcessOptions{
		CgroupParent: fmt.Sprintf("airlock-test-wasm-%d", os.Getpid()),
		StateDir:     filepath.Join(state, "process"),
		UIDBase:      2_150_000_000,
		OrphanGrace:  20 * time.Second,
		Log:          testLog().With("level", "process"),
	})
}

func newSandbox(t testing.TB, d driver.Driver, spec sandbox.Spec) driver.Sandbox {
	t.Helper()
	spec.Isolation = sandbox.LevelWasm
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		t.Fatal(err)
	}
	sb, err := d.Create(context.Background(), sandbox.NewID("sbx_"), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { drivertest.Destroy(context.Background(), t, sb) })
	return sb
}

func run(t *testing.T, sb driver.Sandbox, timeout time.Duration, argv ...string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: argv, Capture: true})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	return res
}

func hasEvent(res sandbox.ExecResult, typ string) bool {
	for _, e := range res.LimitEvents {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func TestConformance(t *testing.T) {
	d, _ := newDriver(t)
	const noKernel = "the wasm level has no kernel processes: "
	drivertest.Run(t, d, drivertest.Options{
		Lang: drivertest.LangPython,
		Skip: map[string]string{
			"Users":                      "WASI has no users, ids or capabilities; the guest runs in a worker jailed as the sandbox's user (TestWorkerJailed)",
			"HostUnprivileged":           "WASI has no /proc to read a uid map from: TestWorkerJailed checks the worker's host ids, capabilities and seccomp",
			"InitSurvivesSignals":        noKernel + "there is no init to signal",
			"SetuidGrantsNothing":        "WASI has no setuid bits or exec",
			"BlockedSyscalls":            "WASI has no system calls: the module's imports, which airlock implements, are its whole surface",
			"TTY":                        "WASI has no terminals",
			"PauseResume":                noKernel + "no freezer can stop a module between instructions",
			"CPUQuota":                   "the jail's cgroup throttles the worker, but a wasm exec's result has no limit.cpu event from it",
			"NetworkRestricted":          "the wasm level has no network: egressPolicy other than none is refused (TestEgressRefused)",
			"SnapshotMemory":             "nothing runs between commands, so there is no memory to save",
			"SnapshotPrepared":           "nothing runs between commands, so there is no memory image to restore into a prepared sandbox",
			"ExitCodes/killed by signal": "WASI has no signals (no os.kill); a signal sent to an exec ends it with 128+n (Streams)",
			"Streams/signals":            "WASI has no signal handlers: a signal sent to an exec ends it with 128+n",
			"DiskFill":                   "wazero's WASI errno set has no ENOSPC: a full store fails writes with EIO (TestFilesystem checks the cap and limit.disk)",
			"OpenFiles":                  "wazero's WASI errno set has no EMFILE: past maxOpenFiles an open fails with EAGAIN (TestConfinedFS)",
			"FileRoot":                   "the case makes a symlink in the sandbox, which the wasm level refuses (fs.go); e2e TestWasm uses the files API",
			"Snapshot":                   "the case makes a symlink in the sandbox, which the wasm level refuses (fs.go); e2e TestWasm snapshots and restores",
			"UsrLocalHidden":             "no host template: /usr/local is the level's own, its interpreters' library at /usr/local/lib (fs.go); no host directory is mounted unless a spec binds it",
		},
		Leaks: d.Leftovers,
	})
}

// TestLanguages: print and compute in both languages, in every command form the level documents.
func TestLanguages(t *testing.T) {
	d, _ := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{Environment: map[string]string{"WHO": "agent"}})
	run(t, sb, 30*time.Second, "python3", "-c", "open('/workspace/s.py','w').write('import sys; print(sum(range(int(sys.argv[1]))))')")
	run(t, sb, 30*time.Second, "python3", "-c", "open('/workspace/s.js','w').write('console.log(process.argv.slice(2).map(Number).reduce((a,b)=>a*b))')")
	for _, c := range []struct {
		name string
		argv []string
		want string
	}{
		{"python -c", []string{"python3", "-c", "import math, json; print(json.dumps({'pi': round(math.pi, 3)}))"}, `{"pi": 3.142}`},
		{"python file", []string{"python3", "s.py", "101"}, "5050"},
		{"python path", []string{"/usr/bin/python3", "/workspace/s.py", "11"}, "55"},
		{"python env and cwd", []string{"python3", "-c", "import os; print(os.environ['WHO'], os.getcwd())"}, "agent /workspace"},
		{"node -e", []string{"node", "-e", "console.log([1,2,3].map(x => x * 2).join(','))"}, "2,4,6"},
		{"node file", []string{"node", "s.js", "6", "7"}, "42"},
		{"node env", []string{"node", "-e", "console.log(process.env.WHO)"}, "agent"},
		{"sh -c simple", []string{"/bin/sh", "-c", `python3 -c "print('via sh')"`}, "via sh"},
		{"sh -c assignment", []string{"/bin/sh", "-c", `WHO=x node -e 'console.log(process.env.WHO)'`}, "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, sb, 30*time.Second, c.argv...)
			if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != c.want {
				t.Fatalf("exit %d stdout %q stderr %q, want %q", res.ExitCode, res.Stdout, res.Stderr, c.want)
			}
		})
	}
	for _, c := range []struct {
		name string
		argv []string
		exit int
		msg  string
	}{
		{"not an interpreter", []string{"ls", "/"}, 127, "command not found"},
		{"shell syntax", []string{"/bin/sh", "-c", "python3 -c 1 | cat"}, 2, "no shell"},
		{"python error", []string{"python3", "-c", "raise SystemExit(7)"}, 7, ""},
		{"python exception", []string{"python3", "-c", "1/0"}, 1, "ZeroDivisionError"},
		{"node throw", []string{"node", "-e", "throw new Error('boom')"}, 1, "boom"},
		{"node exit", []string{"node", "-e", "process.exit(3)"}, 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, sb, 30*time.Second, c.argv...)
			if res.ExitCode != c.exit || !strings.Contains(res.Stderr, c.msg) {
				t.Fatalf("exit %d stderr %q, want %d and %q", res.ExitCode, res.Stderr, c.exit, c.msg)
			}
		})
	}
}

// TestLimits: an endless loop ends at the timeout, a memory bomb at the cap, in both languages.
func TestLimits(t *testing.T) {
	d, _ := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 64}})
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"python", []string{"python3", "-c", "while True: pass"}},
		{"node", []string{"node", "-e", "for(;;){}"}},
		{"python sleep", []string{"python3", "-c", "import time; time.sleep(3600)"}},
		{"node timer", []string{"node", "-e", "setTimeout(() => {}, 3600e3)"}},
	} {
		t.Run("timeout "+c.name, func(t *testing.T) {
			t0 := time.Now()
			res := run(t, sb, time.Second, c.argv...)
			if !res.TimedOut || res.ExitCode != sandbox.ExitTimeout || !hasEvent(res, sandbox.EventLimitTimeout) {
				t.Fatalf("result %+v", res)
			}
			if took := time.Since(t0); took > 3*time.Second {
				t.Fatalf("stopped after %v", took)
			}
		})
	}
	for _, c := range []struct {
		name, msg string
		argv      []string
	}{
		{"python big", "MemoryError", []string{"python3", "-c", "bytearray(1 << 30)"}},
		{"python growing", "MemoryError", []string{"python3", "-c", "a = []\nwhile True: a.append(bytearray(1 << 20))"}},
		{"node", "out of memory", []string{"node", "-e", "let a=[]; for(;;) a.push(new Array(1e6).fill(1))"}},
	} {
		t.Run("memory "+c.name, func(t *testing.T) {
			res := run(t, sb, 60*time.Second, c.argv...)
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, c.msg) || !hasEvent(res, sandbox.EventLimitMemory) {
				t.Fatalf("exit %d stderr %q events %+v", res.ExitCode, tail(res.Stderr), res.LimitEvents)
			}
			if res.ResourceUsage.PeakMemoryMB > 64 {
				t.Fatalf("peak %.1f MiB past the 64 MiB cap", res.ResourceUsage.PeakMemoryMB)
			}
		})
	}
	// The sandbox is fine afterwards.
	if res := run(t, sb, 30*time.Second, "python3", "-c", "print(2 + 2)"); strings.TrimSpace(res.Stdout) != "4" {
		t.Fatalf("after the bombs: %+v", res)
	}
}

func tail(s string) string {
	if len(s) > 400 {
		return "…" + s[len(s)-400:]
	}
	return s
}

// TestFilesystem: files persist between execs and languages, stay in the sandbox's store, and
// nothing of the host is reachable: not by path, "..", a symlink the guest makes, nor one planted
// in the store.
func TestFilesystem(t *testing.T) {
	d, _ := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{Resources: sandbox.Resources{DiskMB: 8}})
	store := guestRoot(t, sb)

	run(t, sb, 30*time.Second, "python3", "-c", "open('notes.txt','w').write('kept')")
	if b, err := os.ReadFile(filepath.Join(store, "workspace", "notes.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("the file is not in the store: %q %v", b, err)
	}
	if res := run(t, sb, 30*time.Second, "node", "-e", "console.log(require('fs').readFileSync('/workspace/notes.txt','utf8'))"); strings.TrimSpace(res.Stdout) != "kept" {
		t.Fatalf("node does not see python's file: %+v", res)
	}
	plant(t, sb, "/etc/passwd", "/workspace/planted")
	script := pyTried + `
import os
tried("read /etc/passwd", lambda: open("/etc/passwd").read())
tried("read ../../..", lambda: open("../../../../../../etc/passwd").read())
tried("make symlink", lambda: os.symlink("/etc/passwd", "/workspace/link"))
tried("follow planted", lambda: open("/workspace/planted").read())
tried("write /usr", lambda: open("/usr/evil", "w").write("x"))
tried("write /", lambda: open("/evil", "w").write("x"))
tried("write stdlib", lambda: open("/usr/local/lib/python3.11/os.py", "a").write("x"))
tried("list /proc", lambda: os.listdir("/proc"))
tried("fill disk", lambda: open("/tmp/big", "wb").write(b"x" * (16 << 20)))
print(sorted(os.listdir("/")))
`
	res := run(t, sb, 60*time.Second, "python3", "-c", script)
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if strings.Contains(line, "ALLOWED") {
			t.Errorf("%s", line)
		}
	}
	if !strings.Contains(res.Stdout, "['home', 'tmp', 'usr', 'workspace']") {
		t.Errorf("guest root: %q (stderr %q)", res.Stdout, tail(res.Stderr))
	}
	if !hasEvent(res, sandbox.EventLimitDisk) {
		t.Errorf("no %s event after filling the store: %+v", sandbox.EventLimitDisk, res.LimitEvents)
	}
	for _, p := range []string{"/usr/evil", "/evil"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
}

// pyTried defines tried(what, f): it prints what with "ALLOWED" when f succeeds, and with
// "refused" and the exception's type when f raises.
const pyTried = `
def tried(what, f):
    try:
        f()
        print(what, "ALLOWED")
    except Exception as e:
        print(what, "refused", type(e).__name__)
`

// TestNoProcessesNoNetwork: sockets, subprocesses and node's network and process modules fail.
func TestNoProcessesNoNetwork(t *testing.T) {
	d, _ := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{})
	script := pyTried + `
import os, socket, subprocess
tried("socket", lambda: socket.create_connection(("127.0.0.1", 22), timeout=1))
tried("subprocess", lambda: subprocess.run(["ls"]))
tried("os.system", lambda: os.system("ls") == 0 or (_ for _ in ()).throw(OSError()))
tried("fork", lambda: os.fork())
`
	res := run(t, sb, 30*time.Second, "python3", "-c", script)
	if res.ExitCode != 0 || strings.Count(res.Stdout, "refused") != 4 {
		t.Fatalf("python: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, tail(res.Stderr))
	}
	for _, mod := range []string{"child_process", "net", "http", "dgram"} {
		res := run(t, sb, 30*time.Second, "node", "-e", fmt.Sprintf("require(%q)", mod))
		if res.ExitCode == 0 {
			t.Errorf("node require(%q) worked: %+v", mod, res)
		}
	}
}

// TestEgressRefused: the level has no network, and says so with a 422 naming it.
func TestEgressRefused(t *testing.T) {
	d, _ := newDriver(t)
	for _, policy := range []string{sandbox.EgressRestricted, sandbox.EgressOpen} {
		spec := sandbox.Spec{Isolation: sandbox.LevelWasm, Network: sandbox.Network{EgressPolicy: policy, AllowedDomains: []string{"example.com"}}}
		sandbox.SetDefaults(&spec)
		_, err := d.Create(context.Background(), sandbox.NewID("sbx_"), spec)
		var fe *errdefs.FieldError
		if !errors.Is(err, errdefs.ErrUnavailable) || !errors.As(err, &fe) || fe.Field != "network.egressPolicy" || !strings.Contains(err.Error(), "wasm") {
			t.Errorf("%s: %v", policy, err)
		}
	}
}

// TestManyConcurrent: 50 sandboxes, each running both languages at once.
func TestManyConcurrent(t *testing.T) {
	d, _ := newDriver(t)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := sandbox.Spec{Isolation: sandbox.LevelWasm, Environment: map[string]string{"N": fmt.Sprint(i)}}
			sandbox.SetDefaults(&spec)
			sb, err := d.Create(context.Background(), sandbox.NewID("sbx_"), spec)
			if err != nil {
				errs <- err
				return
			}
			defer drivertest.Destroy(context.Background(), t, sb)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, argv := range [][]string{
				{"python3", "-c", "import os; open('n','w').write(os.environ['N']); print(int(os.environ['N']) * 2)"},
				{"node", "-e", "console.log(Number(require('fs').readFileSync('n','utf8')) * 2)"},
			} {
				res, err := sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: argv, Capture: true})
				if err != nil || strings.TrimSpace(res.Stdout) != fmt.Sprint(i*2) {
					errs <- errors.Join(fmt.Errorf("sandbox %d %s: %+v", i, argv[0], res), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAdopt: a wasm sandbox is its jail; a later airlock on the same state directory takes it
// over with its files, and one whose jail is gone is refused.
func TestAdopt(t *testing.T) {
	d, state := newDriver(t)
	spec := sandbox.Spec{Isolation: sandbox.LevelWasm}
	sandbox.SetDefaults(&spec)
	sb, err := d.Create(context.Background(), sandbox.NewID("sbx_"), spec)
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, 30*time.Second, "python3", "-c", "open('/workspace/a','w').write('before')")
	facts := sb.(driver.HostFacter).HostFacts()
	sb.(*wasm.Sandbox).Abandon() // the daemon dies
	<-sb.(*wasm.Sandbox).Done()
	time.Sleep(300 * time.Millisecond) // init notices, and keeps the sandbox

	later := wasm.New(wasm.Config{StateDir: state, CacheDir: cacheDir}, newProcess(t, state), slog.New(slog.DiscardHandler))
	adopted, err := later.Adopt(context.Background(), sb.ID(), spec, facts)
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if res := run(t, adopted, 30*time.Second, "python3", "-c", "print(open('/workspace/a').read())"); strings.TrimSpace(res.Stdout) != "before" {
		t.Fatalf("adopted: %+v", res)
	}
	if err := adopted.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := later.Adopt(context.Background(), sb.ID(), spec, facts); err == nil {
		t.Fatal("adopted a sandbox whose jail is gone")
	}
}

// guestRoot is the guest's "/" as the host reaches it, through the files API's root.
func guestRoot(t *testing.T, sb driver.Sandbox) string {
	t.Helper()
	root, _, _, err := sb.(driver.FileRooter).FileRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return fmt.Sprintf("/proc/self/fd/%d", root.Fd())
}

// plant makes a symlink at the guest path at to target, from inside the sandbox's jail (as its
// user), where the guest itself could not make one.
func plant(t *testing.T, sb driver.Sandbox, target, at string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sb.(*wasm.Sandbox).Jail().Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"),
		Command: []string{"/bin/ln", "-s", target, "/.wasm/root" + at}, Capture: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("plant %s → %s: %v %+v", at, target, err, res)
	}
}
