package wasm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/driver/wasm/node"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// exitTrap is the status of a command whose module trapped (an unreachable instruction, a stack
// overflow of the wasm stack): the nearest a process has is an abort.
const exitTrap = 128 + int(syscall.SIGABRT)

// Exec implements driver.Sandbox: the command's interpreter is instantiated afresh from its
// compiled module, on this goroutine, which is locked to its thread so that the thread's CPU
// time (the kernel's count) is the command's. Any number of execs may run at once, up to
// maxProcesses (each is the wasm level's process).
//
// When ctx is done the command stops at its next loop or call (CPython's module is closed by
// wazero; QuickJS stops itself through its interrupt hook), and the result says TimedOut. A memory growth past the sandbox's memoryMb is refused: the interpreter sees an
// allocation failure (MemoryError, out of memory) and the result has a limit.memory event.
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
	spec, err := s.begin(req.ID)
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
			s.event(&res, sandbox.EventLimitOutput, "output beyond the capture limit was discarded")
		}
	}()
	if int64(spec.running) > spec.Resources.MaxProcesses {
		fmt.Fprintf(stderr, "airlock: %d commands already run in this sandbox, its limit (maxProcesses)\n", spec.running-1)
		res.ExitCode = 126
		s.event(&res, sandbox.EventLimitPids, fmt.Sprintf("process limit of %d reached: each command is one", spec.Resources.MaxProcesses))
		return res, nil
	}
	cmd, err := parseCommand(req.Command)
	if err != nil {
		var ce *commandError
		if errors.As(err, &ce) {
			if ce.exit == 127 && strings.Contains(req.Command[0], "/") && s.exists(req.Command[0], spec.Workdir) {
				ce = &commandError{126, fmt.Sprintf("airlock: %s: not executable (the wasm level runs python3 and node only)", req.Command[0])}
			}
			fmt.Fprintln(stderr, ce.msg)
			res.ExitCode = ce.exit
			return res, nil
		}
		return res, err
	}
	dir := req.Workdir
	if dir == "" {
		dir = spec.Workdir
	}
	if !s.isDir(dir) {
		fmt.Fprintf(stderr, "airlock: working directory %s: no such directory\n", dir)
		res.ExitCode = 126
		return res, nil
	}
	env := s.env(spec, cmd, req, dir)

	// The run ends when the caller's ctx does (a timeout), when the sandbox is destroyed, or on a
	// signal: whichever comes first is the result's reason.
	run, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer context.AfterFunc(s.ctx, func() { stop(errDestroyed) })()
	if req.Signal != nil {
		go func() {
			select {
			case sig, ok := <-req.Signal:
				if ok {
					stop(signalled(sig))
				}
			case <-run.Done():
			}
		}()
	}
	mem := s.mem.forExec()
	defer mem.unmap()
	run = experimental.WithMemoryAllocator(run, mem)
	stdin := stdinFor(run, req.Stdin)

	start := time.Now()
	runtime.LockOSThread()
	cpu0 := threadCPU()
	var exit int
	switch cmd.lang {
	case langPython:
		exit, err = s.runPython(run, cmd, env, stdin, stdout, stderr)
	default:
		exit, err = s.runJS(run, mem, cmd, env, dir, stdin, stdout, stderr)
	}
	cpu := threadCPU() - cpu0
	runtime.UnlockOSThread()
	res.DurationMs = int64((time.Since(start) + time.Millisecond - 1) / time.Millisecond)
	s.mu.Lock()
	s.cpu += cpu
	s.mu.Unlock()
	if err != nil {
		return res, err
	}
	res.ExitCode = exit
	res.ResourceUsage = sandbox.ResourceUsage{CPUTimeMs: cpu.Milliseconds(), PeakMemoryMB: float64(mem.peakBytes()) / (1 << 20)}
	switch cause := context.Cause(run); {
	case ctx.Err() != nil:
		res.TimedOut, res.ExitCode = true, sandbox.ExitTimeout
		s.event(&res, sandbox.EventLimitTimeout, "timeout reached; the command was stopped")
	case errors.Is(cause, errDestroyed):
		res.ExitCode = 128 + int(unix.SIGKILL)
		fmt.Fprintln(stderr, "airlock: the sandbox ended while the command ran")
	case run.Err() != nil:
		var sig signalled
		if errors.As(cause, &sig) {
			res.ExitCode = 128 + int(sig)
		}
	}
	n := mem.refused.Load()
	switch {
	case n > 0:
		s.event(&res, sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached; linear memory growth refused %d time(s)", spec.Resources.MemoryMB, n))
	case mem.oom.Load():
		s.event(&res, sandbox.EventLimitMemory, fmt.Sprintf("memory limit of %d MiB reached; the interpreter's allocator refused", spec.Resources.MemoryMB))
	}
	// A command that failed once the limit refused it memory died of the limit, as one the
	// kernel's OOM killer ends: same status, same flag. One that caught the error and went on
	// keeps its own status (the event still says the limit was reached).
	if (n > 0 || mem.oom.Load()) && res.ExitCode != 0 && !res.TimedOut {
		res.ExitCode, res.OOMKilled = sandbox.ExitOOM, true
	}
	if process.LayerFull(s.dir) {
		s.event(&res, sandbox.EventLimitDisk, fmt.Sprintf("store of %d MiB is full", spec.Resources.DiskMB))
	}
	return res, nil
}

