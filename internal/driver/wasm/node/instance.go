package node

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// instance is a quickjs.wasm module instance with its per-depth function cache. Every run has its
// own, closed when the run ends: nothing of one run can reach the next, and the memory allocator
// a caller puts in the run's context (experimental.WithMemoryAllocator: the wasm level's
// per-sandbox cap) holds the instance's whole memory.
type instance struct {
	mod api.Module
	g   *guest
}

// newInstance instantiates quickjs.wasm with the snapshot as its memory, calling the guest with ctx.
func (r *Runner) newInstance(ctx context.Context) (*instance, error) {
	mod, err := r.rt.InstantiateModule(ctx, r.compiled, r.modCfg)
	if err != nil {
		return nil, err
	}
	if err := r.restore(mod); err != nil {
		mod.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	g := newGuest(ctx, mod)
	g.scratch = r.host.scratch
	return &instance{mod: mod, g: g}, nil
}

func (r *Runner) setStackPointer(mod api.Module) error {
	sp, ok := mod.ExportedGlobal("__stack_pointer").(api.MutableGlobal)
	if !ok {
		return fmt.Errorf("__stack_pointer is not an exported mutable global")
	}
	sp.Set(r.stackPtr)
	return nil
}
