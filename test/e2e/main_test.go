package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/testutil"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

var (
	airlockBin string   // the binary under test
	runEnv     []string // environment every airlock invocation gets (HOME is a temp dir)
	oneShotDir string   // the data dir of every `airlock run` (an airlock instance of the tests' own)
	oneShotCfg string   // the configuration file that names it (run takes --config, not --data-dir)
	daemonCfg  string   // the configuration file of a daemon started without one (startDaemonIn)
)

// processDefault is the configuration's default level of the tests' airlocks: the process level,
// which starts in milliseconds. Product's default is container (gVisor): the tests of it, and of
// the container level, name their level or configure their own default.
const processDefault = `"defaults": {"isolation": "process"}`

func TestMain(m *testing.M) {
	if out := os.Getenv(rusageEnv); out != "" {
		os.Exit(rusageWrapper(out, os.Args[1:]))
	}
	if os.Geteuid() != 0 {
		if os.Getenv(testutil.RequireRootEnv) == "1" {
			fmt.Fprintf(os.Stderr, "test/e2e needs root (the process isolation level uses namespaces and cgroups), and %s=1 says skipping is not allowed\n", testutil.RequireRootEnv)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "SKIP: test/e2e needs root (the process isolation level uses namespaces and cgroups); skipping the whole package")
		os.Exit(0)
	}
	tmp, err := os.MkdirTemp("", "airlock-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	cleanup := func() {
		// The microvm level's state of each airlock run here (its initramfs, kept for the
		// daemon's next start) outlives the daemon by design: not the tests'.
		instancesMu.Lock()
		for instance := range instances {
			os.RemoveAll(microvm.StateDirOf(instance))
		}
		instancesMu.Unlock()
		os.RemoveAll(tmp)
	}
	if err := setup(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		cleanup()
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		cleanup()
		os.Exit(code)
	}))
}

// setup builds the binary (unless $AIRLOCK_BIN is set) and prepares the environment.
func setup(tmp string) error {
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		return err
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "HOME" || strings.HasPrefix(k, "AIRLOCK_") {
			continue
		}
		runEnv = append(runEnv, kv)
	}
	runEnv = append(runEnv, "HOME="+home)
	oneShotDir, oneShotCfg = filepath.Join(tmp, "data"), filepath.Join(tmp, "run.json")
	if err := os.WriteFile(oneShotCfg, fmt.Appendf(nil, `{"dataDir":%q, %s}`, oneShotDir, processDefault), 0o644); err != nil {
		return err
	}
	daemonCfg = filepath.Join(tmp, "daemon.json")
	daemon := processDefault
	if dir := os.Getenv("AIRLOCK_MICROVM_KERNEL_DIR"); dir != "" {
		// A guest kernel installed elsewhere than make deps puts it (a branch's own, say).
		daemon += fmt.Sprintf(`, "microvm": {"kernelDir": %q}`, dir)
	}
	if err := os.WriteFile(daemonCfg, []byte(`{`+daemon+`}`), 0o644); err != nil {
		return err
	}
	addInstance(oneShotDir)

	if bin := os.Getenv("AIRLOCK_BIN"); bin != "" {
		airlockBin = bin
		return nil
	}
	// airlock-guest beside it: the microvm level's guests run it (make build does the same).
	airlockBin = filepath.Join(tmp, "airlock")
	return testutil.BuildCommands(tmp, "airlock", "airlock-guest")
}

// result is what one airlock invocation did.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// airlockCmd prepares an airlock invocation with the test environment.
func airlockCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, airlockBin, oneShotArgs(args)...)
	cmd.Env = runEnv
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runAirlock runs airlock to completion (at most 2 minutes) with stdin (nil: /dev/null).
func runAirlock(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	r, err := tryAirlock(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryAirlock is runAirlock for goroutines: it returns what went wrong instead of failing.
func tryAirlock(stdin io.Reader, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := airlockCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.Exited()) {
		return r, fmt.Errorf("airlock %q: %w (stderr %q)", args, err, r.stderr)
	}
	r.code = cmd.ProcessState.ExitCode()
	return r, nil
}

// rusageEnv makes the test binary a wrapper that runs its arguments and writes their max RSS
// (KiB) to the file the variable names. A wrapper is needed because Go starts children with
// vfork semantics, and the kernel folds the parent's RSS high-water mark at exec into the child's
// ru_maxrss: measured directly, airlock would be charged with the test binary's own peak.
const rusageEnv = "AIRLOCK_E2E_RUSAGE_OUT"

func rusageWrapper(out string, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "rusage wrapper: no command")
		return 125
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, rusageEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "rusage wrapper:", err)
		return 125
	}
	if err := os.WriteFile(out, []byte(strconv.FormatInt(maxRSS(cmd.ProcessState), 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "rusage wrapper:", err)
		return 125
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// measuredCmd prepares an airlock invocation through the rusage wrapper; rss reads the result
// after the command has been waited for.
func measuredCmd(t *testing.T, ctx context.Context, args ...string) (cmd *exec.Cmd, rss func() int64) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rss")
	cmd = exec.CommandContext(ctx, self, append([]string{airlockBin}, oneShotArgs(args)...)...)
	cmd.Env = append(append([]string{}, runEnv...), rusageEnv+"="+out)
	cmd.WaitDelay = 5 * time.Second
	return cmd, func() int64 {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("max RSS not measured: %v", err)
		}
		n, _ := strconv.ParseInt(string(b), 10, 64)
		return n
	}
}