var errDestroyed = errors.New("sandbox destroyed")

// signalled is a signal an exec's caller sent: the wasm level has no handlers, so every signal
// ends the command, as SIGKILL would.
type signalled syscall.Signal

func (s signalled) Error() string { return "signal " + syscall.Signal(s).String() }

// execSpec is the sandbox's spec as an exec starts, and how many execs run with it.
type execSpec struct {
	sandbox.Spec
	running int
}

// begin counts an exec in.
func (s *Sandbox) begin(id string) (execSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return execSpec{}, fmt.Errorf("exec %s: sandbox %s is destroyed: %w", id, s.id, errdefs.ErrConflict)
	}
	s.running++
	return execSpec{Spec: s.spec, running: s.running}, nil
}

func (s *Sandbox) end() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
}

func (s *Sandbox) event(res *sandbox.ExecResult, typ, msg string) {
	res.LimitEvents = append(res.LimitEvents, sandbox.LimitEvent{Type: typ, Message: msg, Time: time.Now()})
}

// isDir reports whether the guest path p is a directory.
func (s *Sandbox) isDir(p string) bool {
	st, ok := s.stat(p)
	return ok && st.Mode.IsDir()
}

// exists reports whether the guest path p (relative to dir when not absolute) exists.
func (s *Sandbox) exists(p, dir string) bool {
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	_, ok := s.stat(p)
	return ok
}

func (s *Sandbox) stat(p string) (sysStat, bool) {
	fsys, rel, ok := s.mounts.Resolve(p)
	if !ok {
		return sysStat{}, false
	}
	st, errno := fsys.Stat(rel)
	return st, errno == 0
}

// env is a command's environment: the level's defaults, the spec's, the command line's
// assignments, the request's.
func (s *Sandbox) env(spec execSpec, cmd command, req sandbox.ExecRequest, dir string) map[string]string {
	user := spec.User
	env := map[string]string{
		"HOME": home(user), "USER": user, "LOGNAME": user, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
	}
	maps.Copy(env, spec.Environment)
	maps.Copy(env, cmd.env)
	maps.Copy(env, req.Env)
	env["PWD"] = dir
	if cmd.lang == langPython {
		env["PYTHONHOME"] = "/usr/local"
		// The library is read-only: nothing could be written anyway.
		env["PYTHONDONTWRITEBYTECODE"] = "1"
		// Output goes to the caller as it comes, as from a pipe it would not.
		env["PYTHONUNBUFFERED"] = "1"
		// PWD: site/airlock-cwd.pth moves there.

	}
	return env
}

