package node

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// The prelude: the files in js/, concatenated in name order into one function that receives the
// host functions and returns the entry points the host calls (see js/90-host.js). 00-core.js
// defines the internals the later files use.
//
//go:embed js/*.js
var preludeFS embed.FS

// maxStackSize is QuickJS's native stack limit: half of the binary's 1 MiB shadow stack, as
// quickjs-wasi recommends, so deep recursion is a RangeError rather than a trap.
const maxStackSize = 512 * 1024

var errNoSnapshot = errors.New("snapshot not built")

// buildSnapshot boots one instance, evaluates the prelude and keeps its linear memory: runs copy
// it into their instance instead of starting QuickJS and parsing the prelude each time.
func (r *Runner) buildSnapshot(ctx context.Context) (err error) {
	v := newVM(r, &Config{Dir: "/"}, invocation{})
	v.template = true
	gctx := context.WithValue(ctx, vmKey{}, v)
	mod, err := r.rt.InstantiateModule(gctx, r.compiled, r.modCfg)
	if err != nil {
		return fmt.Errorf("node: instantiate quickjs.wasm: %w", err)
	}
	defer mod.Close(ctx)
	g := newGuest(gctx, mod)
	v.g = g
	defer func() {
		if rec := recover(); rec != nil {
			gf, ok := rec.(guestFault)
			if !ok {
				panic(rec)
			}
			err = fmt.Errorf("node: building the snapshot: %w", gf.err)
		}
	}()

	g.must(fInitialize)
	if rc := g.must(fInit); rc != 0 {
		return fmt.Errorf("node: qjs_init failed (%d)", int32(rc))
	}
	r.engineVer = g.cString(g.must(fVersion))
	g.must(fSetInterrupt, 1)
	g.must(fSetRejection, 1)
	g.must(fSetLoader, 1)
	g.must(fSetMaxStack, maxStackSize)
	g.scratch = g.malloc(16)
	r.host.scratch = g.scratch

	// The host functions, one per op, on an object the prelude takes and hides.
	ops := g.eval("({})", "<airlock>", 0)
	names := make([]string, 0, len(opTable))
	for name := range opTable {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := g.putBytes([]byte(name))
		fn := g.must(fNewHostFunc, uint64(p), uint64(len(name)), 0)
		g.must(fSetPropStr, uint64(ops), uint64(p), uint64(fn))
		g.free(p)
		g.freeValue(fn)
	}
	src, err := preludeSource(r)
	if err != nil {
		return err
	}
	fn := g.eval(src, "node:internal/airlock", 0)
	if fn == 0 || g.isException(fn) {
		return fmt.Errorf("node: prelude: %s", g.describeException())
	}
	hostObj, err := g.callFn(fn, ops)
	if err != nil {
		return fmt.Errorf("node: prelude: %w", err)
	}
	if g.isException(hostObj) {
		return fmt.Errorf("node: prelude: %s", g.describeException())
	}
	g.freeValue(fn)
	g.freeValue(ops)
	prop := func(name string) uint32 {
		p := g.putBytes([]byte(name))
		defer g.free(p)
		return g.must(fGetPropStr, uint64(hostObj), uint64(p))
	}
	r.host.boot = prop("boot")
	r.host.step = prop("step")
	r.host.uncaught = prop("uncaught")
	r.host.finish = prop("finish")
	r.host.esmResolve = prop("esmResolve")
	r.host.esmLoad = prop("esmLoad")
	for name, h := range map[string]uint32{"boot": r.host.boot, "step": r.host.step, "uncaught": r.host.uncaught,
		"finish": r.host.finish, "esmResolve": r.host.esmResolve, "esmLoad": r.host.esmLoad} {
		if h == 0 || g.must(fIsFunction, uint64(h)) == 0 {
			return fmt.Errorf("node: prelude does not provide %s()", name)
		}
	}

	g.must(fGC)
	sp := mod.ExportedGlobal("__stack_pointer")
	if sp == nil {
		return errors.New("node: quickjs.wasm does not export __stack_pointer")
	}
	r.stackPtr = sp.Get()
	mem, ok := g.mem.Read(0, g.mem.Size())
	if !ok {
		return errors.New("node: cannot read the template's memory")
	}
	r.snap = append([]byte(nil), mem...)
	return nil
}