func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return -1
}

// oneShotArgs gives `airlock run` the tests' own data dir unless args name a configuration, so
// that the leak checks tell its sandboxes from those of another airlock on the host (the default
// data dir's).
func oneShotArgs(args []string) []string {
	if len(args) == 0 || args[0] != "run" || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--config") }) {
		return args
	}
	return append([]string{"run", "--config", oneShotCfg}, args[1:]...)
}

// hostProc is a host process whose uid lies in a sandbox range of the tests' airlocks.
type hostProc struct {
	pid         int
	name, state string
}

func (p hostProc) String() string { return fmt.Sprintf("pid %d %s (%s)", p.pid, p.name, p.state) }

func (p hostProc) zombie() bool { return strings.HasPrefix(p.state, "Z") }

var (
	instancesMu sync.Mutex
	instances   = map[string]string{} // the airlocks these tests run: levels.Config.Instance → data dir
)

// addInstance counts the airlock on dataDir among the tests' own.
func addInstance(dataDir string) {
	instancesMu.Lock()
	defer instancesMu.Unlock()
	instances[uidalloc.InstanceOf(dataDir)] = dataDir
}

// ourDataDirs returns the data dirs of the tests' airlocks.
func ourDataDirs() []string {
	instancesMu.Lock()
	defer instancesMu.Unlock()
	return slices.Collect(maps.Values(instances))
}

// ours reports whether instance is one of the tests' airlocks.
func ours(instance string) bool {
	instancesMu.Lock()
	defer instancesMu.Unlock()
	_, ok := instances[instance]
	return ok
}

// ourRanges returns the uid ranges the host's allocator records for the tests' airlocks, by
// block. Other airlocks' sandboxes on the host (a `make run` daemon, other tests) are not theirs.
func ourRanges() map[int]uidalloc.Record {
	out := map[int]uidalloc.Record{}
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool { return ours(r.Instance) }) {
		out[r.Block] = r
	}
	return out
}

// sandboxProcs lists host processes with any uid in a range of the tests' airlocks.
func sandboxProcs() map[int]hostProc { return procsIn(ourRanges()) }

// procsIn lists host processes with any uid in one of ranges.
func procsIn(ranges map[int]uidalloc.Record) map[int]hostProc {
	procs := map[int]hostProc{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		var p hostProc
		inRange := false
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "Name":
				p.name = v
			case "State":
				p.state = v
			case "Uid":
				for _, u := range strings.Fields(v) {
					if n, err := strconv.ParseInt(u, 10, 64); err == nil && n >= uidalloc.Size {
						_, inRange = ranges[int(n/uidalloc.Size)]
						if inRange {
							break
						}
					}
				}
			}
		}
		if inRange {
			p.pid, _ = strconv.Atoi(filepath.Base(filepath.Dir(f)))
			procs[p.pid] = p
		}
	}
	return procs
}

// newProcs returns the sandbox-range processes not in before, split into live ones and zombies.
func newProcs(before map[int]hostProc) (live, zombies []hostProc) {
	for pid, p := range sandboxProcs() {
		if _, ok := before[pid]; ok {
			continue
		}
		if p.zombie() {
			zombies = append(zombies, p)
		} else {
			live = append(live, p)
		}
	}
	return live, zombies
}

// waitNoLiveProcs polls until no live sandbox-range process that was not in before remains.
func waitNoLiveProcs(before map[int]hostProc, within time.Duration) (live, zombies []hostProc) {
	deadline := time.Now().Add(within)
	for {
		live, zombies = newProcs(before)
		if len(live) == 0 || time.Now().After(deadline) {
			return live, zombies
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sandboxCgroups lists the process-level sandbox cgroups of the tests' airlocks in every
// hierarchy (v1 controllers and v2).
func sandboxCgroups() map[string]bool {
	set := map[string]bool{}
	for _, dir := range ourDataDirs() {
		for p := range instanceCgroups("airlock", uidalloc.InstanceOf(dir)) {
			set[p] = true
		}
	}
	return set
}

// instanceCgroups lists the sandbox cgroups under parent/instance in every hierarchy.
func instanceCgroups(parent, instance string) map[string]bool {
	set := map[string]bool{}
	for _, pat := range []string{"/sys/fs/cgroup/*/" + parent + "/" + instance + "/sbx_*", "/sys/fs/cgroup/" + parent + "/" + instance + "/sbx_*"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			set[p] = true
		}
	}
	return set
}

// newCgroups returns the sandbox cgroups not in before, each with its number of processes.
func newCgroups(before map[string]bool) map[string]int {
	out := map[string]int{}
	for p := range sandboxCgroups() {
		if before[p] {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		out[p] = len(strings.Fields(string(b)))
	}
	return out
}

// mustContain fails the test unless s contains every one of subs.
func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}
