package drivertest

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Fake is a level (named "process") whose sandboxes are only records: enough for the manager and
// the API server to create, pool and claim, pause, snapshot and restore, adopt and reclaim
// sandboxes without root, in tests of their own. Its host is the set of instances it made and
// did not destroy, which outlives any one manager (Put seeds what a killed daemon left). A
// sandbox's state is its spec, a paused flag and a few named texts, its files; a snapshot's layer
// is a tar of them. Hooks let a test hold or fail a destroy or a restore. It is safe for
// concurrent use.
type Fake struct {
	mu   sync.Mutex // guards everything below, and every sandbox's fields
	live map[string]*fakeSandbox
	// noSnapshots makes the sandboxes Create makes from now on ones that cannot be snapshotted.
	noSnapshots bool
	reclaimed   []string
	failReclaim string
	onDestroy   func(id string)
	onRestore   func(id string) error
	onCreate    func(ctx context.Context, id string) error
	onLayer     func(id string) (driver.Layer, error)
}

// NewFake returns a fake level with nothing on its host.
func NewFake() *Fake { return &Fake{live: map[string]*fakeSandbox{}} }

var (
	_ driver.Driver    = (*Fake)(nil)
	_ driver.Restorer  = (*Fake)(nil)
	_ driver.Reclaimer = (*Fake)(nil)
	_ driver.Adopter   = (*Fake)(nil)
)

// Name is the level's name, "process": the default isolation of a spec.
func (f *Fake) Name() string { return sandbox.LevelProcess }

// Capabilities says the level is available and snapshots files.
func (f *Fake) Capabilities() driver.Capabilities {
	return driver.Capabilities{Level: sandbox.LevelProcess, Available: true, Features: []string{driver.FeatureSnapshotFilesystem}}
}

// Create puts sandbox id on the fake host, after the OnCreate hook.
func (f *Fake) Create(ctx context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	f.mu.Lock()
	hook := f.onCreate
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, id); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.put(id, spec, map[string]string{})
	if f.noSnapshots {
		return plainSandbox{sb}, nil
	}
	return sb, nil
}

// put makes sandbox id live; f.mu is held.
func (f *Fake) put(id string, spec sandbox.Spec, files map[string]string) *fakeSandbox {
	sb := &fakeSandbox{level: f, id: id, spec: spec, files: files, gone: make(chan struct{})}
	f.live[id] = sb
	return sb
}

// Restore makes sandbox id with the files of a layer a fake sandbox's Snapshot wrote, after the
// OnRestore hook. It reads the layer to its end, where the snapshot store checks its digest, and
// fails with the reader's error when there is one, as a level must.
func (f *Fake) Restore(_ context.Context, id string, spec sandbox.Spec, layer io.Reader, _ string) (driver.Sandbox, error) {
	f.mu.Lock()
	hook := f.onRestore
	f.mu.Unlock()
	if hook != nil {
		if err := hook(id); err != nil {
			return nil, err
		}
	}
	files, err := readLayer(layer)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.put(id, spec, files), nil
}

// Reclaim removes instance id from the host, unless FailReclaim names it; it is recorded either
// way (Reclaimed).
func (f *Fake) Reclaim(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reclaimed = append(f.reclaimed, id)
	if id == f.failReclaim {
		return fmt.Errorf("reclaim %s: the fake host refuses", id)
	}
	delete(f.live, id)
	return nil
}

// Adopt takes over instance id if it is on the host and host is what its HostFacts said.
func (f *Fake) Adopt(_ context.Context, id string, spec sandbox.Spec, host json.RawMessage) (driver.Sandbox, error) {
	var facts hostFacts
	if err := json.Unmarshal(host, &facts); err != nil || facts.Instance != id {
		return nil, fmt.Errorf("adopt %s: host facts %s are not its", id, host)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.live[id]
	if !ok {
		return nil, fmt.Errorf("adopt %s: not on the host", id)
	}
	sb.spec = spec
	return sb, nil
}

// Put puts instances on the host with an empty spec, as a killed daemon left them.
func (f *Fake) Put(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		f.put(id, sandbox.Spec{}, map[string]string{})
	}
}

// Live returns the instances on the host (made, and neither destroyed nor reclaimed), sorted.
func (f *Fake) Live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.live))
}

// Reclaimed returns the instances Reclaim was called for, in order.
func (f *Fake) Reclaimed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reclaimed)
}

// Claims returns how many times instance id was claimed (0 if it is not on the host).
func (f *Fake) Claims(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb, ok := f.live[id]; ok {
		return sb.claims
	}
	return 0
}

