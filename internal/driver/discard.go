package driver

import (
	"context"
	"log/slog"
)

// Discard destroys sb, made by a Create that then failed. That Create returns its own error, so
// what Destroy could not clean up is logged; the leak checks and the next start's sweep find it.
func Discard(ctx context.Context, log *slog.Logger, sb Sandbox) {
	if err := sb.Destroy(ctx); err != nil {
		log.Warn("a sandbox whose creation failed is not all cleaned up", "sandbox", sb.ID(), "err", err)
	}
}
