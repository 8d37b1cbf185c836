package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Sandbox is one live process-level sandbox: an init process in its own namespaces and cgroup.
type Sandbox struct {
	id      string
	d       *Driver
	spec    sandbox.Spec
	cmd     *exec.Cmd
	ctl     *conn
	cg      *cgroups.Cgroup
	pid     int // init's pid on the host
	created time.Time

	mu      sync.Mutex // guards waiters
	waiters map[string]chan *message

	done   chan struct{} // closed when the control socket is gone (init exited or Destroy)
	exited chan struct{} // closed when init has been reaped

	destroyOnce sync.Once
	destroyErr  error
}

var _ driver.Sandbox = (*Sandbox)(nil)

// ID implements driver.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// InitPid is the host pid of the sandbox's init (its PID 1).
func (s *Sandbox) InitPid() int { return s.pid }

// Cgroup is the sandbox's cgroup.
func (s *Sandbox) Cgroup() *cgroups.Cgroup { return s.cg }

// readLoop routes init's messages to the exec waiting for them.
func (s *Sandbox) readLoop() {
	defer close(s.done)
	for {
		m, err := s.ctl.recv()
		if err != nil {
			// Tell a Create still waiting for "ready" that init is gone; execs watch s.done.
			s.mu.Lock()
			if ch, ok := s.waiters[""]; ok {
				select {
				case ch <- nil:
				default:
				}
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		ch, ok := s.waiters[m.ID]
		s.mu.Unlock()
		if ok {
			select {
			case ch <- m:
			default: // a waiter gets at most started+exited; anything more is noise
			}
		}
	}
}

// Exec implements driver.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res := sandbox.ExecResult{ExecutionID: req.ID, LimitEvents: []sandbox.LimitEvent{}}
	if len(req.Command) == 0 {
		return res, errors.New("exec: empty command")
	}
	std, err := newStdio(req)
	if err != nil {
		return res, err
	}
	defer std.abort()
	before := s.sample()
	ch := make(chan *message, 4)
	s.mu.Lock()
	s.waiters[req.ID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, req.ID)
		s.mu.Unlock()
	}()
	workdir := req.Workdir
	if workdir == "" {
		workdir = s.spec.Workdir
	}
	m := &message{Kind: msgExec, ID: req.ID, Exec: &execSpec{Argv: req.Command, Env: s.env(req), Dir: workdir}}
	start := time.Now()
	if err := s.ctl.send(m, std.child[:]...); err != nil {
		return res, fmt.Errorf("exec %s: sandbox %s is gone: %w", req.ID, s.id, err)
	}
	std.closeChildEnds()

	var killTimer <-chan time.Time
	done := ctx.Done()
	for waiting := true; waiting; {
		select {
		case m := <-ch:
			switch m.Kind {
			case msgExited:
				res.ExitCode = m.ExitCode
				waiting = false
			case msgError:
				// The command could not start (not found, not executable): answer like a shell.
				res.ExitCode = m.ExitCode
				if res.ExitCode == 0 {
					res.ExitCode = 127
				}
				std.stderrNote("airlock: " + m.Error + "\n")
				waiting = false
			}
		case <-done:
			done = nil
			res.TimedOut = true
			s.ctl.send(&message{Kind: msgSignal, ID: req.ID, Signal: int(unix.SIGKILL)})
			// Init answers at once unless the sandbox is wedged (frozen, out of pids); then the
			// cgroup is killed, which ends the command and everything it started.
			killTimer = time.After(2 * time.Second)
		case <-killTimer:
			killTimer = nil
			s.cg.Kill(context.Background())
		case <-s.done:
			waiting = false
			res.ExitCode = 128 + int(unix.SIGKILL)
			if !res.TimedOut {
				std.stderrNote("airlock: the sandbox ended while the command ran\n")
			}
		}
	}
	res.DurationMs = time.Since(start).Milliseconds()
	tExited := time.Since(start)
	grace := 100 * time.Millisecond
	if res.TimedOut {
		grace = 0
	}
	std.finish(grace, &res)
	s.account(before, &res)
	if res.TimedOut {
		res.ExitCode = sandbox.ExitTimeout
	}
	s.d.log.Debug("exec done", "sandbox", s.id, "exec", req.ID, "exit", res.ExitCode, "exited", tExited, "accounted", time.Since(start))
	return res, nil
}