// restore copies the snapshot into a fresh instance.
func (r *Runner) restore(mod api.Module) error {
	if r.snap == nil {
		return errNoSnapshot
	}
	mem := mod.Memory()
	size := uint32(len(r.snap))
	switch cur := mem.Size(); {
	case cur == size && r.dirty != nil:
		for _, sp := range r.dirty {
			mem.Write(sp.off, r.snap[sp.off:sp.end])
		}
	case cur > size:
		return fmt.Errorf("fresh instance memory (%d) larger than the snapshot (%d)", cur, size)
	default:
		if cur < size {
			if _, ok := mem.Grow((size - cur) / 65536); !ok {
				return fmt.Errorf("wasm memory cannot grow to the %d KiB snapshot: the runtime's memory limit is too small", size/1024)
			}
		}
		if !mem.Write(0, r.snap) {
			return errors.New("cannot write the snapshot into guest memory")
		}
	}
	return r.setStackPointer(mod)
}

// preludeSource joins the js/ files into one function expression taking the ops object.
func preludeSource(r *Runner) (string, error) {
	entries, err := fs.ReadDir(preludeFS, "js")
	if err != nil {
		return "", fmt.Errorf("node: prelude: %w", err)
	}
	var b strings.Builder
	b.WriteString("(function (ops) {\n'use strict';\n")
	fmt.Fprintf(&b, "const ENGINE_VERSION = %q, NODE_VERSION = %q;\n", r.engineVer, NodeVersion)
	for _, e := range entries {
		src, err := preludeFS.ReadFile("js/" + e.Name())
		if err != nil {
			return "", fmt.Errorf("node: prelude: %w", err)
		}
		// Files share one scope so later ones see earlier definitions.
		fmt.Fprintf(&b, "// ---- %s ----\n", e.Name())
		b.Write(src)
		b.WriteString("\n")
	}
	b.WriteString("return host;\n})")
	return b.String(), nil
}

// describeException takes the pending exception and renders it for an internal error message.
func (g *guest) describeException() string {
	ex := g.getException()
	defer g.freeValue(ex)
	s, _ := g.str(ex)
	if g.must(fIsError, uint64(ex)) != 0 {
		p := g.putBytes([]byte("stack"))
		st := g.must(fGetPropStr, uint64(ex), uint64(p))
		g.free(p)
		if stack, ok := g.str(st); ok && stack != "undefined" {
			s += "\n" + stack
		}
		g.freeValue(st)
	}
	return s
}

// span is a byte range [off, end) of linear memory.
type span struct{ off, end uint32 }

// findDirty compares the snapshot with the memory of a fresh instance (data segments in place,
// the rest zero) so runs copy only the pages that differ.
func (r *Runner) findDirty(ctx context.Context) error {
	mod, err := r.rt.InstantiateModule(ctx, r.compiled, r.modCfg)
	if err != nil {
		return fmt.Errorf("node: instantiate quickjs.wasm: %w", err)
	}
	defer mod.Close(ctx)
	fresh, ok := mod.Memory().Read(0, mod.Memory().Size())
	if !ok || len(fresh) != len(r.snap) {
		r.dirty = nil // sizes differ: runs grow and copy everything
		return nil
	}
	const chunk = 4096
	r.dirty = []span{}
	for off := 0; off < len(r.snap); off += chunk {
		end := min(off+chunk, len(r.snap))
		if string(r.snap[off:end]) == string(fresh[off:end]) {
			continue
		}
		if n := len(r.dirty); n > 0 && r.dirty[n-1].end == uint32(off) {
			r.dirty[n-1].end = uint32(end)
		} else {
			r.dirty = append(r.dirty, span{uint32(off), uint32(end)})
		}
	}
	return nil
}
