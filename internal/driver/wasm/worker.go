package wasm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// This file is the worker: the airlock binary started inside a wasm sandbox's jail (a
// process-level sandbox, see jail.go) as a long-running command. It runs the guests' modules and
// the host functions that serve them, as the jail's unprivileged user, and talks to the daemon in
// frames (proto.go) over its standard input and output.

// workerArg, as the first argument, makes the airlock binary a worker (see IsWorker).
const workerArg = "airlock-wasm-worker"

// extractArg, after workerArg, makes it extract a snapshot's layer from its standard input into
// the jail's store instead (a restore), then exit.
const extractArg = "extract"

// Paths inside the jail.
const (
	jailBinary   = "/.airlock/airlock"  // the airlock binary, bound read-only
	jailRuntimes = "/.airlock/runtimes" // the daemon's wasm.runtimeDir, bound read-only
	jailCache    = "/.airlock/cache"    // the daemon's compilation cache, bound read-only
	jailStore    = "/.wasm"             // the store: the one writable directory of the jail
	jailRoot     = jailStore + "/root"  // the guest's "/"
	jailBinds    = jailStore + "/binds" // the operator's directories, as jailBinds/<n>
)

// IsWorker reports whether this process was started as a wasm sandbox's worker. cmd/airlock
// checks it first, after the process level's init.
func IsWorker() bool { return len(os.Args) > 1 && os.Args[1] == workerArg }

