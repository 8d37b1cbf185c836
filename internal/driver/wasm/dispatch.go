package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// exitTrap is the status of a command whose module trapped (an unreachable instruction, a stack
// overflow of the wasm stack): the nearest a process has is an abort.
const exitTrap = 128 + int(unix.SIGABRT)

// Exec implements driver.Sandbox: the command runs on the sandbox's worker (started if none
// runs), which instantiates its interpreter afresh from the compiled module. Any number of execs
// may run at once, up to maxProcesses (each is the wasm level's process).
//
// When ctx is done the worker stops the command at its next loop or call, and the result says
// TimedOut. A memory growth past the sandbox's memoryMb is refused: the interpreter sees an
// allocation failure (MemoryError, out of memory) and the result has a limit.memory event. Should
// the kernel kill the worker all the same (the jail's cgroup is memoryMb, the store included),
// the command ends with 137 and oomKilled.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (res sandbox.ExecResult, err error) {
	res = sandbox.ExecResult{ExecutionID: req.ID, LimitEvents: []sandbox.LimitEvent{}}
	if len(req.Command) == 0 {
		return res, fmt.Errorf("exec: empty command: %w", errdefs.ErrInvalidArgument)
	}
	if req.TTY {
		return res, fmt.Errorf("exec %s: the wasm level has no terminals (WASI has none); run without a TTY: %w", req.ID, errdefs.ErrUnavailable)
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	spec, running, err := s.begin(req.ID)
	if err != nil {
		return res, err
	}
	defer s.end()
	limit := req.OutputLimit
	if limit <= 0 {
		limit = sandbox.DefaultOutputLimit
	}
	if !req.Capture {
		limit = 0
	}
	stdout, stderr := sandbox.NewCapture(limit, req.Stdout), sandbox.NewCapture(limit, req.Stderr)
	defer func() {
		stdout.Result(&res.Stdout, &res.Truncated)
		stderr.Result(&res.Stderr, &res.Truncated)
		if res.Truncated {
			event(&res, sandbox.EventLimitOutput, "output beyond the capture limit was discarded")
		}
	}()
	if int64(running) > spec.Resources.MaxProcesses {
		fmt.Fprintf(stderr, "airlock: %d commands already run in this sandbox, its limit (maxProcesses)\n", running-1)
		res.ExitCode = 126
		event(&res, sandbox.EventLimitPids, fmt.Sprintf("process limit of %d reached: each command is one", spec.Resources.MaxProcesses))
		return res, nil
	}
	w, err := s.acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("exec %s: %w", req.ID, err)
	}
	defer s.release(w)
	workdir := req.Workdir
	if workdir == "" {
		workdir = spec.Workdir
	}
	// The sandbox's end stops the command as a timeout would, but is not one.
	run, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.ctx, stop)()

	start := time.Now()
	rep, err := w.run(run, execRequest{Argv: req.Command, SandboxEnv: spec.Environment, Env: req.Env, Workdir: workdir},
		req.Stdin, req.Signal, stdout, stderr)
	res.DurationMs = int64((time.Since(start) + time.Millisecond - 1) / time.Millisecond)
	if errors.Is(err, errWorkerGone) {
		s.workerGone(w, &res, stderr, ctx.Err() != nil)
		return res, nil
	}
	if rep.Error != "" {
		return res, fmt.Errorf("exec %s: %s: %w", req.ID, rep.Error, errdefs.ErrUnavailable)
	}
	res.ExitCode = rep.ExitCode
	res.ResourceUsage = sandbox.ResourceUsage{CPUTimeMs: rep.CPUTimeMs, PeakMemoryMB: rep.PeakMemoryMB}
	switch {
	case ctx.Err() != nil:
		res.TimedOut, res.ExitCode = true, sandbox.ExitTimeout
		event(&res, sandbox.EventLimitTimeout, "timeout reached; the command was stopped")
	case run.Err() != nil:
		res.ExitCode = 128 + int(unix.SIGKILL)
		fmt.Fprintln(stderr, "airlock: the sandbox ended while the command ran")
	}
	switch {
	case rep.Refused > 0:
		event(&res, sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached; linear memory growth refused %d time(s)", spec.Resources.MemoryMB, rep.Refused))
	case rep.OOM:
		event(&res, sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached; the interpreter's allocator refused", spec.Resources.MemoryMB))
	}
	// A command that failed once the limit refused it memory died of the limit, as one the
	// kernel's OOM killer ends: same status, same flag. One that caught the error and went on
	// keeps its own status (the event still says the limit was reached).
	if (rep.Refused > 0 || rep.OOM) && res.ExitCode != 0 && !res.TimedOut {
		res.ExitCode, res.OOMKilled = sandbox.ExitOOM, true
	}
	if rep.WritesRefused > 0 {
		event(&res, sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached: the store's pages count, and %d write(s) to it were refused", spec.Resources.MemoryMB, rep.WritesRefused))
	}
	if rep.DiskFull {
		event(&res, sandbox.EventLimitDisk, fmt.Sprintf("store of %d MiB is full", spec.Resources.DiskMB))
	}
	return res, nil
}

// workerGone fills the result of a command whose worker ended under it: killed by the kernel
// at the jail's memory limit, stopped because it did not stop a timed-out command, or gone with
// the sandbox.
func (s *Sandbox) workerGone(w *worker, res *sandbox.ExecResult, stderr interface{ Write([]byte) (int, error) }, timedOut bool) {
	res.ExitCode = 128 + int(unix.SIGKILL)
	switch {
	case w.res.OOMKilled:
		res.ExitCode, res.OOMKilled = sandbox.ExitOOM, true
		event(res, sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached (the store's pages count); the kernel killed the sandbox's worker", s.spec.Resources.MemoryMB))
	case timedOut:
	default:
		fmt.Fprintln(stderr, "airlock: the sandbox ended while the command ran")
	}
	if timedOut {
		res.TimedOut, res.ExitCode = true, sandbox.ExitTimeout
		event(res, sandbox.EventLimitTimeout, "timeout reached; the command was stopped")
	}
	if host.LayerFull(fmt.Sprintf("/proc/%d/root%s", s.jail.InitPid(), jailStore)) {
		event(res, sandbox.EventLimitDisk, fmt.Sprintf("store of %d MiB is full", s.spec.Resources.DiskMB))
	}
}

func event(res *sandbox.ExecResult, typ, msg string) {
	res.LimitEvents = append(res.LimitEvents, sandbox.LimitEvent{Type: typ, Message: msg, Time: time.Now()})
}

// begin counts an exec in, and returns the spec it runs with and how many execs run with it.
func (s *Sandbox) begin(id string) (sandbox.Spec, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return sandbox.Spec{}, 0, fmt.Errorf("exec %s: sandbox %s is destroyed: %w", id, s.id, errdefs.ErrConflict)
	}
	s.running++
	return s.spec, s.running, nil
}

func (s *Sandbox) end() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
}

// findWorker returns the host pid of the child of init whose command line is a worker's.
func findWorker(initPid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", initPid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + f + "/cmdline")
			if strings.Contains(string(cmd), "\x00"+workerArg) && !strings.Contains(string(cmd), extractArg) {
				if pid, err := strconv.Atoi(f); err == nil {
					return pid
				}
			}
		}
	}
	return 0
}
