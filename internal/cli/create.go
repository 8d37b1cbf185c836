package cli

import (
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/airlockrun/airlock/api"
)

// createFlags names create's flags behind the API fields that the shared table does not cover.
var createFlags = map[string]string{
	"name": "--name", "agentId": "--agent-id", "runtime": "--runtime", "template": "--template",
	"timeout.maxDurationSeconds": "--max-duration", "timeout.idleTimeoutSeconds": "--idle-timeout",
	"network.blockLocalNetwork": "--network", "fromSnapshot": "--from-snapshot", "agent.command": "--agent", "agent": "--agent", "start": "--start",
}

// createCmd is `airlock create`: create a sandbox on the daemon and print its ID.
func createCmd(e *env, args []string) int {
	r := newRemote(e, "create", "[flags]")
	noWait := r.fs.Bool("no-wait", false, "answer at once, while the daemon provisions the sandbox (its status provisioning; "+
		"airlock inspect shows when it is ready or failed)")
	agent := r.fs.String("agent", "", "the sandbox's agent: a command line run by /bin/sh -c (airlock start ID starts it; "+
		"its output is the sandbox's log); an image's entrypoint is the agent when this is left out")
	start := r.fs.Bool("start", false, "start the agent once the sandbox is ready")
	spec, asJSON, code := parseCreate(r, args)
	if code >= 0 {
		return code
	}
	if *agent != "" {
		spec.Agent = &api.Agent{Command: api.Shell(*agent)}
	}
	spec.Start = *start
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	create := r.c.Create // waits for ready (or the failure)
	if *noWait {
		create = r.c.CreateAsync
	}
	sb, err := create(ctx, spec)
	if err != nil {
		return r.fail(err, createFlags)
	}
	if asJSON {
		printJSON(e.stdout, sb)
	} else {
		fmt.Fprintln(e.stdout, sb.ID)
	}
	return 0
}

// parseCreate turns create's flags into a spec. Unlike run, it leaves unset fields zero, so that
// the daemon applies its own defaults and checks. code >= 0 means: exit with it.
func parseCreate(r *remote, args []string) (spec api.Spec, asJSON bool, code int) {
	var sf specFlagSet
	var fromSnapshot string
	sf.register(r.fs)
	// Not in specFlagSet, so that `pool put` does not take it.
	r.fs.StringVar(&fromSnapshot, "from-snapshot", "", "start from this snapshot (snap_...): its level, root, user, workdir, resources and filesystem, "+
		"its environment and metadata under the flags'")
	r.fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON instead of its ID")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return spec, false, code
	}
	if len(pos) > 0 {
		return spec, false, r.usageError("unexpected argument %q", pos[0])
	}
	spec, err := sf.spec(r.fs)
	if err != nil {
		return spec, false, r.usageError("%s", describe(err))
	}
	spec.FromSnapshot = fromSnapshot
	return spec, asJSON, -1
}

// specFlagSet is every flag of create that fills a spec: the sandbox's shape (specFlags) and what
// a create adds to it (name, agent, metadata, timeouts). `pool put` takes the same flags, so that
// a pool's shape is built exactly as a create's spec is, and refuses the create's own.
type specFlagSet struct {
	s                 api.Spec
	sf                specFlags
	meta              listFlag
	maxDuration, idle time.Duration
}

func (f *specFlagSet) register(fs *flag.FlagSet) {
	fs.StringVar(&f.s.Name, "name", "", "a name for the sandbox")
	fs.StringVar(&f.s.AgentID, "agent-id", "", "the agent the sandbox is for (list filters by it)")
	fs.Var(&f.meta, "metadata", "K=V metadata (repeatable)")
	f.sf.register(fs, &f.s)
	fs.Var(durationFlag{&f.maxDuration}, "max-duration", "terminate the sandbox after this long, e.g. 30m (default 1h)")
	fs.Var(durationFlag{&f.maxDuration}, "timeout", "the same as --max-duration")
	fs.Var(durationFlag{&f.idle}, "idle-timeout", "terminate the sandbox after this long without activity (default 5m)")
	fs.StringVar(&f.s.Template, "template", "", "root filesystem template (default host)")
}

// spec builds the spec from the parsed flags of fs.
func (f *specFlagSet) spec(fs *flag.FlagSet) (api.Spec, error) {
	spec := f.s
	// Zero means "the default" in the API; on the command line an explicit 0 is a mistake and
	// gets the range, as in run.
	if err := explicitZero(fs); err != nil {
		return spec, err
	}
	var err error
	if spec.Environment, err = keyValues("env", f.sf.envs); err != nil {
		return spec, err
	}
	if spec.Metadata, err = keyValues("metadata", f.meta); err != nil {
		return spec, err
	}
	if err := f.sf.apply(&spec); err != nil {
		return spec, err
	}
	spec.Timeout.MaxDurationSeconds = int64(math.Ceil(f.maxDuration.Seconds()))
	spec.Timeout.IdleTimeoutSeconds = int64(math.Ceil(f.idle.Seconds()))
	return spec, nil
}
