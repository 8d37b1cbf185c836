package container_test

import (
	"context"
	"io"
	"os/exec"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// pinned is the driver with every spec's runtime set, so the suite runs unchanged per runtime.
type pinned struct {
	*container.Driver
	rt string
}

func (p *pinned) Create(ctx context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	spec.Runtime = p.rt
	return p.Driver.Create(ctx, id, spec)
}

func (p *pinned) Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	spec.Runtime = p.rt
	return p.Driver.Restore(ctx, id, spec, layer, mem)
}

func (p *pinned) Prepare(id string, spec sandbox.Spec) {
	spec.Runtime = p.rt
	p.Driver.Prepare(id, spec)
}

// exec_umount detaches the mount at dir, if there is one: the caller checks what is left.
func exec_umount(dir string) { _ = exec.Command("umount", "-l", dir).Run() }
