package cli

import (
	"flag"
	"fmt"

	"github.com/airlockrun/airlock/api"
)

// forkFlags names fork's flags behind the request's fields.
var forkFlags = map[string]string{"count": "--count", "name": "--name", "memory": "--memory"}

// forkCmd is `airlock fork ID`: snapshot a sandbox and start sandboxes from the snapshot. Their
// IDs go to stdout, one a line, for scripts; the snapshot's, which stays until it is deleted, to
// stderr, where `keys create` and `pull` report what they did too.
func forkCmd(e *env, args []string) int {
	r := newRemote(e, "fork", "[--count N] [--name PREFIX] [--memory[=false]] [--json] ID")
	var req api.ForkRequest
	r.fs.IntVar(&req.Count, "count", 0, "how many sandboxes to start (default 1)")
	r.fs.StringVar(&req.Name, "name", "", "the new sandboxes' name prefix: PREFIX-1, PREFIX-2, ... (default no name)")
	r.fs.Var(optionalBool{&req.Memory}, "memory", memoryUsage)
	asJSON := r.fs.Bool("json", false, "print the snapshot and the sandboxes as JSON")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return r.usageError("want one sandbox ID")
	}
	// Zero means "the default" in the API; given on the command line, it is a mistake.
	var countGiven bool
	r.fs.Visit(func(f *flag.Flag) { countGiven = countGiven || f.Name == "count" })
	if countGiven && req.Count <= 0 {
		return r.usageError("--count: must be positive")
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	f, err := r.c.Fork(ctx, pos[0], req)
	if err != nil {
		return r.fail(err, forkFlags)
	}
	if *asJSON {
		printJSON(e.stdout, f)
		return 0
	}
	for _, sb := range f.Sandboxes {
		fmt.Fprintln(e.stdout, sb.ID)
	}
	fmt.Fprintf(e.stderr, "forked %s from snapshot %s, kept until `airlock snapshots rm %s`\n", pos[0], f.Snapshot.ID, f.Snapshot.ID)
	return 0
}
