package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// execFlags names exec's flags behind the fields of an exec request.
var execFlags = map[string]string{"command": "CMD", "env": "--env", "workdir": "--workdir", "timeout": "--timeout"}

// maxJSONStdin bounds the stdin that `exec --json -i` reads, since it is sent in one request.
const maxJSONStdin = 16 << 20

// execOptions is a parsed `airlock exec` command line.
type execOptions struct {
	id          string
	req         api.ExecRequest
	interactive bool // -i: forward stdin even from a terminal
	tty         bool // -t: a pseudo-terminal in the sandbox
	asJSON      bool // print the exec result object instead of streaming
}

// execCmd is `airlock exec`: run a command in a sandbox and exit with its status (124 when its
// timeout killed it, 137 when the memory limit did).
//
// Output is streamed over the interactive exec WebSocket as the command prints it. Stdin is
// forwarded with -i, and also whenever it is not a terminal, so that `echo hi | airlock exec ID
// -- cat` works; a terminal stdin without -i is not read (the command sees its end at once). -t
// gives the command a pseudo-terminal and puts the local terminal in raw mode while it runs.
// With --json the command runs to completion through POST .../exec and the result object is
// printed; stdin is sent only with -i, read whole first.
func execCmd(e *env, args []string) int {
	r := newRemote(e, "exec", "[-i] [-t] [flags] ID [--] CMD [ARG...]")
	o, code := parseExec(r, args)
	if code >= 0 {
		return code
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	if o.asJSON {
		return execJSON(r, o)
	}
	return execStream(r, o)
}

// parseExec parses exec's command line; code >= 0 means: exit with it.
func parseExec(r *remote, args []string) (o execOptions, code int) {
	// The flag package knows no bundled short flags; -it is too common not to take.
	var expanded []string
	for i, a := range args {
		if a == "--" || (len(a) > 0 && a[0] != '-') {
			expanded = append(expanded, args[i:]...)
			break
		}
		if a == "-it" || a == "-ti" {
			expanded = append(expanded, "-i", "-t")
			continue
		}
		expanded = append(expanded, a)
	}
	fs := r.fs
	var envs listFlag
	var timeout time.Duration
	fs.BoolVar(&o.interactive, "i", false, "forward stdin even when it is a terminal")
	fs.BoolVar(&o.interactive, "interactive", false, "the same as -i")
	fs.BoolVar(&o.tty, "t", false, "run the command on a pseudo-terminal (CMD defaults to /bin/sh)")
	fs.BoolVar(&o.tty, "tty", false, "the same as -t")
	fs.Var(&envs, "env", "K=V environment variable (repeatable)")
	fs.StringVar(&o.req.Workdir, "workdir", "", "working directory (default the sandbox's)")
	fs.Var(durationFlag{&timeout}, "timeout", "kill the command after this long, e.g. 30s")
	fs.BoolVar(&o.asJSON, "json", false, "print the exec result object (docs/api.md#http-api) instead of streaming output")
	pos, code := r.parse(expanded, false)
	if code >= 0 {
		return o, code
	}
	if len(pos) == 0 {
		return o, r.usageError("want a sandbox ID")
	}
	o.id, pos = pos[0], pos[1:]
	if len(pos) > 0 && pos[0] == "--" {
		pos = pos[1:]
	}
	switch {
	case len(pos) > 0:
		o.req.Command = pos
	case o.tty || o.interactive:
		o.req.Command = api.Command{"/bin/sh"}
	default:
		return o, r.usageError("no command given")
	}
	if o.asJSON && o.tty {
		return o, r.usageError("--json and -t do not go together")
	}
	var err error
	if o.req.Env, err = keyValues("env", envs); err != nil {
		return o, r.usageError("%v", err)
	}
	o.req.Timeout = math.Ceil(timeout.Seconds()*1000) / 1000
	return o, -1
}

// execJSON runs the command to completion and prints the result object.
func execJSON(r *remote, o execOptions) int {
	ctx, stop := interruptible()
	defer stop()
	if o.interactive && r.stdin != nil {
		b, err := io.ReadAll(io.LimitReader(r.stdin, maxJSONStdin+1))
		if err != nil {
			return r.fail(fmt.Errorf("reading stdin: %w", err), nil)
		}
		if len(b) > maxJSONStdin {
			return r.usageError("stdin is over %d MiB; stream it without --json", maxJSONStdin>>20)
		}
		o.req.Stdin = string(b)
	}
	res, err := r.c.Exec(ctx, o.id, o.req)
	if err != nil {
		return r.fail(err, execFlags)
	}
	_ = writeResult(r.stdout, res) // stdout's errors go unchecked, as fmt's prints do
	return execStatus(res)
}

// execStream runs the command over the interactive exec WebSocket.
func execStream(r *remote, o execOptions) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noCapture := false
	o.req.CaptureOutput = &noCapture // the output is streamed; the result need not repeat it
	start := api.ExecStart{ExecRequest: o.req, TTY: o.tty}
	stdio := client.Stdio{Stdout: r.stdout, Stderr: r.stderr}
	termIn := r.stdin != nil && isTerminal(r.stdin)
	if r.stdin != nil && (o.interactive || !termIn) {
		stdio.Stdin = r.stdin
	}

	restore := func() {}
	if o.tty && termIn {
		fd := int(r.stdin.Fd())
		var err error
		if restore, err = makeRaw(fd); err != nil {
			return r.fail(fmt.Errorf("putting the terminal in raw mode: %w", err), nil)
		}
		defer restore() // also on a panic
		start.Rows, start.Cols = windowSize(fd)
		resize := make(chan client.Winsize, 1)
		stopResize := forwardResize(fd, resize)
		defer stopResize()
		stdio.Resize = resize
	}

	// Signals go to the command; the third Ctrl-C gives up on it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	fwd := make(chan syscall.Signal, 4)
	stdio.Signal = fwd
	done := make(chan struct{})
	defer close(done)
	go func() {
		interrupts := 0
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				sig := s.(syscall.Signal)
				if sig == syscall.SIGINT {
					if interrupts++; interrupts == 3 {
						cancel()
					}
				}
				select {
				case fwd <- sig:
				default:
				}
			}
		}
	}()

	res, err := r.c.ExecInteractive(ctx, o.id, start, stdio)
	restore() // before printing anything of airlock's own
	if err != nil {
		return r.fail(err, execFlags)
	}
	for _, ev := range res.LimitEvents {
		if ev.Type != sandbox.EventLimitCPU {
			fmt.Fprintf(r.stderr, "airlock: %s: %s\n", ev.Type, ev.Message)
		}
	}
	return execStatus(res)
}

// execStatus is the exit status for a command's result, as run gives it.
func execStatus(res api.ExecResult) int {
	switch {
	case res.TimedOut:
		return sandbox.ExitTimeout
	case res.OOMKilled && res.ExitCode == 128+int(syscall.SIGKILL):
		return sandbox.ExitOOM
	case res.ExitCode < 0 || res.ExitCode > 255:
		return exitError
	}
	return res.ExitCode
}
