// Package wasm is the `wasm` isolation level: agent code runs as a WebAssembly/WASI module inside
// the airlock process, in wazero (pure Go, no cgo), with no kernel attack surface at all — the
// guest can do only what its WASI imports let it, and airlock implements those.
//
// A sandbox is a private store (a tmpfs capped at diskMb) seen by the guest as its filesystem
// (fs.go), a memory cap its modules' linear memories share (memory.go), and the interpreters it
// runs: CPython built for WASI by scripts/wasm/build-python.sh, and QuickJS-NG from the npm
// package quickjs-wasi behind a node-style command line (package node). Each exec instantiates a
// fresh module from the compiled one (runtimes.go), so nothing but files persists between execs,
// as with a process. Commands: python3 -c CODE, python3 FILE.py, node -e CODE, node FILE.js
// (command.go).
package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// Config is the wasm level's part of airlock's configuration.
type Config struct {
	// RuntimeDir holds the interpreters: python/ (python.wasm, its standard library, manifest.json)
	// and quickjs/ (quickjs.wasm, manifest.json), as scripts/wasm/*.sh install them.
	RuntimeDir string
	// StateDir holds the sandboxes' stores.
	StateDir string
	// CacheDir holds wazero's compilation cache: the interpreters' machine code, so that only the
	// first airlock compiles them. Default StateDir/cache.
	CacheDir string
}

// DefaultRuntimeDir is where scripts/wasm/*.sh install the interpreters by default.
const DefaultRuntimeDir = "/usr/local/lib/airlock/wasm"

// Driver is the wasm level.
type Driver struct {
	cfg  Config
	log  *slog.Logger
	caps driver.Capabilities
	rt   *runtimes
	// owner is this process as its stores record it (procfs.OwnerLine), for Sweep.
	owner    []byte
	ownerErr error
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Restorer  = (*Driver)(nil)
	_ driver.Reclaimer = (*Driver)(nil)
	_ driver.Sweeper   = (*Driver)(nil)
	_ driver.Adopter   = (*Driver)(nil)
)

// New probes the runtimes in cfg.RuntimeDir and starts compiling them in the background (the
// first exec of each waits for it; later daemons load the compiled code from the cache).
func New(cfg Config, log *slog.Logger) *Driver {
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = DefaultRuntimeDir
	}
	d := &Driver{cfg: cfg, log: log}
	d.owner, d.ownerErr = procfs.OwnerLine()
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(cfg.StateDir, "cache")
	}
	d.rt = openRuntimes(cfg.RuntimeDir, cfg.CacheDir, log)
	d.caps = d.probe()
	return d
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return sandbox.LevelWasm }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

func (d *Driver) probe() driver.Capabilities {
	c := driver.Capabilities{Level: sandbox.LevelWasm, Features: []string{driver.FeatureSnapshotFilesystem}}
	root := os.Geteuid() == 0
	c.Checks = append(c.Checks, driver.Check{Name: "root (a tmpfs store per sandbox, capped at diskMb)", OK: root, Required: true,
		Detail: map[bool]string{true: "running as root", false: "not running as root"}[root]})
	any := false
	for _, r := range d.rt.list() {
		ok := r.err == nil
		any = any || ok
		detail := r.describe()
		c.Checks = append(c.Checks, driver.Check{Name: r.lang + " runtime (" + r.dir + ")", OK: ok, Detail: detail})
		if ok {
			c.Features = append(c.Features, "runtime:"+r.lang)
		}
	}
	switch {
	case !root:
		c.Reason, c.Fix = "each wasm sandbox's store is a tmpfs capped at diskMb, and mounting it needs root", "run airlock as root"
	case !any:
		c.Reason = "no WebAssembly interpreter is installed in " + d.cfg.RuntimeDir
		c.Fix = "make wasm-runtimes (scripts/wasm/build-python.sh and scripts/wasm/fetch-quickjs.sh)"
	default:
		c.Available = true
	}
	return c
}

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	return d.create(ctx, id, spec, nil)
}

// Restore implements driver.Restorer: the snapshot's store, then a sandbox on it. mem is never
// given (the level does not list snapshot:memory: nothing runs between execs).
func (d *Driver) Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, _ string) (driver.Sandbox, error) {
	return d.create(ctx, id, spec, layer)
}

// LayerLayout is a wasm sandbox's store as a snapshot holds it: root/ is the guest's "/".
var LayerLayout = snapshot.Layout{Top: []string{"root"}, At: map[string]string{"root": "/"}}

// writableDirs are the guest directories a sandbox can write: its workdir, /tmp, /workspace and
// its user's home.
func writableDirs(spec sandbox.Spec) []string {
	return append([]string{spec.Workdir, "/tmp", "/workspace", home(spec.User)}, spec.Filesystem.ReadWrite...)
}

// home is the home directory of the sandbox's user, as on the other levels.
func home(user string) string {
	if user == sandbox.UserRoot {
		return "/root"
	}
	return "/home/agent"
}

func (d *Driver) dir(id string) string { return filepath.Join(d.cfg.StateDir, "sandboxes", id) }

