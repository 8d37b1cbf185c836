package cli

import "context"

// startCmd is `airlock start ID...`: start sandboxes' agents.
func startCmd(e *env, args []string) int {
	return lifecycleCmd(e, "start", args, func(r *remote, ctx context.Context, id string) (any, error) {
		return r.c.Start(ctx, id)
	})
}
