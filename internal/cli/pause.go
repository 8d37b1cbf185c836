package cli

import "context"

// pauseCmd is `airlock pause ID...`: freeze every process of the sandboxes.
func pauseCmd(e *env, args []string) int {
	return lifecycleCmd(e, "pause", args, func(r *remote, ctx context.Context, id string) (any, error) {
		return r.c.Pause(ctx, id)
	})
}

// lifecycleCmd parses the command line of a verb that changes sandboxes by ID (pause, resume,
// rm) and applies op to each.
func lifecycleCmd(e *env, name string, args []string, op func(r *remote, ctx context.Context, id string) (any, error)) int {
	r := newRemote(e, name, "[--json] ID...")
	asJSON := r.fs.Bool("json", false, "print each sandbox as JSON instead of its ID")
	ids, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(ids) == 0 {
		return r.usageError("want at least one sandbox ID")
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	return r.each(ids, *asJSON, func(ctx context.Context, id string) (any, error) { return op(r, ctx, id) })
}
