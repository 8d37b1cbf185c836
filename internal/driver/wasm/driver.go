// Package wasm is the `wasm` isolation level: agent code runs as a WebAssembly/WASI module in
// wazero (pure Go, no cgo), so the guest can do only what its WASI imports let it, and airlock
// implements those.
//
// The modules and the host functions that serve them do not run in the daemon: each sandbox is
// a jail — a process-level sandbox (its own uid range, namespaces, seccomp allowlist, Landlock,
// no capabilities, a cgroup of memoryMb) whose writable layer is the sandbox's store — and its
// commands run in a worker (worker.go): the airlock binary started in the jail as a
// long-running command, which the daemon talks to in frames over its standard streams (jail.go,
// proto.go). A worker starts with the sandbox or at an exec and stays for the driver's WorkerIdle
// after the last one; an idle sandbox is its jail's init and its store.
//
// Inside the worker, the guest sees the store (fs.go), a memory cap its modules' linear memories
// share (memory.go), and the interpreters it runs: CPython built for WASI by
// scripts/wasm/build-python.sh, and QuickJS-NG from the npm package quickjs-wasi behind a
// node-style command line (package node). Each exec instantiates a fresh module from the compiled
// one (runtimes.go), so nothing but files persists between execs, as with a process. Commands:
// python3 -c CODE, python3 FILE.py, node -e CODE, node FILE.js (command.go).
package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// Config is the wasm level's configuration; Settings.Config makes it from the file's section.
type Config struct {
	// RuntimeDir holds the interpreters: python/ (python.wasm, its standard library, manifest.json)
	// and quickjs/ (quickjs.wasm, manifest.json), as scripts/wasm/*.sh install them.
	RuntimeDir string
	// StateDir holds the sandboxes' stores.
	StateDir string
	// CacheDir holds wazero's compilation cache: the interpreters' machine code, so that only the
	// first airlock compiles them; workers read it. Default StateDir/cache.
	CacheDir string
	// WorkerIdle is how long a sandbox's worker stays after its last exec (default 30 s).
	WorkerIdle time.Duration
	// WorkerPath is the airlock binary that workers run (default: this process's executable).
	WorkerPath string
}

// DefaultWorkerIdle is how long a worker stays after its last exec by default.
const DefaultWorkerIdle = 30 * time.Second

// DefaultRuntimeDir is where scripts/wasm/*.sh install the interpreters by default.
const DefaultRuntimeDir = "/usr/local/lib/airlock/wasm"

// Driver is the wasm level.
type Driver struct {
	cfg  Config
	log  *slog.Logger
	caps driver.Capabilities
	proc Jails     // makes the jails: the process level
	rt   *runtimes // the interpreters as the daemon sees them: to probe, and to fill the cache

	precompileOnce sync.Once
	precompiled    chan struct{} // closed once the cache holds the interpreters (or could not)
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Restorer  = (*Driver)(nil)
	_ driver.Reclaimer = (*Driver)(nil)
	_ driver.Sweeper   = (*Driver)(nil)
	_ driver.Adopter   = (*Driver)(nil)
)

// Jails makes the jails wasm sandboxes run in: process-level sandboxes (*host.Sandbox), which
// the levels package hands over as the process level itself. The wasm level knows it only by
// what it does.
type Jails interface {
	driver.Driver
	driver.Adopter
	driver.Reclaimer
	// Leftovers lists what the jails hold on the host with none alive (tests' leak checks).
	Leftovers() []string
}

// New probes the runtimes in cfg.RuntimeDir; proc is the process level, which makes the jails.
// The interpreters are compiled into the cache on the first sandbox's create (later daemons find
// them there).
func New(cfg Config, proc Jails, log *slog.Logger) *Driver {
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = DefaultRuntimeDir
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(cfg.StateDir, "cache")
	}
	if cfg.WorkerIdle <= 0 {
		cfg.WorkerIdle = DefaultWorkerIdle
	}
	d := &Driver{cfg: cfg, log: log, proc: proc, precompiled: make(chan struct{})}
	if cfg.WorkerPath == "" {
		if exe, err := os.Executable(); err == nil {
			d.cfg.WorkerPath, _ = filepath.EvalSymlinks(exe)
		}
	}
	d.rt = openRuntimes(cfg.RuntimeDir, d.cfg.CacheDir, log)
	d.caps = d.probe()
	return d
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return sandbox.LevelWasm }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