// Worker runs this process as a worker and exits.
func Worker() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Only ever in a jail: on the host it would lay a guest's root out at /.wasm.
	b, err := os.ReadFile("/proc/self/uid_map")
	if f := strings.Fields(string(b)); err != nil || len(f) < 3 || f[2] == "4294967295" {
		fmt.Fprintln(os.Stderr, "airlock: "+workerArg+" runs only inside a wasm sandbox's jail")
		os.Exit(2)
	}
	if len(os.Args) > 2 && os.Args[2] == extractArg {
		if _, err := snapshot.ExtractLayer(os.Stdin, jailStore, snapshot.ExtractOptions{Layout: LayerLayout, HostOwned: true}); err != nil {
			fmt.Fprintln(os.Stderr, "restore the snapshot's layer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if err := serveWorker(os.Stdin, os.Stdout, log); err != nil {
		log.Error("wasm worker", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveWorker reads the configuration, gets the guest ready, says so, then runs execs until the
// daemon closes the stream.
func serveWorker(in io.Reader, out io.Writer, log *slog.Logger) error {
	r := &frameReader{r: bufio.NewReaderSize(in, 64<<10)}
	fw := &frameWriter{w: out}
	f, err := r.next()
	if err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	var cfg workerConfig
	if f.kind != frameConfig || json.Unmarshal(f.payload, &cfg) != nil {
		return errors.New("the first frame is not a configuration")
	}
	g, err := newGuest(cfg, openRuntimes(jailRuntimes, jailCache, log))
	if err != nil {
		_ = fw.write(frameReady, 0, []byte(err.Error())) // err ends the worker, told or not
		return err
	}
	if err := fw.write(frameReady, 0, nil); err != nil {
		return err
	}
	execs := map[uint32]*workerExec{} // only this loop touches it
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		f, err := r.next()
		if err != nil {
			// The daemon is gone or let the worker go: every exec ends now.
			for _, e := range execs {
				e.stop(errStopped)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		e := execs[f.id]
		switch f.kind {
		case frameExec:
			var req execRequest
			if e != nil || json.Unmarshal(f.payload, &req) != nil {
				// A write fails only when the daemon is gone: the next read ends the loop.
				_ = fw.writeJSON(frameExit, f.id, execReply{Error: "malformed exec request"})
				continue
			}
			e = &workerExec{stdin: newStdinBuffer(!req.Stdin)}
			var ctx context.Context
			ctx, e.stop = context.WithCancelCause(context.Background())
			execs[f.id] = e
			wg.Add(1)
			context.AfterFunc(ctx, e.stdin.end)
			go func(id uint32) {
				defer wg.Done()
				defer e.stop(nil) // and so e.stdin.end: done
				rep := g.run(ctx, req, e.stdin, streamWriter{fw, frameStdout, id}, streamWriter{fw, frameStderr, id})
				_ = fw.writeJSON(frameExit, id, rep) // as for a malformed request
			}(f.id)
		case frameStdin:
			if e != nil {
				e.stdin.write(f.payload)
			}
		case frameStdinEOF:
			if e != nil {
				e.stdin.close()
			}
		case frameStop:
			if e == nil {
				continue
			}
			cause := error(errStopped)
			if len(f.payload) == 1 && f.payload[0] != 0 {
				cause = signalled(f.payload[0])
			}
			e.stop(cause)
		}
		// Forget the execs that are over.
		for id, e := range execs {
			if e.done() {
				delete(execs, id)
			}
		}
	}
}

// errStopped is the cause of an exec the daemon stopped (its timeout, or the sandbox's end).
var errStopped = errors.New("stopped by the daemon")

// workerExec is one running exec, as the worker's read loop sees it.
type workerExec struct {
	stdin *stdinBuffer
	stop  context.CancelCauseFunc
}

func (e *workerExec) done() bool {
	e.stdin.mu.Lock()
	defer e.stdin.mu.Unlock()
	return e.stdin.ended
}

// stdinBuffer is an exec's standard input as its frames arrive. It never blocks the worker's
// read loop: what the guest has not read yet waits here, in the jail's memory.
type stdinBuffer struct {
	mu     sync.Mutex // guards the fields below
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool // no more input
	ended  bool // the exec is over: reads fail
}

func newStdinBuffer(closed bool) *stdinBuffer {
	b := &stdinBuffer{closed: closed}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *stdinBuffer) write(p []byte) {
	b.mu.Lock()
	if !b.closed {
		b.buf.Write(p)
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *stdinBuffer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// end makes reads return EOF at once (the exec was stopped, or is over).
func (b *stdinBuffer) end() {
	b.mu.Lock()
	b.closed, b.ended = true, true
	b.buf.Reset()
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *stdinBuffer) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && !b.closed {
		b.cond.Wait()
	}
	if b.buf.Len() == 0 {
		return 0, io.EOF
	}
	return b.buf.Read(p)
}

// guest is a wasm sandbox as its worker serves it: the guest's filesystem in the jail's store,
// the memory cap its modules share, and the interpreters.
type guest struct {
	rt     *runtimes
	spec   sandbox.Spec
	root   string // the guest's "/" in the jail
	mem    *memoryCap
	files  *openFiles
	guard  *storeGuard     // the store's writes against the jail's memory
	mounts mounts          // the guest filesystem
	fsc    wazero.FSConfig // the same for wazero
}

func newGuest(cfg workerConfig, rt *runtimes) (*guest, error) {
	spec := cfg.Spec
	g := &guest{
		rt: rt, spec: spec, root: jailRoot,
		mem:   newMemoryCap(uint64(spec.Resources.MemoryMB) << 20),
		files: &openFiles{limit: spec.Resources.MaxOpenFiles},
	}
	g.mem.budget = jailBudget(g.mem.limit, jailStore)
	g.guard = &storeGuard{room: func(delta uint64) bool { avail, _ := g.mem.budget(); return delta <= avail }}
	if err := skeleton(g.root, spec, cfg.Binds); err != nil {
		return nil, fmt.Errorf("make the guest's root: %w", err)
	}
	if err := g.buildMounts(cfg.Binds); err != nil {
		return nil, err
	}
	return g, nil
}

// skeleton makes the directories of the guest's root: the writable ones, the workdir and the
// mount points of the read-only ones (so that listing / shows them).
func skeleton(root string, spec sandbox.Spec, binds []workerBind) error {
	dirs := append([]string{"/usr/local/lib/python3.11", "/usr/local/lib/python3/dist-packages"}, writableDirs(spec)...)
	dirs = append(dirs, spec.Filesystem.ReadOnly...)
	for _, b := range binds {
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

// buildMounts lays out the guest's filesystem: the store as "/", writable beneath the workdir and
// writableDirs; the interpreter's library and airlock's site read-only; the operator's binds.
func (g *guest) buildMounts(binds []workerBind) error {
	spec := g.spec
	var bound []mount
	for _, b := range binds {
		c := newConfinedFS(b.Dir, b.Path, nil, spec.Filesystem.Blocked, g.files)
		if !b.ReadOnly {
			c.writable = []string{"/"}
		}
		c.readOnly = spec.Filesystem.ReadOnly
		bound = append(bound, mount{b.Path, c})
	}
	root := newConfinedFS(g.root, "/", writableDirs(spec), spec.Filesystem.Blocked, g.files)
	root.readOnly = spec.Filesystem.ReadOnly
	root.guard = g.guard
	siteFS, _ := fs.Sub(site, "site")
	ms := mounts{
		{"/", root},
		{guestSite, &sysfs.AdaptFS{FS: siteFS}},
	}
	if g.rt.python.err == nil {
		lib := filepath.Join(g.rt.python.dir, "lib")
		ms = append(ms, mount{guestPythonLib, &sysfs.ReadFS{FS: sysfs.DirFS(lib)}})
	}
	g.mounts = append(ms, bound...).sorted()
	fsc := wazero.NewFSConfig()
	// Shortest first: the guest's libc picks the longest preopen that prefixes a path, whatever
	// the order, but "/" first keeps it fd 3, as programs that assume it expect.
	for i := len(g.mounts) - 1; i >= 0; i-- {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(g.mounts[i].fs, g.mounts[i].at)
	}
	g.fsc = fsc
	return nil
}

// budgetMargin is what the worker keeps free of the jail's memory limit for itself (its Go heap
// grows with the execs it serves) when it lets a guest's memory grow.
const budgetMargin = 8 << 20

// jailBudget is the memory cap's second check inside the jail, whose cgroup's limit (memoryMb)
// also holds the worker itself, the jail's init and the store: a growth is refused once their
// private memory (the modules' touched pages among it), the store's pages and the growth would
// pass the limit, so that the guest sees an allocation failure rather than the kernel's OOM
// killer.
// It returns the bytes left, and the worker's private memory (for the command's peak).
func jailBudget(limit uint64, store string) func() (avail, own uint64) {
	return func() (uint64, uint64) {
		own := rssAnon("self")
		var st unix.Statfs_t
		var used uint64
		if unix.Statfs(store, &st) == nil {
			used = (st.Blocks - st.Bfree) * uint64(st.Bsize)
		}
		taken := own + rssAnon("1") + used + budgetMargin
		if taken >= limit {
			return 0, own
		}
		return limit - taken, own
	}
}

// rssAnon is a process's private resident memory (RssAnon of /proc/PID/status), 0 if
// unreadable.
func rssAnon(pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
