package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// daemon is an `airlock serve` the test started on a loopback port.
type daemon struct {
	t       *testing.T
	dataDir string
	flags   []string // the extra flags it was started with
	netns   string   // the network namespace it runs in ("" for the test's own)
	cmd     *exec.Cmd
	url     string
	exited  chan struct{}

	mu     sync.Mutex // guards stderr
	stderr strings.Builder
}

// startDaemon starts airlock serve on 127.0.0.1 (a free port) with dataDir and extra flags, and
// waits until it answers. It is stopped (SIGTERM) at the end of the test unless already gone.
// Without a --config among the flags its configuration is daemonCfg: processDefault.
func startDaemon(t *testing.T, dataDir string, flags ...string) *daemon {
	t.Helper()
	return startDaemonIn(t, "", dataDir, flags...)
}

// startDaemonIn is startDaemon inside the network namespace at netns (a path such as
// /proc/PID/ns/net or /run/netns/NAME), entered with nsenter so that only the network changes;
// its clients dial from inside that namespace.
func startDaemonIn(t *testing.T, netns, dataDir string, flags ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, dataDir: dataDir, flags: flags, netns: netns, exited: make(chan struct{})}
	addInstance(dataDir)
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, flags...)
	if !slices.Contains(flags, "--config") {
		args = append(args, "--config", daemonCfg)
	}
	d.cmd = exec.Command(airlockBin, args...)
	if netns != "" {
		d.cmd = exec.Command("nsenter", append([]string{"--net=" + netns, "--", airlockBin}, args...)...)
	}
	d.cmd.Env = append(append([]string{}, runEnv...), "AIRLOCK_LOG=info")
	pr, pw := io.Pipe()
	d.cmd.Stderr = pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.stderr.WriteString(line + "\n")
			d.mu.Unlock()
			if _, u, ok := strings.Cut(line, "url="); ok {
				select {
				case urlc <- strings.Fields(u)[0]:
				default:
				}
			}
		}
	}()
	go func() {
		_ = d.cmd.Wait() // the exit status is read from ProcessState
		pw.Close()
		close(d.exited)
	}()
	select {
	case d.url = <-urlc:
	case <-d.exited:
		t.Fatalf("airlock serve exited at start:\n%s", d.log())
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill() // one that exited meanwhile: the Fatal says enough
		t.Fatalf("airlock serve did not start:\n%s", d.log())
	}
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log())
		}
	})
	return d
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM) // one that exited meanwhile: d.exited says so
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill() // likewise
		<-d.exited
		return errors.New("airlock serve did not stop within 60 s of SIGTERM")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		return errors.New("airlock serve exited with status " + d.cmd.ProcessState.String())
	}
	if left := emptyParents(uidalloc.InstanceOf(d.dataDir)); len(left) > 0 {
		return fmt.Errorf("airlock serve stopped cleanly but left its empty cgroup parents %q", left)
	}
	return nil
}

// emptyParents lists the cgroup parents of the airlock named instance (<level parent>/<instance>,
// in any hierarchy) that hold no cgroup: a clean stop removes them; one with a sandbox still
// under it (left for adoption) stays.
func emptyParents(instance string) []string {
	var out []string
	for _, level := range []string{"airlock", "airlock-container", "airlock-microvm"} {
		for _, pat := range []string{"/sys/fs/cgroup/*/" + level + "/" + instance, "/sys/fs/cgroup/" + level + "/" + instance} {
			m, _ := filepath.Glob(pat)
			for _, dir := range m {
				ents, _ := os.ReadDir(dir)
				if !slices.ContainsFunc(ents, os.DirEntry.IsDir) {
					out = append(out, dir)
				}
			}
		}
	}
	return out
}

// kill9 kills the daemon with SIGKILL, as a crash would.
func (d *daemon) kill9() {
	_ = d.cmd.Process.Kill() // one that exited already: d.exited is closed either way
	<-d.exited
}

