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

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// runCmd is `airlock run`: create a sandbox, run one command in it, tear it down, exit with the
// command's status (124 timeout, 125 setup failure, 137 memory limit).
func runCmd(e *env, args []string) int {
	ra, code := parseRun(e, args)
	if code >= 0 {
		return code
	}
	spec, timeout, asJSON, cmd := ra.spec, ra.timeout, ra.asJSON, ra.cmd
	fail := func(err error) int {
		fmt.Fprintln(e.stderr, "airlock run:", describe(err))
		return sandbox.ExitSetupError
	}
	cfg, err := ra.host.load(func(c *levels.Config) {
		// A one-shot sandbox ends with this process, whatever happens to it: nobody will adopt it.
		c.Process.OrphanGraceSeconds = 0
		c.MicroVM.OrphanGraceSeconds = 0
	})
	if err != nil {
		return fail(err)
	}
	// Without --isolation the level is the configuration's default (container unless it says
	// otherwise), as for a create through the daemon.
	if !ra.isolationGiven && spec.Isolation != cfg.Defaults.Isolation {
		spec.Isolation = cfg.Defaults.Isolation
		if err := sandbox.Validate(&spec); err != nil {
			return fail(errors.New(describe(err)))
		}
	}
	var network *egress.Service
	if spec.Network.EgressPolicy != sandbox.EgressNone {
		if network, err = levels.Network(cfg, e.log); err != nil {
			return fail(err)
		}
		network.SetSink(func(_ string, ev netpolicy.Event) {
			// The agent (or its operator) reads why the network said no; allowed traffic
			// only with --network-log.
			if !ev.Allow || ra.networkLog {
				fmt.Fprintf(e.stderr, "airlock: network: %s: %s\n", ev, ev.Reason)
			}
		})
	}
	images, _ := levels.Images(cfg, false, e.log) // why not is logged; --image is then refused
	reg := levels.Registry(cfg, network, images, e.log)
	d, err := reg.Lookup(spec.Isolation)
	if err != nil && !ra.isolationGiven {
		return fail(fmt.Errorf("%w; with no --isolation the level is the default, %s (config defaults.isolation): install what it needs "+
			"(for container, gVisor's runsc: make deps), pass --isolation (e.g. --isolation process), or set defaults.isolation in --config", err, spec.Isolation))
	}
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
	defer func() { // after a failure; after the teardown below, a second Destroy does nothing
		if derr := sb.Destroy(context.Background()); derr != nil {
			e.log.Warn("teardown", "sandbox", id, "err", derr)
		}
	}()
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
		_ = writeResult(e.stdout, res) // stdout's errors go unchecked, as fmt's prints do
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

// runArgs are run's parsed flags.
type runArgs struct {
	spec sandbox.Spec
	// isolationGiven: --isolation was given; otherwise the configuration's default applies.
	isolationGiven bool
	timeout        time.Duration
	asJSON         bool
	networkLog     bool
	cmd            []string
	host           hostFlags
}

// parseRun parses run's flags into a defaulted, validated spec. code >= 0 means: exit with it.
func parseRun(e *env, args []string) (ra runArgs, code int) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)    // errors are reported below, in the user's spelling
	sf := specFlags{host: true} // the operator's shell: --ro/--rw name host paths, --rootfs a host directory
	spec := &ra.spec
	sf.register(fs, spec)
	ra.timeout = time.Duration(sandbox.Limits.MaxDuration.Default) * time.Second
	fs.Var(durationFlag{&ra.timeout}, "timeout", "kill the command after this long, e.g. 30s")
	fs.BoolVar(&ra.asJSON, "json", false, "print the exec result object (docs/api.md#http-api) instead of streaming output")
	fs.BoolVar(&ra.networkLog, "network-log", false, "print every network decision to stderr, not only denials")
	fs.StringVar(&ra.host.configFile, "config", "", "configuration file (JSON; see docs/configuration.md)")
	fs.Usage = func() {} // printed below, once, for -h
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(e.stderr, "usage: airlock run [flags] -- CMD [ARG...]")
			fs.SetOutput(e.stderr)
			fs.PrintDefaults()
			return ra, 0
		}
		// The flag package says "-disk"; airlock's flags are spelled "--disk".
		msg := strings.Replace(err.Error(), " -", " --", 1)
		fmt.Fprintf(e.stderr, "airlock run: %s (see airlock run --help)\n", msg)
		return ra, sandbox.ExitSetupError
	}
	// Zero means "the default" in the API's JSON; on the command line an explicit 0 is a
	// mistake and gets the range, like any other value out of it.
	zeroErr := explicitZero(fs)
	if zeroErr != nil {
		fmt.Fprintln(e.stderr, "airlock run:", describe(zeroErr))
		return ra, sandbox.ExitSetupError
	}
	ra.cmd = fs.Args()
	if len(ra.cmd) == 0 {
		fmt.Fprintln(e.stderr, "airlock run: no command given (usage: airlock run [flags] -- CMD [ARG...])")
		return ra, sandbox.ExitSetupError
	}
	for _, kv := range sf.envs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(e.stderr, "airlock run: --env %q: want K=V\n", kv)
			return ra, sandbox.ExitSetupError
		}
		if spec.Environment == nil {
			spec.Environment = map[string]string{}
		}
		spec.Environment[k] = v
	}
	if err := sf.apply(spec); err != nil {
		fmt.Fprintln(e.stderr, "airlock run:", describe(err))
		return ra, sandbox.ExitSetupError
	}
	spec.Timeout.MaxDurationSeconds = int64(math.Ceil(ra.timeout.Seconds()))
	ra.isolationGiven = spec.Isolation != ""
	sandbox.SetDefaults(spec)
	if err := sandbox.Validate(spec); err != nil {
		fmt.Fprintln(e.stderr, "airlock run:", describe(err))
		return ra, sandbox.ExitSetupError
	}
	return ra, -1
}

// describe renders an error for a person: field errors name the flag.
func describe(err error) string {
	var fe *errdefs.FieldError
	if errors.As(err, &fe) {
		name := fe.Field
		if f, ok := flagForField[fe.Field]; ok {
			name = f
		} else if strings.HasPrefix(fe.Field, "binds") {
			name = "--ro/--rw"
		} else if strings.HasPrefix(fe.Field, "filesystem.readOnly") {
			name = "--ro"
		} else if strings.HasPrefix(fe.Field, "filesystem.readWrite") {
			name = "--rw"
		} else if strings.HasPrefix(fe.Field, "filesystem.blocked") {
			name = "--block"
		} else if strings.HasPrefix(fe.Field, "network.allowedDomains") {
			name = "--allow-domain"
		} else if strings.HasPrefix(fe.Field, "network.credentials") {
			name = "--credential"
		}
		return name + ": " + fe.Message
	}
	return err.Error()
}
