package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// runCmd is `airlock run`: create a sandbox, run one command in it, tear it down, exit with the
// command's status (124 timeout, 125 setup failure, 137 memory limit).
func runCmd(e *env, args []string) int {
	spec, timeout, asJSON, cmd, code := parseRun(e, args)
	if code >= 0 {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintln(e.stderr, "airlock run:", describe(err))
		return sandbox.ExitSetupError
	}
	cfg := config.Default()
	// A one-shot sandbox ends with this process, whatever happens to it: nobody will adopt it.
	cfg.Process.OrphanGraceSeconds = 0
	reg := levels.Registry(cfg, e.log)
	d, err := reg.Lookup(spec.Isolation)
	if err != nil {
		return fail(err)
	}
	// Ctrl-C or SIGTERM ends the sandbox like a timeout does, and exits 130/143.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id := sandbox.NewID("sbx_")
	sb, err := d.Create(ctx, id, spec)
	if err != nil {
		return fail(err)
	}
	defer sb.Destroy(context.Background())
	// Clean up after airlocks that were killed, while the command runs rather than after it.
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		if sw, ok := d.(driver.Sweeper); ok {
			sw.Sweep(context.Background())
		}
	}()

	req := sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: cmd}
	if asJSON {
		req.Capture = true
		req.Stdin = e.stdin
	} else {
		req.Stdin, req.Stdout, req.Stderr = e.stdin, e.stdout, e.stderr
	}
	execCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := sb.Exec(execCtx, req)
	if err != nil {
		return fail(err)
	}
	interrupted := ctx.Err() != nil
	if derr := sb.Destroy(context.Background()); derr != nil {
		e.log.Warn("teardown", "sandbox", id, "err", derr)
	}
	<-swept
	if asJSON {
		writeResult(e.stdout, res)
	} else {
		// Say why a limit stopped or slowed the command; the command's own output cannot.
		for _, ev := range res.LimitEvents {
			if ev.Type != sandbox.EventLimitCPU {
				fmt.Fprintf(e.stderr, "airlock: %s: %s\n", ev.Type, ev.Message)
			}
		}
	}
	switch {
	case interrupted:
		return 130
	case res.TimedOut:
		return sandbox.ExitTimeout
	case res.OOMKilled && res.ExitCode == 128+int(syscall.SIGKILL):
		return sandbox.ExitOOM
	}
	return res.ExitCode
}

// parseRun parses run's flags into a defaulted, validated spec. code >= 0 means: exit with it.
func parseRun(e *env, args []string) (spec sandbox.Spec, timeout time.Duration, asJSON bool, cmd []string, code int) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, in the user's spelling
	var sf specFlags
	sf.register(fs, &spec)
	timeout = time.Duration(sandbox.Limits.MaxDuration.Default) * time.Second
	fs.Var(durationFlag{&timeout}, "timeout", "kill the command after this long, e.g. 30s (default 1h)")
	fs.BoolVar(&asJSON, "json", false, "print the exec result object (SPEC §6) instead of streaming output")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: airlock run [flags] -- CMD [ARG...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(e.stderr)
			fs.Usage()
			return spec, 0, false, nil, 0
		}
		// The flag package says "-disk"; airlock's flags are spelled "--disk".
		msg := strings.Replace(err.Error(), " -", " --", 1)
		fmt.Fprintf(e.stderr, "airlock run: %s (see airlock run --help)\n", msg)
		return spec, 0, false, nil, sandbox.ExitSetupError
	}
	// Zero means "the default" in the API's JSON; on the command line an explicit 0 is a
	// mistake and gets the range, like any other value out of it.
	zeroErr := explicitZero(fs)
	if zeroErr != nil {
		fmt.Fprintln(e.stderr, "airlock run:", describe(zeroErr))
		return spec, 0, false, nil, sandbox.ExitSetupError
	}
	cmd = fs.Args()
	if len(cmd) == 0 {
		fmt.Fprintln(e.stderr, "airlock run: no command given (usage: airlock run [flags] -- CMD [ARG...])")
		return spec, 0, false, nil, sandbox.ExitSetupError
	}
	for _, kv := range sf.envs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(e.stderr, "airlock run: --env %q: want K=V\n", kv)
			return spec, 0, false, nil, sandbox.ExitSetupError
		}
		if spec.Environment == nil {
			spec.Environment = map[string]string{}
		}
		spec.Environment[k] = v
	}
	sf.apply(&spec)
	spec.Timeout.MaxDurationSeconds = int64(math.Ceil(timeout.Seconds()))
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		fmt.Fprintln(e.stderr, "airlock run:", describe(err))
		return spec, 0, false, nil, sandbox.ExitSetupError
	}
	return spec, timeout, asJSON, cmd, -1
}

// describe renders an error for a person: field errors name the flag.
func describe(err error) string {
	var fe *errdefs.FieldError
	if errors.As(err, &fe) {
		name := fe.Field
		if f, ok := flagForField[fe.Field]; ok {
			name = f
		} else if strings.HasPrefix(fe.Field, "filesystem.readOnly") {
			name = "--ro"
		} else if strings.HasPrefix(fe.Field, "filesystem.readWrite") {
			name = "--rw"
		} else if strings.HasPrefix(fe.Field, "filesystem.blocked") {
			name = "--block"
		}
		return name + ": " + fe.Message
	}
	return err.Error()
}
