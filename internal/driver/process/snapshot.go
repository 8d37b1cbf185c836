package process

import (
	"context"
	"io"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

var _ driver.Restorer = (*Driver)(nil)

// Restore implements driver.Restorer: Create, with init extracting the layer from a pipe the
// driver feeds from layer before it builds anything on it (host.Launcher.Seed). mem is ignored
// (files only).
func (d *Driver) Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	return d.create(ctx, id, spec, layer)
}
