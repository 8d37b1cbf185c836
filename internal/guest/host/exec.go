package host

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// outputGrace is how long an exec waits, after its command exited, for its output streams to
// reach EOF. A background process that keeps them open does not hold the result hostage: what it
// wrote until then is delivered (finish drains what the pipes hold), and it gets EPIPE (or, on a
// terminal, a hangup) afterwards. Where init relays the streams (gVisor, a VM), init tells the
// exit only once the relay has sent what the command wrote (internal/guest/pid1/drain.go), so
// the grace is for late writers, not for the command's own output.
const outputGrace = 250 * time.Millisecond

// killGrace is how long Exec waits for init to kill a command whose deadline passed before it
// kills the whole cgroup instead (see Launcher.KillGrace).
const killGrace = 2 * time.Second

// killGrace is the sandbox's. A paused sandbox's init cannot answer at all.
func (s *Sandbox) killGrace() time.Duration {
	if s.l.KillGrace > 0 && !s.isPaused() {
		return s.l.KillGrace
	}
	return killGrace
}

// defaultTTY is a terminal's size when the request gives none.
var defaultTTY = sandbox.Winsize{Rows: 24, Cols: 80}

// Exec implements driver.Sandbox. Any number of execs may run at once; each command leads its own
// session and process group, and what it leaves running in the background stays (until Destroy).
//
// When ctx is done the command's process group is killed by init and the result says TimedOut.
// If init does not answer within killGrace — the sandbox is paused (frozen) or wedged — the whole
// cgroup is killed instead, which ends the sandbox: Done closes, and the caller should Destroy it.
// Exec on a paused sandbox is refused with ErrConflict.
//
// CPU time and peak memory in the result are the command's own, with the descendants it waited
// for (the kernel's rusage of the reaped command), not the sandbox's: background processes do not
// count. Limit events come from the cgroup's counters before and after, so a limit a background
// process hits while the command runs is reported with it.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res := sandbox.ExecResult{ExecutionID: req.ID, LimitEvents: []sandbox.LimitEvent{}}
	if len(req.Command) == 0 {
		return res, fmt.Errorf("exec: empty command: %w", errdefs.ErrInvalidArgument)
	}
	if s.isPaused() {
		return res, fmt.Errorf("exec %s: sandbox %s is paused: %w", req.ID, s.id, errdefs.ErrConflict)
	}
	if err := s.ended("exec " + req.ID); err != nil {
		return res, err
	}
	// A snapshot with memory in progress holds the gate for the instant of its save.
	s.gate.RLock()
	defer s.gate.RUnlock()
	std, err := newStdio(req)
	if err != nil {
		return res, err
	}
	defer std.abort()
	before := s.counters()
	ch := make(chan *guest.Message, 4)
	s.mu.Lock()
	s.waiters[req.ID] = ch
	s.mu.Unlock()
	defer s.unregister(req.ID, ch)

	spec := &guest.ExecSpec{Argv: req.Command, Env: s.env(req), Dir: req.Workdir}
	if spec.Dir == "" {
		spec.Dir = s.spec.Workdir
	}
	if req.TTY {
		size := sandbox.Winsize{Rows: req.Rows, Cols: req.Cols}
		if size.Rows == 0 || size.Cols == 0 {
			size = defaultTTY
		}
		spec.TTY = &size
	}
	send := std.childFiles()
	var relayEnd *os.File // the host's end of a relayed terminal
	if req.TTY && s.l.TerminalRelay {
		ours, theirs, err := streamPair()
		if err != nil {
			return res, fmt.Errorf("exec %s: terminal relay: %w", req.ID, err)
		}
		defer theirs.Close()
		relayEnd, send = ours, []*os.File{theirs}
		// Once attached, the stdio closes it with the outputs; Close after that is a no-op.
		defer ours.Close()
	}
	start := time.Now()
	if err := s.ctl.send(&guest.Message{Kind: guest.MsgExec, ID: req.ID, Exec: spec}, send...); err != nil {
		return res, fmt.Errorf("exec %s: sandbox %s is gone: %w", req.ID, s.id, err)
	}
	std.closeChildEnds()

	var (
		killTimer  <-chan time.Time
		resize     <-chan sandbox.Resize // read once the terminal exists
		resized    []chan<- struct{}     // Done of the resizes sent to init, oldest first, until it says each is set
		usage      *guest.Rusage
		guestAfter *guest.CgroupStats // the sandbox kernel's counters when the command ended
	)
	signals := req.Signal
	done := ctx.Done()
	for waiting := true; waiting; {
		select {
		case m := <-ch:
			switch m.Kind {
			case guest.MsgStarted:
				takeGuest(&before, m)
				switch {
				case relayEnd != nil:
					std.attachTerminal(relayEnd, req.Stdin, true)
					resize = req.Resize
				case req.TTY && len(m.Files) > 0:
					std.attachTerminal(m.Files[0], req.Stdin, false)
					m.Files = m.Files[1:]
					resize = req.Resize
				}
			case guest.MsgResize:
				if len(resized) > 0 {
					close(resized[0])
					resized = resized[1:]
				}
			case guest.MsgExited:
				res.ExitCode = m.ExitCode
				usage, guestAfter = m.Usage, m.Guest
				waiting = false
			case guest.MsgError:
				// The command could not start (not found, not executable): answer like a shell.
				res.ExitCode = m.ExitCode
				if res.ExitCode == 0 {
					res.ExitCode = 127
				}
				std.stderrNote("airlock: " + m.Error + "\n")
				waiting = false
			}
			m.CloseFiles()
		case rs, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			switch {
			case relayEnd != nil:
				// A send fails only when init is gone, which s.done says below.
				_ = s.ctl.send(&guest.Message{Kind: guest.MsgResize, ID: req.ID, Size: &rs.Winsize})
				if rs.Done != nil {
					resized = append(resized, rs.Done) // closed when init says it is set
				}
			default:
				std.resize(rs.Winsize)
				if rs.Done != nil {
					close(rs.Done)
				}
			}
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			_ = s.ctl.send(&guest.Message{Kind: guest.MsgSignal, ID: req.ID, Signal: int(sig)}) // as for resize
		case <-done:
			done = nil
			res.TimedOut = true
			_ = s.ctl.send(&guest.Message{Kind: guest.MsgSignal, ID: req.ID, Signal: int(unix.SIGKILL)})
			// Init answers at once unless the sandbox is paused or wedged (out of pids, say); then
			// the cgroup is killed, which ends the command, everything it started — and the
			// sandbox, since init is in the same cgroup.
			killTimer = time.After(s.killGrace())
		case <-killTimer:
			killTimer = nil
			s.rt.log.Warn("init did not kill a timed-out command; killing the sandbox", "sandbox", s.id, "exec", req.ID)
			if err := s.cg.Kill(context.Background()); err != nil {
				s.rt.log.Error("kill the sandbox of a timed-out command", "sandbox", s.id, "exec", req.ID, "err", err)
			}
		case <-s.done:
			waiting = false
			res.ExitCode = 128 + int(unix.SIGKILL)
			if !res.TimedOut {
				std.stderrNote("airlock: the sandbox ended while the command ran\n")
			}
		}
	}
	tExited := time.Since(start)
	// Rounded up: a command that ran took time, even when less than a millisecond.
	res.DurationMs = int64((tExited + time.Millisecond - 1) / time.Millisecond)
	grace := outputGrace
	if res.TimedOut {
		grace = 0
	}
	std.finish(grace, &res)
	s.account(before, usage, guestAfter, &res)
	if res.TimedOut {
		res.ExitCode = sandbox.ExitTimeout
	}
	s.rt.log.Debug("exec done", "sandbox", s.id, "exec", req.ID, "exit", res.ExitCode, "exited", tExited, "accounted", time.Since(start))
	return res, nil
}