// Paused reports whether instance id is on the host and paused.
func (f *Fake) Paused(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.live[id]
	return ok && sb.paused
}

// SetSnapshots says whether the sandboxes Create makes from now on can be snapshotted (they can
// at first); those that cannot have only the methods of driver.Sandbox, as a level without
// driver.Snapshotter.
func (f *Fake) SetSnapshots(can bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noSnapshots = !can
}

// FailReclaim makes Reclaim of instance id fail from now on; "" makes none fail.
func (f *Fake) FailReclaim(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failReclaim = id
}

// OnDestroy has every Destroy call hook with the instance's id first, before it leaves the host
// (nil: none). The hook may block, to hold a teardown.
func (f *Fake) OnDestroy(hook func(id string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onDestroy = hook
}

// OnCreate has every Create call hook with its context and the instance's id first (nil: none).
// The hook may block, to hold a provisioning; an error it returns fails the create.
func (f *Fake) OnCreate(hook func(ctx context.Context, id string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onCreate = hook
}

// Files returns the files sandbox id's execs put (nil for no such sandbox).
func (f *Fake) Files(id string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.live[id]; s != nil {
		return maps.Clone(s.files)
	}
	return nil
}

// OnLayer makes the sandboxes' writable layers readable: Layer returns what hook says for the
// sandbox (nil, the default: the level cannot read them, errdefs.ErrUnavailable).
func (f *Fake) OnLayer(hook func(id string) (driver.Layer, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onLayer = hook
}

// OnRestore has every Restore call hook with the new instance's id first (nil: none). The hook
// may block, to hold a restore; an error it returns fails the restore.
func (f *Fake) OnRestore(hook func(id string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onRestore = hook
}

type fakeSandbox struct {
	level  *Fake
	id     string
	spec   sandbox.Spec      // guarded by level.mu
	files  map[string]string // guarded by level.mu
	paused bool              // guarded by level.mu
	claims int               // guarded by level.mu
	gone   chan struct{}     // closed by Destroy: its long-running execs end
	once   sync.Once
}

var (
	_ driver.Sandbox     = (*fakeSandbox)(nil)
	_ driver.Claimer     = (*fakeSandbox)(nil)
	_ driver.Snapshotter = (*fakeSandbox)(nil)
	_ driver.Pauser      = (*fakeSandbox)(nil)
	_ driver.HostFacter  = (*fakeSandbox)(nil)
	_ driver.Layerer     = (*fakeSandbox)(nil)
)

// Layer implements driver.Layerer through the level's OnLayer hook.
func (s *fakeSandbox) Layer(context.Context) (driver.Layer, error) {
	s.level.mu.Lock()
	hook := s.level.onLayer
	s.level.mu.Unlock()
	if hook == nil {
		return driver.Layer{}, fmt.Errorf("the fake level reads no layer: %w", errdefs.ErrUnavailable)
	}
	return hook(s.id)
}

func (s *fakeSandbox) ID() string { return s.id }

// Exec prints the sandbox's environment as K=V lines, sorted. A few commands (the last word of
// the command line, e.g. sh -c's script) do something else: "put NAME TEXT" writes a file,
// "files" prints them as NAME=TEXT lines, sorted, "sleep DURATION" waits (a long exec),
// "bytes N" prints N x's, and "agent" is a long-running process (agent).
func (s *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var script []string
	if len(req.Command) > 0 {
		script = strings.Fields(req.Command[len(req.Command)-1])
	}
	if len(script) > 0 && script[0] == "agent" {
		return s.agent(ctx, req, script[1:])
	}
	if len(script) == 2 && script[0] == "sleep" {
		d, err := time.ParseDuration(script[1])
		time.Sleep(d)
		return sandbox.ExecResult{}, err
	}
	if len(script) == 2 && script[0] == "bytes" {
		n, err := strconv.Atoi(script[1])
		return sandbox.ExecResult{Stdout: strings.Repeat("x", n)}, err
	}
	s.level.mu.Lock()
	defer s.level.mu.Unlock()
	kv := s.spec.Environment
	switch {
	case len(script) == 3 && script[0] == "put":
		s.files[script[1]] = script[2]
		return sandbox.ExecResult{}, nil
	case len(script) == 1 && script[0] == "files":
		kv = s.files
	}
	var out strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		out.WriteString(k + "=" + kv[k] + "\n")
	}
	return sandbox.ExecResult{Stdout: out.String()}, nil
}

// agent runs until a line "exit N" on its stdin (exit N), its stdin's end (exit 0), ctx's end or
// the sandbox's (exit 137, as a kill). It prints its arguments first, then every other line of
// its stdin, to stdout; "err TEXT" prints TEXT to stderr.
func (s *fakeSandbox) agent(ctx context.Context, req sandbox.ExecRequest, args []string) (sandbox.ExecResult, error) {
	out := func(w io.Writer, line string) {
		if w != nil {
			_, _ = io.WriteString(w, line+"\n") // the fake's output goes where the caller said
		}
	}
	if len(args) > 0 {
		out(req.Stdout, strings.Join(args, " "))
	}
	lines := make(chan string)
	if req.Stdin != nil {
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(req.Stdin)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-s.gone:
					return
				}
			}
		}()
	} else {
		close(lines)
	}
	for {
		select {
		case <-ctx.Done():
			return sandbox.ExecResult{ExitCode: 137}, nil
		case <-s.gone:
			return sandbox.ExecResult{ExitCode: 137}, nil
		case line, ok := <-lines:
			if !ok {
				return sandbox.ExecResult{}, nil
			}
			if code, isExit := strings.CutPrefix(line, "exit "); isExit {
				n, err := strconv.Atoi(code)
				return sandbox.ExecResult{ExitCode: n}, err
			}
			if text, isErr := strings.CutPrefix(line, "err "); isErr {
				out(req.Stderr, text)
				continue
			}
			out(req.Stdout, line)
		}
	}
}

