package cli

import (
	"fmt"
	"math"
	"time"

	"github.com/airlockrun/airlock/api"
)

// createFlags names create's flags behind the API fields that the shared table does not cover.
var createFlags = map[string]string{
	"name": "--name", "agentId": "--agent-id", "runtime": "--runtime", "template": "--template",
	"timeout.maxDurationSeconds": "--max-duration", "timeout.idleTimeoutSeconds": "--idle-timeout",
	"network.blockLocalNetwork": "--network",
}

// createCmd is `airlock create`: create a sandbox on the daemon and print its ID.
func createCmd(e *env, args []string) int {
	r := newRemote(e, "create", "[flags]")
	spec, asJSON, code := parseCreate(r, args)
	if code >= 0 {
		return code
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	sb, err := r.c.Create(ctx, spec)
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
	fs := r.fs
	var sf specFlags
	var meta listFlag
	var maxDuration, idle time.Duration
	fs.StringVar(&spec.Name, "name", "", "a name for the sandbox")
	fs.StringVar(&spec.AgentID, "agent-id", "", "the agent the sandbox is for (list filters by it)")
	fs.Var(&meta, "metadata", "K=V metadata (repeatable)")
	sf.register(fs, &spec)
	fs.Var(durationFlag{&maxDuration}, "max-duration", "terminate the sandbox after this long, e.g. 30m (default 1h)")
	fs.Var(durationFlag{&maxDuration}, "timeout", "the same as --max-duration")
	fs.Var(durationFlag{&idle}, "idle-timeout", "terminate the sandbox after this long without activity (default 5m)")
	fs.StringVar(&spec.Template, "template", "", "root filesystem template (default host)")
	fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON instead of its ID")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return spec, false, code
	}
	if len(pos) > 0 {
		return spec, false, r.usageError("unexpected argument %q", pos[0])
	}
	// Zero means "the default" in the API; on the command line an explicit 0 is a mistake and
	// gets the range, as in run.
	zeroErr := explicitZero(fs)
	if zeroErr != nil {
		return spec, false, r.usageError("%s", describe(zeroErr))
	}
	var err error
	if spec.Environment, err = keyValues("env", sf.envs); err != nil {
		return spec, false, r.usageError("%v", err)
	}
	if spec.Metadata, err = keyValues("metadata", meta); err != nil {
		return spec, false, r.usageError("%v", err)
	}
	if err := sf.apply(&spec); err != nil {
		return spec, false, r.usageError("%s", describe(err))
	}
	spec.Timeout.MaxDurationSeconds = int64(math.Ceil(maxDuration.Seconds()))
	spec.Timeout.IdleTimeoutSeconds = int64(math.Ceil(idle.Seconds()))
	return spec, asJSON, -1
}