func (d *Driver) probe() driver.Capabilities {
	c := driver.Capabilities{Level: sandbox.LevelWasm, Features: []string{driver.FeatureSnapshotFilesystem}}
	pc := d.proc.Capabilities()
	jail := pc.Available
	detail := "available"
	if !jail {
		detail = pc.Reason
	}
	c.Checks = append(c.Checks, driver.Check{Name: "process level (each sandbox's worker runs jailed in a process-level sandbox)", OK: jail, Required: true, Detail: detail})
	_, err := os.Stat(d.cfg.WorkerPath)
	c.Checks = append(c.Checks, driver.Check{Name: "worker binary (" + d.cfg.WorkerPath + ")", OK: err == nil && d.cfg.WorkerPath != "", Required: true,
		Detail: map[bool]string{true: "the airlock binary, bound read-only into each jail", false: fmt.Sprint("cannot find this process's executable: ", err)}[err == nil && d.cfg.WorkerPath != ""]})
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
	case !jail:
		c.Reason, c.Fix = "each wasm sandbox runs its guests jailed in a process-level sandbox, which is unavailable: "+pc.Reason, pc.Fix
	case d.cfg.WorkerPath == "":
		c.Reason, c.Fix = "cannot find the airlock binary to run as the worker", "run airlock from a file on disk"
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

// oldStores is where an airlock before the jails kept its sandboxes' stores (host tmpfs mounts),
// for Reclaim and Sweep to remove what one left.
func (d *Driver) oldStore(id string) string { return filepath.Join(d.cfg.StateDir, "sandboxes", id) }

// Jail sizes: the worker's own threads and files, beside what the spec gives the guest.
const (
	workerThreads = 32 // the Go runtime's threads, and one per running exec (locked)
	workerFiles   = 64 // the stream, the cache's and runtimes' files, the runtime's own
)

// jailSpec is the process-level spec of a wasm sandbox's jail: its limits, no network, the
// store as its one writable directory, and read-only binds of the airlock binary (the worker),
// the interpreters and their compiled code; the operator's binds under the store's binds/.
func (d *Driver) jailSpec(spec sandbox.Spec) sandbox.Spec {
	j := sandbox.Spec{
		Isolation: sandbox.LevelProcess, Template: sandbox.TemplateHost, User: sandbox.UserRoot, Workdir: "/workspace",
		Resources: spec.Resources,
		Network:   sandbox.Network{EgressPolicy: sandbox.EgressNone},
		Timeout:   spec.Timeout,
	}
	j.Resources.MaxProcesses += workerThreads
	j.Resources.MaxOpenFiles += workerFiles
	j.Filesystem.ReadWrite = []string{jailStore}
	j.Binds = []sandbox.Bind{
		{Host: d.cfg.WorkerPath, Path: jailBinary, ReadOnly: true},
		{Host: d.cfg.RuntimeDir, Path: jailRuntimes, ReadOnly: true},
		{Host: d.cfg.CacheDir, Path: jailCache, ReadOnly: true},
	}
	for i, b := range spec.Binds {
		j.Binds = append(j.Binds, sandbox.Bind{Host: b.Host, Path: bindDir(i), ReadOnly: b.ReadOnly})
	}
	return j
}

func (d *Driver) create(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader) (_ driver.Sandbox, err error) {
	if !d.caps.Available {
		return nil, fmt.Errorf("isolation level wasm: %s: %w", d.caps.Reason, errdefs.ErrUnavailable)
	}
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	for i, b := range spec.Binds {
		if fi, err := os.Stat(b.Host); err != nil || !fi.IsDir() {
			return nil, errdefs.Invalid(fmt.Sprintf("binds[%d]", i), "host path %s bound at %s is not a directory (the wasm level binds directories only)", b.Host, b.Path)
		}
	}
	// The interpreters are part of the setup: the first sandbox of an airlock waits for them to
	// compile into the cache (or finds them there), so that no command's timeout pays for it.
	if err := d.precompile(ctx); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	js, err := d.proc.Create(ctx, id, d.jailSpec(spec))
	if err != nil {
		return nil, fmt.Errorf("create the jail of sandbox %s: %w", id, err)
	}
	jail, err := asJail(js)
	if err != nil {
		driver.Discard(context.WithoutCancel(ctx), d.log, js)
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	s := d.open(id, spec, jail)
	defer func() {
		if err != nil {
			driver.Discard(context.WithoutCancel(ctx), d.log, s)
		}
	}()
	if layer != nil {
		if err := s.extract(ctx, layer); err != nil {
			return nil, err
		}
	}
	// The first worker makes the guest's root, so that the files API finds it; it stays for
	// the first commands.
	w, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	s.release(w)
	return s, nil
}

// extract restores a snapshot's layer into the jail's store: the worker binary extracts it, in
// the jail, from its standard input. An error reading layer fails it.
func (s *Sandbox) extract(ctx context.Context, layer io.Reader) error {
	r := &readErr{r: layer}
	res, err := s.jail.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{jailBinary, workerArg, extractArg},
		Stdin: r, Capture: true})
	switch {
	case err != nil:
		return fmt.Errorf("restore the snapshot's layer: %w", err)
	case r.err != nil:
		return fmt.Errorf("restore the snapshot's layer: %w", r.err)
	case res.ExitCode != 0:
		return fmt.Errorf("restore the snapshot's layer: %s (exit %d): %w", strings.TrimSpace(res.Stderr), res.ExitCode, errdefs.ErrInvalidArgument)
	}
	return nil
}