// env is the command's environment: a small default, the sandbox's, then the request's.
func (s *Sandbox) env(req sandbox.ExecRequest) []string {
	home, user := "/home/agent", "agent"
	if s.spec.User == sandbox.UserRoot {
		home, user = "/root", "root"
	}
	kv := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": home, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
		"HOSTNAME": sandboxHostname,
	}
	if t := os.Getenv("TERM"); t != "" && isTerminal(req.Stdout) {
		kv["TERM"] = t
	}
	for k, v := range s.spec.Environment {
		kv[k] = v
	}
	for k, v := range req.Env {
		kv[k] = v
	}
	env := make([]string, 0, len(kv))
	for k, v := range kv {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// usage is a sample of the kernel's counters for the sandbox.
type usage struct {
	cg    cgroups.Stats
	txNet int64
}

func (s *Sandbox) sample() usage {
	var u usage
	u.cg, _ = s.cg.Stats()
	u.txNet = egressBytes(s.pid)
	return u
}

// account turns the counters' movement during an exec into usage and limit events.
func (s *Sandbox) account(before usage, res *sandbox.ExecResult) {
	after := s.sample()
	now := time.Now()
	ev := func(typ, msg string, n int64) {
		res.LimitEvents = append(res.LimitEvents, sandbox.LimitEvent{Type: typ, Message: msg, Count: n, Time: now})
	}
	if n := after.cg.OOMKills - before.cg.OOMKills; n > 0 {
		res.OOMKilled = true
		ev(sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached; the kernel killed %d process(es)", s.spec.Resources.MemoryMB, n), n)
	}
	if n := after.cg.PidsLimitHits - before.cg.PidsLimitHits; n > 0 {
		ev(sandbox.EventLimitPids, fmt.Sprintf("process limit of %d reached; fork failed %d time(s)", s.spec.Resources.MaxProcesses, n), n)
	}
	if n := after.cg.ThrottledPeriods - before.cg.ThrottledPeriods; n > 0 {
		ev(sandbox.EventLimitCPU, fmt.Sprintf("CPU limit of %g vCPU reached; throttled in %d period(s)", s.spec.Resources.CPU, n), n)
	}
	if layerFull(s.pid) {
		ev(sandbox.EventLimitDisk, fmt.Sprintf("writable layer of %d MiB is full", s.spec.Resources.DiskMB), 0)
	}
	if res.TimedOut {
		ev(sandbox.EventLimitTimeout, "timeout reached; the command and its children were killed", 0)
	}
	if res.Truncated {
		ev(sandbox.EventLimitOutput, "output beyond the capture limit was discarded", 0)
	}
	res.ResourceUsage = sandbox.ResourceUsage{
		PeakMemoryMB:       float64(after.cg.MemoryPeakBytes) / (1 << 20),
		CPUTimeMs:          (after.cg.CPUUsage - before.cg.CPUUsage).Milliseconds(),
		NetworkEgressBytes: after.txNet - before.txNet,
	}
}

// layerFull reports whether the writable layer has (nearly) no space left, seen through init's
// root from the host.
func layerFull(pid int) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(fmt.Sprintf("/proc/%d/root/tmp", pid), &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) < 64<<10
}

// Destroy implements driver.Sandbox: init is killed (the kernel then kills every process of its PID
// namespace, and the mount namespace with the writable layer goes with the last of them), then the
// cgroup is killed and removed, which also catches anything that left the namespace.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroyOnce.Do(func() {
		t0 := time.Now()
		defer func() {
			s.d.log.Debug("sandbox destroyed", "sandbox", s.id, "took", time.Since(t0), "err", s.destroyErr)
		}()
		s.ctl.close()
		s.cmd.Process.Kill()
		select {
		case <-s.exited:
		case <-ctx.Done():
		}
		s.destroyErr = s.cg.Destroy(ctx)
	})
	return s.destroyErr
}
