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

	"github.com/airlockrun/airlock/internal/driver/wasm/node"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
)

// run runs one command in the worker: the command's interpreter is instantiated afresh from its
// compiled module, on this goroutine, which is locked to its thread so that the thread's CPU time
// (the kernel's count) is the command's.
//
// When ctx is done the command stops at its next loop or call (CPython's module is closed by
// wazero; QuickJS stops itself through its interrupt hook); its cause says why (errStopped, or a
// signal). A memory growth past the sandbox's memoryMb is refused: the interpreter sees an
// allocation failure (MemoryError, out of memory), and the reply counts it.
func (g *guest) run(ctx context.Context, req execRequest, stdin io.Reader, stdout, stderr io.Writer) (rep execReply) {
	cmd, err := parseCommand(req.Argv)
	if err != nil {
		var ce *commandError
		if !errors.As(err, &ce) {
			return execReply{Error: err.Error()}
		}
		if ce.exit == 127 && strings.Contains(req.Argv[0], "/") && g.exists(req.Argv[0], req.Workdir) {
			ce = &commandError{126, fmt.Sprintf("airlock: %s: not executable (the wasm level runs python3 and node only)", req.Argv[0])}
		}
		fmt.Fprintln(stderr, ce.msg)
		return execReply{ExitCode: ce.exit}
	}
	dir := req.Workdir
	if !g.isDir(dir) {
		fmt.Fprintf(stderr, "airlock: working directory %s: no such directory\n", dir)
		return execReply{ExitCode: 126}
	}
	env := g.env(cmd, req, dir)
	// The command's peak memory is the worker's, as a process's peak resident set is: the
	// interpreters' code and the runtime as the command starts (not the other commands'
	// modules) with the command's linear memory, or the most the worker held when a growth
	// of the command's memory was checked, whichever is more.
	used, _ := g.mem.reading()
	own := max(rssAnon("self"), used) - used
	mem := g.mem.forExec()
	defer mem.unmap()
	refused0 := g.guard.refused.Load()
	run := experimental.WithMemoryAllocator(ctx, mem)

	runtime.LockOSThread()
	cpu0 := threadCPU()
	var exit int
	switch cmd.lang {
	case langPython:
		exit, err = g.runPython(run, cmd, env, stdin, stdout, stderr)
	default:
		exit, err = g.runJS(run, mem, cmd, env, dir, stdin, stdout, stderr)
	}
	cpu := threadCPU() - cpu0
	runtime.UnlockOSThread()
	if err != nil {
		return execReply{Error: err.Error()}
	}
	rep = execReply{ExitCode: exit, CPUTimeMs: cpu.Milliseconds(), PeakMemoryMB: float64(max(own+mem.peakBytes(), mem.resident.Load())) / (1 << 20),
		Refused: mem.refused.Load(), OOM: mem.oom.Load(), DiskFull: host.LayerFull(g.root),
		WritesRefused: g.guard.refused.Load() - refused0}
	if cause := context.Cause(ctx); ctx.Err() != nil {
		rep.Stopped = true
		var sig signalled
		if errors.As(cause, &sig) {
			rep.ExitCode = 128 + int(sig)
		} else {
			rep.ExitCode = 128 + int(unix.SIGKILL)
		}
	}
	return rep
}

// signalled is a signal an exec's caller sent: the wasm level has no handlers, so every signal
// ends the command, as SIGKILL would.
type signalled syscall.Signal

func (s signalled) Error() string { return "signal " + syscall.Signal(s).String() }

// isDir reports whether the guest path p is a directory.
func (g *guest) isDir(p string) bool {
	st, ok := g.stat(p)
	return ok && st.Mode.IsDir()
}

// exists reports whether the guest path p (relative to dir when not absolute) exists.
func (g *guest) exists(p, dir string) bool {
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	_, ok := g.stat(p)
	return ok
}

func (g *guest) stat(p string) (sysStat, bool) {
	fsys, rel, ok := g.mounts.Resolve(p)
	if !ok {
		return sysStat{}, false
	}
	st, errno := fsys.Stat(rel)
	return st, errno == 0
}

// env is a command's environment: the level's defaults, the sandbox's, the command line's
// assignments, the request's.
func (g *guest) env(cmd command, req execRequest, dir string) map[string]string {
	user := g.spec.User
	env := map[string]string{
		"HOME": home(user), "USER": user, "LOGNAME": user, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
	}
	maps.Copy(env, req.SandboxEnv)
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
func (g *guest) runPython(ctx context.Context, cmd command, env map[string]string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	rt, mod, err := g.rt.pythonModule(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	cfg := wazero.NewModuleConfig().WithName("").
		WithArgs(append([]string{cmd.name}, pythonArgs(cmd.args, env["PWD"])...)...).
		WithStdin(stdin).WithStdout(stdout).WithStderr(stderr).
		WithFSConfig(g.fsc).
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
func (g *guest) runJS(ctx context.Context, mem *execMemory, cmd command, env map[string]string, dir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	r, err := g.rt.jsRunnerFor(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	res, err := r.Run(ctx, node.Config{
		Args: cmd.args, Env: env, Dir: dir, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		FS: g.mounts, MemoryLimit: int64(g.mem.limit),
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