// unregister stops deliveries to an exec's channel and closes the descriptors of messages it did
// not take (a terminal that started after the exec gave up, say).
func (s *Sandbox) unregister(id string, ch chan *guest.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters, id)
	for {
		select {
		case m := <-ch:
			m.CloseFiles()
		default:
			return
		}
	}
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
		"HOSTNAME": guest.Hostname,
	}
	if req.TTY {
		kv["TERM"] = "xterm-256color"
	} else if t := os.Getenv("TERM"); t != "" && isTerminal(req.Stdout) {
		kv["TERM"] = t
	}
	if s.gw != nil {
		for k, v := range s.gw.Env() {
			kv[k] = v
		}
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

// counters is what an exec samples before and after its command to tell which limits it hit.
type counters struct {
	ev    cgroups.Events
	txNet int64
	cpu   time.Duration // the cgroup's CPU usage, when the runtime's rusage overstates (CgroupCPU)
	guest bool          // ev's pids and OOM counts are the sandbox kernel's (guest.MsgStarted's)
	// hostOOM is the host cgroup's OOM kill count, also where ev's is the sandbox kernel's: a
	// sandbox with its own kernel that outruns init's kill meets the host's limit (its headroom
	// spent), and the host kernel kills in it.
	hostOOM int64
	// kernel says ev's OOM kills and refused forks, and diskFull, are the sandbox kernel's
	// (Launcher.Kernel).
	kernel   bool
	diskFull bool
}

// takeGuest takes the sandbox kernel's counters that init sends with a command's start
// (guest.CgroupStats) into c.
func takeGuest(c *counters, m *guest.Message) {
	if m.Guest != nil {
		c.ev.PidsLimitHits, c.ev.OOMKills, c.guest = m.Guest.PidsHits, m.Guest.OOMKills, true
	}
}

func (s *Sandbox) counters() counters {
	var c counters
	c.ev, _ = s.events.Read()
	c.hostOOM = c.ev.OOMKills
	if s.l.Kernel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), guestPing)
		k, err := s.l.Kernel(ctx)
		cancel()
		if err == nil {
			c.ev.OOMKills, c.ev.PidsLimitHits, c.diskFull, c.kernel = k.OOMKills, k.PidsHits, k.DiskFull, true
		}
	}
	if s.l.CgroupCPU {
		if st, err := s.cg.Stats(); err == nil {
			c.cpu = st.CPUUsage
		}
	}
	// With egress "none" the sandbox has loopback only, and nothing to count.
	if s.spec.Network.EgressPolicy != sandbox.EgressNone {
		_, c.txNet = procfs.NetBytes(s.pid)
	}
	return c
}