func (d *Driver) create(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader) (_ driver.Sandbox, err error) {
	if !d.caps.Available {
		return nil, fmt.Errorf("isolation level wasm: %s: %w", d.caps.Reason, errdefs.ErrUnavailable)
	}
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	dir := d.dir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			d.Reclaim(context.WithoutCancel(ctx), id)
		}
	}()
	opts := fmt.Sprintf("size=%d,mode=0700", spec.Resources.DiskMB<<20)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return nil, fmt.Errorf("mount the store of sandbox %s (%s): %w", id, opts, err)
	}
	if err := d.writeOwner(dir); err != nil {
		return nil, err
	}
	if layer != nil {
		if _, err := snapshot.ExtractLayer(layer, dir, snapshot.ExtractOptions{Layout: LayerLayout, HostOwned: true}); err != nil {
			return nil, fmt.Errorf("restore the snapshot's layer: %w", err)
		}
	}
	if err := skeleton(filepath.Join(dir, "root"), spec); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	// The interpreters are part of the setup: the first sandbox of an airlock waits for them to
	// compile (or load from the cache), so that no command's timeout pays for it.
	if err := d.rt.wait(ctx); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	return d.open(id, spec)
}

// checkSpec refuses what the level cannot give, naming the field and the level.
func checkSpec(spec sandbox.Spec) error {
	switch {
	case spec.Network.EgressPolicy != sandbox.EgressNone:
		return errdefs.Unavailable("network.egressPolicy", "isolation level wasm has no network at all: egressPolicy must be none (got %s); use process or container for network access", spec.Network.EgressPolicy)
	case len(spec.Network.Credentials) > 0:
		return errdefs.Unavailable("network.credentials", "isolation level wasm has no network, so credentials cannot be used")
	case spec.Image != "":
		return errdefs.Unavailable("image", "isolation level wasm runs its own interpreters, not images (got image %q)", spec.Image)
	case spec.RootDir != "" || spec.Template != "" && spec.Template != sandbox.TemplateHost:
		return errdefs.Unavailable("template", "isolation level wasm runs its own interpreters, not a root filesystem (got template %q)", spec.Template)
	}
	return nil
}

// skeleton makes the directories of the guest's root: the writable ones, the workdir and the
// mount points of the read-only ones (so that listing / shows them).
func skeleton(root string, spec sandbox.Spec) error {
	dirs := append([]string{"/usr/local/lib/python3.11", "/usr/local/lib/python3/dist-packages"}, writableDirs(spec)...)
	dirs = append(dirs, spec.Filesystem.ReadOnly...)
	for _, b := range spec.Binds {
		dirs = append(dirs, b.Path)
	}
	r, err := os.OpenRoot(root)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.Mkdir(root, 0o755); err == nil {
			r, err = os.OpenRoot(root)
		}
	}
	if err != nil {
		return err
	}
	defer r.Close()
	for _, p := range dirs {
		if err := r.MkdirAll(p[1:], 0o755); err != nil && p != "/" {
			return fmt.Errorf("make %s: %w", p, err)
		}
	}
	return nil
}

// hostFacts is what a later airlock needs to take a sandbox over.
type hostFacts struct {
	Dir string `json:"dir"`
}

// Adopt implements driver.Adopter: a wasm sandbox is nothing but its store while no command runs,
// and a daemon that was killed took its running commands with it; the store, if it is still
// mounted, is the sandbox.
func (d *Driver) Adopt(ctx context.Context, id string, spec sandbox.Spec, host json.RawMessage) (driver.Sandbox, error) {
	var f hostFacts
	if err := json.Unmarshal(host, &f); err != nil || f.Dir != d.dir(id) {
		return nil, fmt.Errorf("adopt sandbox %s: its record names no store of this airlock", id)
	}
	if !isMountpoint(f.Dir) {
		return nil, fmt.Errorf("adopt sandbox %s: its store %s is gone", id, f.Dir)
	}
	if err := d.writeOwner(f.Dir); err != nil {
		return nil, err
	}
	return d.open(id, spec)
}

// Reclaim implements driver.Reclaimer: the sandbox's store is unmounted and removed.
func (d *Driver) Reclaim(_ context.Context, id string) error {
	dir := d.dir(id)
	return errors.Join(mountinfo.UnmountAll(dir), os.RemoveAll(dir))
}

// Sweep implements driver.Sweeper: stores whose airlock process is gone and that no record
// adopted are removed.
func (d *Driver) Sweep(ctx context.Context) {
	ents, _ := os.ReadDir(filepath.Join(d.cfg.StateDir, "sandboxes"))
	var swept []string
	for _, e := range ents {
		if procfs.OwnerAlive(d.dir(e.Name())) {
			continue
		}
		if err := d.Reclaim(ctx, e.Name()); err != nil {
			d.log.Warn("could not remove an orphaned wasm sandbox", "sandbox", e.Name(), "err", err)
			continue
		}
		swept = append(swept, e.Name())
	}
	if len(swept) > 0 {
		d.log.Info("removed orphaned wasm sandboxes", "sandboxes", swept)
	}
}

// Leftovers lists what this level's sandboxes still hold on the host: stores and their mounts.
// Tests call it after tearing sandboxes down.
func (d *Driver) Leftovers() []string {
	var out []string
	dir := filepath.Join(d.cfg.StateDir, "sandboxes")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		out = append(out, "store "+e.Name())
	}
	for _, m := range mountinfo.Under(dir) {
		out = append(out, "mount "+m)
	}
	return out
}

// writeOwner records this process as the owner of a store, for Sweep.
func (d *Driver) writeOwner(dir string) error {
	if d.owner == nil {
		return fmt.Errorf("record the owner of %s: %w", dir, d.ownerErr)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), d.owner, 0o600); err != nil {
		return fmt.Errorf("record the owner of %s: %w", dir, err)
	}
	return nil
}

func isMountpoint(dir string) bool {
	for _, m := range mountinfo.Under(dir) {
		if m == dir {
			return true
		}
	}
	return false
}
