package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// The pool verbs manage the daemon's warm pools (AIRLOCK_HOST, AIRLOCK_TOKEN). A pool's shape is
// given with create's flags; a create with the same shape then gets one of its sandboxes.

// claimTimeFlags are create's flags that a claiming create brings and a pool may not have.
var claimTimeFlags = []string{"env", "name", "agent-id", "metadata", "timeout", "max-duration", "idle-timeout", "allow-domain", "credential"}

// poolFlags names the flags behind a pool's fields; spec.* fields are create's flags (poolFail).
var poolFlags = map[string]string{"name": "NAME", "size": "--size", "refillPerSecond": "--refill", "maxAgeSeconds": "--max-age"}

// poolCmd is `airlock pool ls|inspect|put|rm`.
func poolCmd(e *env, args []string) int {
	return dispatch(e, "pool", args, []subcommand{{"ls", poolLs}, {"inspect", poolInspect}, {"put", poolPut}, {"rm", poolRm}})
}

func poolLs(e *env, args []string) int {
	r := newRemote(e, "pool ls", "[--json]")
	asJSON := r.fs.Bool("json", false, "print the pools as a JSON array")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	ps, err := r.c.Pools(ctx)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(ps))
		return 0
	}
	writePoolTable(e.stdout, ps)
	return 0
}

// writePoolTable prints pools as a table.
func writePoolTable(w io.Writer, ps []api.PoolStatus) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tSIZE\tREADY\tWARMING\tCLAIMS\tMISSES\tHIT%\tISOLATION\tIMAGE")
	for _, p := range ps {
		hit := "-"
		if p.Claims+p.Misses > 0 {
			hit = fmt.Sprintf("%.0f", math.Round(p.HitRate*100))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.Source, p.Size, p.Ready, p.Warming,
			p.Claims, p.Misses, hit, dash(p.Spec.Isolation), dash(p.Spec.Image))
	}
	tw.Flush()
}

func poolInspect(e *env, args []string) int {
	return inspect(e, "pool inspect", "NAME", "pool name", args, func(c *client.Client, ctx context.Context, name string) (any, error) {
		return c.Pool(ctx, name)
	})
}

func poolRm(e *env, args []string) int {
	return remove(e, "pool rm", "[--json] NAME...", "pool name", "print each removed pool's last status as JSON instead of its name", args,
		func(c *client.Client, ctx context.Context, name string) (any, error) { return c.DeletePool(ctx, name) })
}

// poolPut is `airlock pool put NAME --size N [create's shape flags]`: make or replace a pool.
func poolPut(e *env, args []string) int {
	r := newRemote(e, "pool put", "NAME --size N [--refill PER_SECOND] [--max-age DURATION] [create's flags of the sandbox's shape]")
	p, asJSON, code := parsePoolPut(r, args)
	if code >= 0 {
		return code
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	st, err := r.c.PutPool(ctx, p)
	if err != nil {
		return r.poolFail(err)
	}
	if asJSON {
		printJSON(e.stdout, st)
	} else {
		fmt.Fprintln(e.stdout, st.Name)
	}
	return 0
}

// parsePoolPut turns pool put's command line into a pool: its shape parsed by create's own flags
// (so that it is the spec a create with the same flags sends), the claim-time ones refused. code
// >= 0 means: exit with it.
func parsePoolPut(r *remote, args []string) (p api.Pool, asJSON bool, code int) {
	var sf specFlagSet
	var maxAge time.Duration
	sf.register(r.fs)
	r.hidden = map[string]bool{}
	for _, f := range claimTimeFlags {
		r.hidden[f] = true
	}
	r.fs.IntVar(&p.Size, "size", 0, "how many ready sandboxes the pool keeps (1 to 256)")
	r.fs.Float64Var(&p.RefillPerSecond, "refill", 0, "sandboxes started per second at most, to refill (default 10)")
	r.fs.Var(durationFlag{&maxAge}, "max-age", "recycle a sandbox unclaimed this long, e.g. 30m (default 1h)")
	r.fs.BoolVar(&asJSON, "json", false, "print the pool as JSON instead of its name")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return p, false, code
	}
	if len(pos) != 1 {
		return p, false, r.usageError("want one pool name")
	}
	var claimTime []string
	given := map[string]bool{}
	r.fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if r.hidden[f.Name] {
			claimTime = append(claimTime, "--"+f.Name)
		}
	})
	switch {
	case len(claimTime) == 1:
		return p, false, r.usageError("%s belongs to the create that claims a sandbox from the pool, not to the pool: "+
			"give it to `airlock create` with the pool's shape, which then gets a warm sandbox", claimTime[0])
	case len(claimTime) > 1:
		return p, false, r.usageError("%s belong to the create that claims a sandbox from the pool, not to the pool: "+
			"give them to `airlock create` with the pool's shape, which then gets a warm sandbox", strings.Join(claimTime, ", "))
	case !given["size"]:
		return p, false, r.usageError("--size is required (1 to 256)")
	case given["refill"] && p.RefillPerSecond <= 0:
		return p, false, r.usageError("--refill: must be positive")
	}
	spec, err := sf.spec(r.fs)
	if err != nil {
		return p, false, r.usageError("%s", describe(err))
	}
	p.Name, p.Spec = pos[0], spec
	p.MaxAgeSeconds = int64(math.Ceil(maxAge.Seconds()))
	return p, asJSON, -1
}

// poolFail is fail for pool put: the daemon names a pool's field or a field of its spec, which
// is create's flag.
func (r *remote) poolFail(err error) int {
	if ce, ok := errors.AsType[*client.Error](err); ok {
		if f, ok := strings.CutPrefix(ce.Field, "spec."); ok {
			ce.Field = f
			return r.fail(ce, createFlags)
		}
	}
	return r.fail(err, poolFlags)
}