// runPython runs CPython's WASI command with the command's arguments.
func (s *Sandbox) runPython(ctx context.Context, cmd command, env map[string]string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	rt, mod, err := s.d.rt.pythonModule(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	cfg := wazero.NewModuleConfig().WithName("").
		WithArgs(append([]string{cmd.name}, pythonArgs(cmd.args, env["PWD"])...)...).
		WithStdin(stdin).WithStdout(stdout).WithStderr(stderr).
		WithFSConfig(s.fsc).
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader).
		WithNanosleep(func(ns int64) { sleep(ctx, ns) })
	for k, v := range env {
		cfg = cfg.WithEnv(k, v)
	}
	m, err := rt.InstantiateModule(ctx, mod, cfg)
	if m != nil {
		m.Close(context.WithoutCancel(ctx))
	}
	return exitStatus(ctx, err, stderr)
}

// pythonArgs makes a relative script path absolute against the working directory: CPython makes
// it absolute while it starts, before site (site/airlock-cwd.pth) moves it to PWD, and WASI
// starts every program in "/".
func pythonArgs(args []string, dir string) []string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-m" || a == "-":
			return args // code, a module or stdin: no script path
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++ // an option with its value in the next argument
		case a == "--":
			if i+1 < len(args) && args[i+1] != "-" {
				return withArg(args, i+1, dir)
			}
			return args
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-"):
			if strings.ContainsAny(a[1:], "cm") {
				return args // -Ic CODE, -um MOD: the option letters end with c or m
			}
		default:
			return withArg(args, i, dir)
		}
	}
	return args
}

func withArg(args []string, i int, dir string) []string {
	if path.IsAbs(args[i]) {
		return args
	}
	out := slices.Clone(args)
	out[i] = path.Join(dir, args[i])
	return out
}

// sleep is the guest's nanosleep: it ends early when ctx does (time.sleep(3600) past a timeout),
// which wazero's own, a plain time.Sleep, would not.
func sleep(ctx context.Context, ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// runJS runs the node-style command line on QuickJS.
func (s *Sandbox) runJS(ctx context.Context, mem *execMemory, cmd command, env map[string]string, dir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	r, err := s.d.rt.jsRunnerFor(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	res, err := r.Run(ctx, node.Config{
		Args: cmd.args, Env: env, Dir: dir, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		FS: s.mounts, MemoryLimit: int64(s.mem.limit),
	})
	if err != nil && ctx.Err() != nil {
		return 128 + int(unix.SIGKILL), nil // stopped: the caller reads why from ctx
	}
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	if res.OOM {
		mem.oom.Store(true)
	}
	return res.ExitCode, nil
}

// exitStatus turns how a module ended into a command's status. A module closed because ctx
// ended is the caller's to read from ctx; a trap is reported on stderr.
func exitStatus(ctx context.Context, err error, stderr io.Writer) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case sys.ExitCodeDeadlineExceeded, sys.ExitCodeContextCanceled:
			return 128 + int(unix.SIGKILL), nil
		}
		return int(ee.ExitCode()), nil
	}
	if ctx.Err() != nil {
		return 128 + int(unix.SIGKILL), nil
	}
	if errors.Is(err, errdefs.ErrUnavailable) {
		return 0, err
	}
	fmt.Fprintf(stderr, "airlock: the module trapped: %v\n", firstLine(err.Error()))
	return exitTrap, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// threadCPU is the CPU time of the calling thread, as the kernel counts it.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// stdinFor is r as a guest reads it. A reader that can block (a pipe, a stream) is read through
// a pipe that ctx closes, so that a command waiting for input still ends at its timeout.
func stdinFor(ctx context.Context, r io.Reader) io.Reader {
	switch r.(type) {
	case nil:
		return strings.NewReader("")
	case *strings.Reader:
		return r
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err)
	}()
	context.AfterFunc(ctx, func() { pr.CloseWithError(io.EOF) })
	return pr
}