// readErr remembers the error, other than EOF, that its reader gave.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// precompile fills the compilation cache with the interpreters, once per process, and makes it
// readable by the jails' users; it waits for it.
func (d *Driver) precompile(ctx context.Context) error {
	d.precompileOnce.Do(func() {
		go func() {
			defer close(d.precompiled)
			t0 := time.Now()
			d.rt.loadPython()
			d.rt.loadJS()
			d.rt.close()
			d.log.Info("the wasm interpreters are compiled in the cache", "dir", d.cfg.CacheDir, "took", time.Since(t0), "python", d.rt.pyErr, "javascript", d.rt.jsErr)
			// Machine code of public interpreters: the jails' users read it (read-only binds).
			var failed []error
			_ = filepath.WalkDir(d.cfg.CacheDir, func(p string, e fs.DirEntry, err error) error {
				switch {
				case err != nil:
					failed = append(failed, err)
				case e.IsDir():
					failed = append(failed, os.Chmod(p, 0o755))
				case e.Type().IsRegular():
					failed = append(failed, os.Chmod(p, 0o644))
				}
				return nil
			})
			if err := errors.Join(failed...); err != nil {
				d.log.Warn("the wasm compilation cache is not all readable by the jails", "dir", d.cfg.CacheDir, "err", err)
			}
		}()
	})
	select {
	case <-d.precompiled:
		if _, err := os.Stat(d.cfg.CacheDir); err != nil {
			return fmt.Errorf("the wasm compilation cache %s: %w", d.cfg.CacheDir, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the WebAssembly interpreters to compile: %w", ctx.Err())
	}
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

// asJail is the process-level sandbox the jail maker made.
func asJail(js driver.Sandbox) (*host.Sandbox, error) {
	jail, ok := js.(*host.Sandbox)
	if !ok {
		return nil, fmt.Errorf("the jail is a %T, not a process-level sandbox", js)
	}
	return jail, nil
}

// Adopt implements driver.Adopter: a wasm sandbox is its jail, which a restarted daemon takes
// over as the process level does (its worker ended with the daemon's stream; the next exec
// starts one).
func (d *Driver) Adopt(ctx context.Context, id string, spec sandbox.Spec, host json.RawMessage) (driver.Sandbox, error) {
	var f hostFacts
	if err := json.Unmarshal(host, &f); err != nil || len(f.Jail) == 0 {
		return nil, fmt.Errorf("adopt sandbox %s: its record names no jail (an airlock before wasm jails made it)", id)
	}
	js, err := d.proc.Adopt(ctx, id, d.jailSpec(spec), f.Jail)
	if err != nil {
		return nil, fmt.Errorf("adopt sandbox %s: %w", id, err)
	}
	jail, err := asJail(js)
	if err != nil {
		return nil, fmt.Errorf("adopt sandbox %s: %w", id, err)
	}
	return d.open(id, spec, jail), nil
}

// Reclaim implements driver.Reclaimer: the sandbox's jail (its cgroup), and a store an airlock
// before the jails left.
func (d *Driver) Reclaim(ctx context.Context, id string) error {
	dir := d.oldStore(id)
	return errors.Join(d.proc.Reclaim(ctx, id), mountinfo.UnmountAll(dir), os.RemoveAll(dir))
}

// Sweep implements driver.Sweeper: the jails are the process level's, which sweeps them; what
// remains here are stores an airlock before the jails left, which no sandbox uses any more.
func (d *Driver) Sweep(ctx context.Context) {
	ents, _ := os.ReadDir(filepath.Join(d.cfg.StateDir, "sandboxes"))
	for _, e := range ents {
		if procfs.OwnerAlive(d.oldStore(e.Name())) {
			continue
		}
		dir := d.oldStore(e.Name())
		if err := errors.Join(mountinfo.UnmountAll(dir), os.RemoveAll(dir)); err != nil {
			d.log.Warn("could not remove an old wasm store", "sandbox", e.Name(), "err", err)
		}
	}
}

// Leftovers lists what this level's sandboxes still hold on the host: their jails' (the process
// level's leftovers) and old stores. Tests call it after tearing sandboxes down.
func (d *Driver) Leftovers() []string {
	out := d.proc.Leftovers()
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