// SavesMemory says the sandbox's snapshots are of files only.
func (s *fakeSandbox) SavesMemory() bool { return false }

// Snapshot writes the sandbox's files as a tar under layerDir, in name order and with fixed
// times, so that equal files make equal layers.
func (s *fakeSandbox) Snapshot(_ context.Context, layer io.Writer, _ string) (bool, error) {
	s.level.mu.Lock()
	files := maps.Clone(s.files)
	s.level.mu.Unlock()
	tw := tar.NewWriter(layer)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: layerDir, Mode: 0o755, ModTime: epoch}); err != nil {
		return false, err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: layerDir + name, Mode: 0o644, Size: int64(len(files[name])), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return false, err
		}
		if _, err := io.WriteString(tw, files[name]); err != nil {
			return false, err
		}
	}
	return false, tw.Close()
}

// Destroy calls the OnDestroy hook, then takes the sandbox off the host.
func (s *fakeSandbox) Destroy(context.Context) error {
	s.level.mu.Lock()
	hook := s.level.onDestroy
	s.level.mu.Unlock()
	if hook != nil {
		hook(s.id)
	}
	s.level.mu.Lock()
	delete(s.level.live, s.id)
	s.level.mu.Unlock()
	s.once.Do(func() { close(s.gone) })
	return nil
}

// Claim gives the sandbox the claimant's spec, and counts the claim.
func (s *fakeSandbox) Claim(_ context.Context, spec sandbox.Spec) error {
	s.level.mu.Lock()
	defer s.level.mu.Unlock()
	s.spec = spec
	s.claims++
	return nil
}

func (s *fakeSandbox) Pause(context.Context) error  { return s.setPaused(true) }
func (s *fakeSandbox) Resume(context.Context) error { return s.setPaused(false) }

func (s *fakeSandbox) setPaused(p bool) error {
	s.level.mu.Lock()
	defer s.level.mu.Unlock()
	if _, ok := s.level.live[s.id]; !ok {
		return errors.New("the sandbox is gone")
	}
	s.paused = p
	return nil
}

// hostFacts are what a fake sandbox records for the daemon that adopts it.
type hostFacts struct {
	Instance string `json:"instance"`
}

func (s *fakeSandbox) HostFacts() json.RawMessage {
	b, _ := json.Marshal(hostFacts{Instance: s.id})
	return b
}

// plainSandbox is a fake sandbox with only the methods of driver.Sandbox: one of a level that
// cannot snapshot.
type plainSandbox struct{ driver.Sandbox }

// layerDir is the top-level directory of a fake layer's entries.
const layerDir = "files/"

// readLayer reads a fake layer's files, and the stream to its end.
func readLayer(r io.Reader) (map[string]string, error) {
	files := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && hdr.Typeflag == tar.TypeReg {
			var b []byte
			b, err = io.ReadAll(tr)
			files[strings.TrimPrefix(hdr.Name, layerDir)] = string(b)
		}
		if err != nil {
			// What the reader says (a corrupt snapshot) comes before what the tar made of it.
			if _, rerr := io.Copy(io.Discard, r); rerr != nil {
				return nil, rerr
			}
			return nil, fmt.Errorf("fake layer: %w", err)
		}
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, err
	}
	return files, nil
}