// account fills the result's usage from the command's rusage (nil if init could not report it)
// and its limit events from the counters' movement during the exec.
func (s *Sandbox) account(before counters, ru *guest.Rusage, guestAfter *guest.CgroupStats, res *sandbox.ExecResult) {
	after := s.counters()
	switch {
	case before.guest && guestAfter != nil:
		after.ev.PidsLimitHits, after.ev.OOMKills = guestAfter.PidsHits, guestAfter.OOMKills
	case before.guest: // init is gone: the sandbox kernel's counts are lost with it
		after.ev.PidsLimitHits, after.ev.OOMKills = before.ev.PidsLimitHits, before.ev.OOMKills
	}
	now := time.Now()
	ev := func(typ, msg string, n int64) {
		res.LimitEvents = append(res.LimitEvents, sandbox.LimitEvent{Type: typ, Message: msg, Count: n, Time: now})
	}
	oom := after.ev.OOMKills - before.ev.OOMKills
	if before.kernel != after.kernel { // the sandbox kernel answered once only: its counts are lost
		oom, after.ev.PidsLimitHits = 0, before.ev.PidsLimitHits
	}
	if before.guest || before.kernel {
		oom += after.hostOOM - before.hostOOM
	}
	if n := oom; n > 0 {
		res.OOMKilled = true
		ev(sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached; the kernel killed %d process(es)", s.spec.Resources.MemoryMB, n), n)
	}
	if n := after.ev.PidsLimitHits - before.ev.PidsLimitHits; n > 0 {
		ev(sandbox.EventLimitPids, fmt.Sprintf("process limit of %d reached; fork failed %d time(s)", s.spec.Resources.MaxProcesses, n), n)
	}
	if n := after.ev.ThrottledPeriods - before.ev.ThrottledPeriods; n > 0 {
		ev(sandbox.EventLimitCPU, fmt.Sprintf("CPU limit of %g vCPU reached; throttled in %d period(s)", s.spec.Resources.CPU, n), n)
	}
	if (after.kernel && after.diskFull) || (s.l.Kernel == nil && LayerFull(s.layerPath())) {
		ev(sandbox.EventLimitDisk, fmt.Sprintf("writable layer of %d MiB is full", s.spec.Resources.DiskMB), 0)
	}
	if res.TimedOut {
		ev(sandbox.EventLimitTimeout, "timeout reached; the command and its children were killed", 0)
	}
	if res.Truncated {
		ev(sandbox.EventLimitOutput, "output beyond the capture limit was discarded", 0)
	}
	res.ResourceUsage = sandbox.ResourceUsage{NetworkEgressBytes: after.txNet - before.txNet}
	if ru != nil {
		res.ResourceUsage.CPUTimeMs = ru.CPUMicros / 1000
		res.ResourceUsage.PeakMemoryMB = float64(ru.MaxRSSKiB) / 1024
	}
	if s.l.CgroupCPU {
		// The command cannot have used more of the host's CPU than its whole sandbox did.
		res.ResourceUsage.CPUTimeMs = min(res.ResourceUsage.CPUTimeMs, (after.cpu - before.cpu).Milliseconds())
	}
}

// LayerFull reports whether the writable layer, which p is on, has (nearly) no space left.
func LayerFull(p string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) < 64<<10
}
