package node

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/tetratelabs/wazero/api"
)

// instance is a quickjs.wasm module instance with its per-depth function cache. Instances that
// ended a run cleanly go back to the Runner's idle pool and the next run overwrites their whole
// linear memory with the snapshot: cheaper than a fresh instantiation (no allocation, zeroing,
// data segments or call stacks), and nothing of the previous run survives it.
type instance struct {
	mod api.Module
	g   *guest
}

// maxIdle bounds the idle pool; each idle instance holds about 3 MiB.
func maxIdle() int { return min(2*runtime.GOMAXPROCS(0), 16) }

// acquire returns an instance whose memory is the snapshot, calling the guest with ctx. A fresh
// one is always a new instance (see Config.Fresh).
func (r *Runner) acquire(ctx context.Context, fresh bool) (*instance, error) {
	if !fresh {
		select {
		case in := <-r.idle:
			if err := r.reset(in.mod); err == nil {
				in.g.ctx = ctx
				return in, nil
			}
			in.mod.Close(context.WithoutCancel(ctx))
		default:
		}
	}
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

// release pools an instance after a run that ended by itself, or closes it.
func (r *Runner) release(in *instance, reusable bool) {
	if reusable && !r.closed.Load() && in.g.depth == 0 && in.mod.Memory().Size() == uint32(len(r.snap)) {
		in.g.ctx = nil

		select {
		case r.idle <- in:
			return
		default:
		}
	}
	in.mod.Close(context.Background())
}

// reset overwrites a used instance's memory (which has the snapshot's size) with the snapshot.
func (r *Runner) reset(mod api.Module) error {
	mem := mod.Memory()
	if mem.Size() != uint32(len(r.snap)) {
		return errors.New("memory size changed")
	}
	if !mem.Write(0, r.snap) {
		return errors.New("cannot write the snapshot")
	}
	return r.setStackPointer(mod)
}

func (r *Runner) setStackPointer(mod api.Module) error {
	sp, ok := mod.ExportedGlobal("__stack_pointer").(api.MutableGlobal)
	if !ok {
		return fmt.Errorf("__stack_pointer is not an exported mutable global")
	}
	sp.Set(r.stackPtr)
	return nil
}

// closeIdle closes the pooled instances.
func (r *Runner) closeIdle(ctx context.Context) {
	for {
		select {
		case in := <-r.idle:
			in.mod.Close(ctx)
		default:
			return
		}
	}
}
