package cli

import "context"

// rmCmd is `airlock rm ID...`: terminate sandboxes. Their processes are killed and their
// resources released; the daemon keeps their records.
func rmCmd(e *env, args []string) int {
	return lifecycleCmd(e, "rm", args, func(r *remote, ctx context.Context, id string) (any, error) {
		return r.c.Terminate(ctx, id)
	})
}
