package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/testutil"
	"go.uber.org/goleak"
)

// testParent is the parent cgroup all tests of this process work under.
func testParent() string { return fmt.Sprintf("airlock-test-%d", os.Getpid()) }

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Geteuid() == 0 {
		if err := leakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "cgroup leak check:", err)
			code = 1
		}
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goroutine leak:", err)
		code = 1
	}
	os.Exit(code)
}

// leakCheck verifies that the tests left no cgroup under the test parent,
// then removes the parent and verifies it is gone from every hierarchy,
// the unified one included (TestUnifiedCoreFiles uses it on hybrid hosts).
func leakCheck() error {
	host, err := Detect()
	if err != nil || len(host.Missing()) > 0 {
		return nil // nothing could have been created
	}
	layouts := []*Layout{host}
	if host.Mode() == "hybrid" {
		layouts = append(layouts, coreOnUnified(host))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, l := range layouts {
		names, err := l.List(testParent())
		if err != nil {
			errs = append(errs, err)
		} else if len(names) > 0 {
			errs = append(errs, fmt.Errorf("left behind under %s: %q", testParent(), names))
		}
		// Remove the parent even after a leak, so failed runs clean up too.
		parent := l.Open("", testParent())
		if err := parent.Destroy(ctx); err != nil {
			errs = append(errs, err)
		}
		for _, dir := range parent.Paths() {
			switch _, err := os.Stat(dir); {
			case err == nil:
				errs = append(errs, fmt.Errorf("parent %s not removed", dir))
			case !errors.Is(err, fs.ErrNotExist):
				errs = append(errs, fmt.Errorf("parent %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

func TestDetectHost(t *testing.T) {
	l, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layout: %s", l.Describe())
	if l.Mode() == "none" {
		t.Skip("no cgroups mounted on this host")
	}
	if m := l.Missing(); len(m) > 0 {
		t.Errorf("Missing() = %q, want none", m)
	}
	for c := ctrl(0); c < numCtrls; c++ {
		if l.place[c].mount == "" {
			t.Errorf("controller %s not found", c)
		}
	}
	// On a host with v1 hierarchies (like the development VM) every
	// controller must come from v1 unless it is free in the unified root.
	if l.Mode() != "v2" {
		for _, c := range []ctrl{cpuCtrl, cpuacctCtrl, memoryCtrl, pidsCtrl, freezerCtrl} {
			if p := l.place[c]; p.v2 && !strings.Contains(strings.Join(l.unifiedCtrls, " "), c.String()) && c != cpuacctCtrl && c != freezerCtrl {
				t.Errorf("%s placed on v2 though the unified root does not offer it", c)
			}
		}
	}
}

// hostLayout skips unless the test can create cgroups here.
func hostLayout(t testing.TB) *Layout {
	t.Helper()
	testutil.RequiresRoot(t, "it makes sandboxes")
	l, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	if m := l.Missing(); len(m) > 0 {
		t.Skipf("host lacks cgroup controllers %q", m)
	}
	return l
}

// newCgroup creates a cgroup named after the test, destroyed at cleanup.
func newCgroup(t *testing.T, l *Layout, r Resources) *Cgroup {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	c, err := l.New(testParent(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Destroy(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := c.Set(r); err != nil {
		t.Fatal(err)
	}
	return c
}

// proc is a test process that sits in `read` until released, so it is in
// the cgroup before its script does any work.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

func startIn(t *testing.T, c *Cgroup, script string) *proc {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read _ && "+script)
	// A file, not a pipe: background children holding a pipe would make
	// Wait hang until they die.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = <-p.done // killed just above: the error says so
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("output of %q:\n%s", script, b)
		}
	})
	if c != nil {
		if err := c.AddProc(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *proc) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "\n"); err != nil {
		t.Fatal(err)
	}
	p.stdin.Close()
}

// wait returns the process's exit error, failing the test after d.
func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err
	case <-time.After(d):
		t.Fatalf("process still running after %v", d)
		return nil
	}
}

func stats(t *testing.T, c *Cgroup) Stats {
	t.Helper()
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestMemoryLimitOOMKills(t *testing.T) {
	l := hostLayout(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	c := newCgroup(t, l, Resources{MemoryBytes: 64 << 20})
	p := startIn(t, c, `exec /usr/bin/python3 -c "b=bytearray(512*1024*1024)"`)
	p.release(t)
	err := p.wait(t, 30*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("want death by SIGKILL, got %v", err)
	}
	s := stats(t, c)
	t.Logf("stats: %+v", s)
	if s.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", s.OOMKills)
	}
	checkEvents(t, c, s)
	// Kernels since about 6.15 keep no failcnt for v1's memory+swap
	// counter, which is charged first once memsw.limit_in_bytes is set, so
	// a v1 host with swap accounting may legitimately report 0 here.
	_, memswErr := os.Stat(c.at[memoryCtrl].mount + "/memory.memsw.failcnt")
	if s.MemoryLimitHits < 1 && (c.at[memoryCtrl].v2 || memswErr != nil) {
		t.Errorf("MemoryLimitHits = %d, want >= 1", s.MemoryLimitHits)
	}
	if s.MemoryPeakBytes > 64<<20+1<<20 {
		t.Errorf("MemoryPeakBytes = %d beyond the 64 MiB limit", s.MemoryPeakBytes)
	}
}

func TestPidsLimit(t *testing.T) {
	l := hostLayout(t)
	c := newCgroup(t, l, Resources{Pids: 10})
	p := startIn(t, c, `i=0; while [ $i -lt 50 ]; do sleep 5 & i=$((i+1)); done; wait`)
	p.release(t)
	// dash gives up at the first failed fork; the sleeps stay behind.
	if err := p.wait(t, 10*time.Second); err == nil {
		t.Errorf("all 50 forks succeeded under pids.max=10")
	}
	s := stats(t, c)
	t.Logf("stats: %+v", s)
	if s.PidsLimitHits < 1 {
		t.Errorf("PidsLimitHits = %d, want >= 1", s.PidsLimitHits)
	}
	checkEvents(t, c, s)
	if s.Pids > 10 {
		t.Errorf("Pids = %d beyond the limit of 10", s.Pids)
	}
	if err := c.Kill(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if pids, err := c.Procs(); err != nil || len(pids) > 0 {
		t.Errorf("after Kill: Procs() = %v, %v", pids, err)
	}
}

func TestCPULimit(t *testing.T) {
	l := hostLayout(t)
	// A tenth of a CPU: a spinning shell exceeds it even on a busy host, so the quota is always
	// what holds it back (at 0.5 a busy host alone may hold it lower, and nothing is throttled).
	const quota = 0.1
	c := newCgroup(t, l, Resources{CPU: quota})
	p := startIn(t, c, `while :; do :; done`)
	p.release(t)
	time.Sleep(50 * time.Millisecond)
	before, start := stats(t, c), time.Now()
	time.Sleep(1500 * time.Millisecond)
	after, wall := stats(t, c), time.Since(start)
	ratio := float64(after.CPUUsage-before.CPUUsage) / float64(wall)
	t.Logf("cpu %.3f of one CPU over %v; throttled %d periods, %v", ratio, wall, after.ThrottledPeriods, after.Throttled)
	if ratio <= 0 || ratio > 1.5*quota {
		t.Errorf("CPU usage ratio %.3f, want at most %.2f (the quota %.2f, and the kernel's slack)", ratio, 1.5*quota, quota)
	}
	if after.ThrottledPeriods < 1 || after.Throttled <= 0 {
		t.Errorf("no throttling recorded: %+v", after)
	}
	if e, err := c.Events(); err != nil || e.ThrottledPeriods < after.ThrottledPeriods {
		t.Errorf("Events() = %+v, %v; want at least the %d throttled periods of Stats", e, err, after.ThrottledPeriods)
	}
}

// checkEvents checks that Events and an EventReader agree with a Stats read just before
// (counters only grow).
func checkEvents(t *testing.T, c *Cgroup, s Stats) {
	t.Helper()
	e, err := c.Events()
	if err != nil {
		t.Fatal(err)
	}
	if e.OOMKills < s.OOMKills || e.PidsLimitHits < s.PidsLimitHits || e.ThrottledPeriods < s.ThrottledPeriods {
		t.Errorf("Events() = %+v behind Stats() = %+v", e, s)
	}
	r, err := c.OpenEvents()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 2; i++ { // the second read regenerates the files from offset 0
		if e, err := r.Read(); err != nil || e.OOMKills < s.OOMKills || e.PidsLimitHits < s.PidsLimitHits || e.ThrottledPeriods < s.ThrottledPeriods {
			t.Errorf("EventReader.Read() = %+v, %v behind Stats() = %+v", e, err, s)
		}
	}
}

func TestFreezeThaw(t *testing.T) {
	l := hostLayout(t)
	c := newCgroup(t, l, Resources{})
	p := startIn(t, c, `while :; do :; done`)
	p.release(t)
	time.Sleep(50 * time.Millisecond)
	if err := c.Freeze(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	frozen := stats(t, c).CPUUsage
	time.Sleep(300 * time.Millisecond)
	if got := stats(t, c).CPUUsage; got != frozen {
		t.Errorf("CPU usage moved from %v to %v while frozen", frozen, got)
	}
	if err := c.Thaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	runsAgain(t, c, frozen)
}

// runsAgain waits until the spinner in c, thawed, has used 20 ms of CPU more than frozen: how
// soon a busy host gives it a CPU is the host's business, that it runs is the thaw's.
func runsAgain(t *testing.T, c *Cgroup, frozen time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := stats(t, c).CPUUsage
		if got-frozen >= 20*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %v of CPU in 10 s after Thaw", got-frozen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStatsPeak(t *testing.T) {
	l := hostLayout(t)
	c := newCgroup(t, l, Resources{MemoryBytes: 256 << 20, Pids: 100, CPU: 2})
	p := startIn(t, c, `x=$(head -c 20000000 /dev/zero | tr '\0' a); echo ${#x}`)
	p.release(t)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	s := stats(t, c)
	t.Logf("stats: %+v", s)
	if s.MemoryPeakBytes < 20<<20 {
		t.Errorf("MemoryPeakBytes = %d, want >= 20 MiB", s.MemoryPeakBytes)
	}
	if s.CPUUsage <= 0 {
		t.Errorf("CPUUsage = %v, want > 0", s.CPUUsage)
	}
	if s.OOMKills != 0 || s.PidsLimitHits != 0 {
		t.Errorf("unexpected limit events: %+v", s)
	}
}