// client returns an SDK client with key.
// cli runs the airlock CLI against the daemon (AIRLOCK_HOST) with key, stdin fed to it (nil:
// none).
func (d *daemon) cli(t *testing.T, key string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()
	cmd := airlockCmd(ctx, args...)
	cmd.Env = append(cmd.Env, "AIRLOCK_HOST="+d.url, "AIRLOCK_TOKEN="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState == nil { // an exit status is a result; not starting is not
		t.Errorf("airlock %q: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func (d *daemon) client(key string) *client.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 200}
	if d.netns != "" {
		tr.DialContext = dialIn(d.netns)
	}
	d.t.Cleanup(tr.CloseIdleConnections) // no goroutine outlives the test
	c, err := client.New(d.url, key, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// newKey creates an API key for tenant with `airlock keys create`.
func newKey(t *testing.T, dataDir, tenant string) string {
	t.Helper()
	r := runAirlock(t, nil, "keys", "create", "--tenant", tenant, "--data-dir", dataDir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "alk_") {
		t.Fatalf("keys create: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// newAdminKey creates an admin key (the operator's) with `airlock keys create --admin`.
func newAdminKey(t *testing.T, dataDir string) string {
	t.Helper()
	r := runAirlock(t, nil, "keys", "create", "--admin", "--data-dir", dataDir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "alk_") || !strings.Contains(r.stderr, "admin key") {
		t.Fatalf("keys create --admin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// newDaemon starts a daemon on a fresh data dir and returns it with a client of tenant "t1".
func newDaemon(t *testing.T, flags ...string) (*daemon, *client.Client) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir, flags...)
	return d, d.client(key)
}

// newDaemonConfig is newDaemon with a configuration file; it also returns the key. Its default
// level is the product's (container) unless config says processDefault.
func newDaemonConfig(t *testing.T, config string) (*daemon, *client.Client, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	key := newKey(t, dir, "t1")
	cfg := filepath.Join(t.TempDir(), "airlock.json")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir, "--config", cfg)
	return d, d.client(key), key
}

// createN creates n small sandboxes and returns their IDs.
func createN(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		sb, err := c.Create(bg(), smallSpec())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	return ids
}

// shOK runs script in sandbox id through c, fails t unless it exits 0, and returns its output,
// trimmed.
func shOK(t *testing.T, c *client.Client, id, script string) string {
	t.Helper()
	res, err := c.Exec(bg(), id, api.ExecRequest{Command: api.Shell(script)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q in %s: %+v, %v", script, id, res, err)
	}
	return strings.TrimSpace(res.Stdout)
}

// removeContainerState unmounts and removes, when t ends, what the container level keeps for
// dataDir once every sandbox is gone (the private bundles mount, runsc's own state).
func removeContainerState(t *testing.T, dataDir string) {
	t.Cleanup(func() {
		state := levels.ContainerStateDir(dataDir)
		for _, m := range mountinfo.Under(state) {
			_ = unix.Unmount(m, unix.MNT_DETACH) // best effort: what stays shows in the leak checks
		}
		os.RemoveAll(state)
	})
}

// smallSpec is a sandbox spec with modest limits, so many fit on the test machine.
func smallSpec() api.Spec {
	return api.Spec{Resources: api.Resources{MemoryMB: 256, DiskMB: 256}}
}

// leakCheck records the sandbox processes, cgroups and uid ranges of the tests' airlocks and the
// host's mount table now, and returns a function that fails the test if any new one remains
// (polling briefly: teardown is asynchronous to the API answer in nothing, but the kernel reaps
// at its pace). Other airlocks on the host are not counted.
func leakCheck(t *testing.T) func() {
	t.Helper()
	procs, cgs, mounts, ranges := sandboxProcs(), sandboxCgroups(), mountCount(), ourRanges()
	return func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			live, _ := newProcs(procs)
			cg := newCgroups(cgs)
			m := mountCount()
			var recs []string
			for b, r := range ourRanges() {
				if _, ok := ranges[b]; !ok {
					recs = append(recs, fmt.Sprintf("%v (%s %s)", r.Range, r.Level, r.Sandbox))
				}
			}
			if len(live) == 0 && len(cg) == 0 && m <= mounts && len(recs) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leaks: processes %v, cgroups %v, uid ranges %v, host mounts %d → %d", live, cg, recs, mounts, m)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// mountCount counts the mounts of the tests' airlocks: under their data dirs (the wasm level's
// stores) and their container state directories. Other airlocks' are not counted.
func mountCount() int {
	n := 0
	for _, dir := range ourDataDirs() {
		n += len(mountinfo.Under(dir)) + len(mountinfo.Under(levels.ContainerStateDir(dir)))
	}
	return n
}

// clientErr returns err as a *client.Error or fails.
func clientErr(t *testing.T, err error) *client.Error {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("want a daemon error, got %v", err)
	}
	return ce
}

func bg() context.Context { return context.Background() }

// terminate terminates sandbox id for a test, failing t if it cannot: a sandbox left live is a
// leak.
func terminate(ctx context.Context, t testing.TB, c *client.Client, id string) {
	t.Helper()
	if _, err := c.Terminate(ctx, id); err != nil {
		t.Errorf("terminate %s: %v", id, err)
	}
}

// dialIn returns a dialer whose connections are made from inside the network namespace at
// netns: a socket belongs to the namespace of the thread that created it.
func dialIn(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(netns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// inNetns runs fn on a thread inside the network namespace at path. A thread that cannot
// return to the test's namespace is left locked, so it dies with its goroutine.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		ns, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
