package cli

import "context"

// resumeCmd is `airlock resume ID...`: thaw paused sandboxes.
func resumeCmd(e *env, args []string) int {
	return lifecycleCmd(e, "resume", args, func(r *remote, ctx context.Context, id string) (any, error) {
		return r.c.Resume(ctx, id)
	})
}
