package server

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// fakeLevel is a "process" level whose sandboxes are only records: enough for the manager to
// fill pools and hand their sandboxes out, and to snapshot and restore them, without root. A
// sandbox's state is a few named texts, its files; a snapshot's layer is a tar of them.
type fakeLevel struct {
	mu   sync.Mutex // guards live, noSnapshots and every sandbox's spec and files
	live map[string]*fakeSandbox
	// noSnapshots makes the sandboxes Create makes from now on ones that cannot be snapshotted,
	// as those of a level without driver.Snapshotter.
	noSnapshots bool
}

var (
	_ driver.Driver   = (*fakeLevel)(nil)
	_ driver.Restorer = (*fakeLevel)(nil)
)

func (f *fakeLevel) Name() string { return sandbox.LevelProcess }

func (f *fakeLevel) Capabilities() driver.Capabilities {
	return driver.Capabilities{Level: sandbox.LevelProcess, Available: true, Features: []string{driver.FeatureSnapshotFilesystem}}
}

func (f *fakeLevel) Create(_ context.Context, id string, spec sandbox.Spec) (driver.Sandbox, error) {
	sb := &fakeSandbox{level: f, id: id, spec: spec, files: map[string]string{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[id] = sb
	if f.noSnapshots {
		return plainSandbox{sb}, nil
	}
	return sb, nil
}

// Restore makes sandbox id with the files of a layer fakeSandbox.Snapshot wrote. It reads the
// layer to its end, where the snapshot store checks its digest, and fails with the reader's
// error when there is one, as a level must.
func (f *fakeLevel) Restore(_ context.Context, id string, spec sandbox.Spec, layer io.Reader, _ string) (driver.Sandbox, error) {
	files, err := readFakeLayer(layer)
	if err != nil {
		return nil, err
	}
	sb := &fakeSandbox{level: f, id: id, spec: spec, files: files}
	f.mu.Lock()
	f.live[id] = sb
	f.mu.Unlock()
	return sb, nil
}

// fakeLayerDir is the top-level directory of a fake layer's entries.
const fakeLayerDir = "files/"

// readFakeLayer reads a fake layer's files, and the stream to its end.
func readFakeLayer(r io.Reader) (map[string]string, error) {
	files := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err == nil && hdr.Typeflag == tar.TypeReg {
			var b []byte
			b, err = io.ReadAll(tr)
			files[strings.TrimPrefix(hdr.Name, fakeLayerDir)] = string(b)
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

// liveIDs returns the sandboxes created and not destroyed, sorted.
func (f *fakeLevel) liveIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

type fakeSandbox struct {
	level *fakeLevel
	id    string
	spec  sandbox.Spec      // guarded by level.mu
	files map[string]string // guarded by level.mu
}

var (
	_ driver.Sandbox     = (*fakeSandbox)(nil)
	_ driver.Claimer     = (*fakeSandbox)(nil)
	_ driver.Snapshotter = (*fakeSandbox)(nil)
)

func (s *fakeSandbox) ID() string { return s.id }

// Exec prints the sandbox's environment as K=V lines, sorted. Three commands (the last word of
// the command line, e.g. sh -c's script) do something else: "put NAME TEXT" writes a file,
// "files" prints them as NAME=TEXT lines, sorted, and "sleep DURATION" waits (a long exec).
func (s *fakeSandbox) Exec(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var script []string
	if len(req.Command) > 0 {
		script = strings.Fields(req.Command[len(req.Command)-1])
	}
	if len(script) == 2 && script[0] == "sleep" {
		d, err := time.ParseDuration(script[1])
		time.Sleep(d)
		return sandbox.ExecResult{}, err
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

// Snapshot writes the sandbox's files as a tar under fakeLayerDir, in name order and with fixed
// times, so that equal files make equal layers.
func (s *fakeSandbox) SavesMemory() bool { return false }

func (s *fakeSandbox) Snapshot(_ context.Context, layer io.Writer, _ string) (bool, error) {
	s.level.mu.Lock()
	files := maps.Clone(s.files)
	s.level.mu.Unlock()
	tw := tar.NewWriter(layer)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: fakeLayerDir, Mode: 0o755, ModTime: epoch}); err != nil {
		return false, err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fakeLayerDir + name, Mode: 0o644, Size: int64(len(files[name])), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return false, err
		}
		if _, err := io.WriteString(tw, files[name]); err != nil {
			return false, err
		}
	}
	return false, tw.Close()
}

func (s *fakeSandbox) Destroy(context.Context) error {
	s.level.mu.Lock()
	delete(s.level.live, s.id)
	s.level.mu.Unlock()
	return nil
}

func (s *fakeSandbox) Claim(_ context.Context, spec sandbox.Spec) error {
	s.level.mu.Lock()
	s.spec = spec
	s.level.mu.Unlock()
	return nil
}

// plainSandbox is a fake sandbox with only the methods of driver.Sandbox: one of a level that
// cannot snapshot.
type plainSandbox struct{ driver.Sandbox }

// poolAPI serves the API over a manager with the fake level and the configuration pools, and
// returns its URL, a key and the level.
func poolAPI(t *testing.T, configured ...api.Pool) (url, key string, level *fakeLevel) {
	t.Helper()
	st, _ := openStore(t)
	key = adminKey(t, st, "t1")
	level = &fakeLevel{live: map[string]*fakeSandbox{}}
	drivers := driver.NewRegistry()
	drivers.Register(level)
	log := slog.New(slog.DiscardHandler)
	m := manager.New(manager.Config{SnapshotDir: filepath.Join(t.TempDir(), "snapshots"), DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	if err := m.StartPools(context.Background(), configured); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{}, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	return srv.URL, key, level
}

// TestPoolAPI drives the pool routes, and a create that claims from a pool, against a real
// manager and store over a fake level: each step runs after the previous one.
func TestPoolAPI(t *testing.T) {
	cfg := api.Pool{Name: "cfg", Spec: api.Spec{Resources: api.Resources{MemoryMB: 128}}, Size: 1}
	url, key, level := poolAPI(t, cfg)
	var claimed, cold, readBack string
	var before []string

	pool := func(check func(api.PoolStatus) bool) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var p api.PoolStatus
			if err := json.Unmarshal(data, &p); err != nil || !check(p) {
				t.Errorf("pool %s (%v)", data, err)
			}
		}
	}
	names := func(want ...string) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var ps []api.PoolStatus
			json.Unmarshal(data, &ps)
			var have []string
			for _, p := range ps {
				have = append(have, p.Name)
			}
			if !slices.Equal(have, want) {
				t.Errorf("listed %q, want %q", have, want)
			}
		}
	}
	// waitFor polls the pool until check holds.
	waitFor := func(name string, check func(api.PoolStatus) bool) func(*testing.T, []byte) {
		return func(t *testing.T, _ []byte) {
			var p api.PoolStatus
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				_, env := call(t, "GET", url+"/api/v1/pools/"+name, key, "")
				if json.Unmarshal(env.Data, &p) == nil && check(p) {
					return
				}
			}
			t.Fatalf("pool %s: %+v", name, p)
		}
	}
	created := func(into *string) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if err := json.Unmarshal(data, &sb); err != nil || sb.Status != api.StatusReady {
				t.Fatalf("created %s (%v)", data, err)
			}
			*into = sb.ID
		}
	}
	const spec256 = `"spec":{"resources":{"memoryMb":256}}`
	runSteps(t, url, key, []apiStep{
		{name: "list the configured", method: "GET", path: "/api/v1/pools", status: 200, check: names("cfg")},
		{name: "put", method: "PUT", path: "/api/v1/pools/warm", body: `{` + spec256 + `,"size":2}`, status: 200, check: pool(func(p api.PoolStatus) bool {
			return p.Name == "warm" && p.Source == "api" && p.Size == 2 && p.RefillPerSecond == 10 && p.MaxAgeSeconds == 3600 &&
				p.Spec.Isolation == sandbox.LevelProcess && p.Spec.Resources.MemoryMB == 256
		})},
		{name: "put again, the body naming it", method: "PUT", path: "/api/v1/pools/warm", body: `{"name":"warm",` + spec256 + `,"size":2,"maxAgeSeconds":600}`,
			status: 200, check: pool(func(p api.PoolStatus) bool { return p.MaxAgeSeconds == 600 })},
		{name: "list", method: "GET", path: "/api/v1/pools", status: 200, check: names("cfg", "warm")},
		{name: "body names another pool", method: "PUT", path: "/api/v1/pools/warm", body: `{"name":"other",` + spec256 + `,"size":2}`,
			status: 400, code: api.CodeInvalidArgument, field: "name", msg: `"other"`},
		{name: "claim-time field", method: "PUT", path: "/api/v1/pools/env", body: `{"spec":{"environment":{"A":"1"}},"size":1}`,
			status: 400, code: api.CodeInvalidArgument, field: "spec.environment", msg: "claim"},
		{name: "unknown field", method: "PUT", path: "/api/v1/pools/x", body: `{"spec":{"memoryMb":256},"size":1}`,
			status: 400, code: api.CodeInvalidArgument, field: "spec.memoryMb"},
		{name: "case-mismatched key", method: "PUT", path: "/api/v1/pools/x", body: `{"Size":1}`, status: 400, code: api.CodeInvalidArgument, field: "Size"},
		{name: "no body", method: "PUT", path: "/api/v1/pools/x", status: 400, code: api.CodeInvalidArgument, field: "body"},
		{name: "size out of range", method: "PUT", path: "/api/v1/pools/x", body: `{"size":0}`, status: 400, code: api.CodeInvalidArgument, field: "size"},
		{name: "bad spec field", method: "PUT", path: "/api/v1/pools/x", body: `{"spec":{"resources":{"memoryMb":1}},"size":1}`,
			status: 400, code: api.CodeInvalidArgument, field: "spec.resources.memoryMb"},
		{name: "bad name", method: "PUT", path: "/api/v1/pools/a:b", body: `{"size":1}`, status: 400, code: api.CodeInvalidArgument, field: "name"},
		{name: "level this host lacks", method: "PUT", path: "/api/v1/pools/x", body: `{"spec":{"isolation":"wasm"},"size":1}`,
			status: 422, code: api.CodeIsolationUnavailable, field: "spec.isolation"},
		{name: "configured pool", method: "PUT", path: "/api/v1/pools/cfg", body: `{"size":3}`, status: 409, code: api.CodeConflict, msg: "configuration file"},
		{name: "get unknown", method: "GET", path: "/api/v1/pools/nope", status: 404, code: api.CodeNotFound},
		{name: "fills", check: waitFor("warm", func(p api.PoolStatus) bool { return p.Ready == 2 && p.Warming == 0 })},
		{name: "create of the shape", method: "POST", path: "/api/v1/sandboxes", body: `{"resources":{"memoryMb":256},"environment":{"FOO":"bar"},"name":"mine"}`,
			status: 201, check: created(&claimed)},
		{name: "claimed", method: "GET", path: "/api/v1/pools/warm", status: 200, check: pool(func(p api.PoolStatus) bool {
			return p.Claims == 1 && p.Misses == 0 && p.HitRate == 1
		})},
		{name: "the claim's environment", method: "POST", path: "/api/v1/sandboxes/{claimed}/exec", body: `{"command":"env"}`, status: 200, check: func(t *testing.T, data []byte) {
			var r api.ExecResult
			if json.Unmarshal(data, &r); !strings.Contains(r.Stdout, "FOO=bar\n") {
				t.Errorf("exec in the claimed sandbox: %s", data)
			}
		}},
		{name: "claimed event", method: "GET", path: "/api/v1/sandboxes/{claimed}/events?type=sandbox.claimed", status: 200, check: func(t *testing.T, data []byte) {
			var p api.EventPage
			if json.Unmarshal(data, &p); len(p.Events) != 1 || p.Events[0].Data["pool"] != "warm" {
				t.Errorf("events %s, want one sandbox.claimed of pool warm", data)
			}
		}},
		{name: "refills", check: waitFor("warm", func(p api.PoolStatus) bool { return p.Ready == 2 })},
		{name: "create of another shape", method: "POST", path: "/api/v1/sandboxes", body: `{"resources":{"memoryMb":512}}`, status: 201, check: created(&cold)},
		{name: "not counted", method: "GET", path: "/api/v1/pools/warm", status: 200, check: pool(func(p api.PoolStatus) bool { return p.Claims == 1 && p.Misses == 0 })},
		{name: "another pool of the same shape", method: "PUT", path: "/api/v1/pools/twin", body: `{` + spec256 + `,"size":1}`,
			status: 409, code: api.CodeConflict, msg: "same shape"},
		{name: "remember the ready ones", check: func(t *testing.T, _ []byte) { before = level.liveIDs() }},
		{name: "resize", method: "PUT", path: "/api/v1/pools/warm", body: `{` + spec256 + `,"size":3}`, status: 200,
			check: pool(func(p api.PoolStatus) bool { return p.Size == 3 && p.Claims == 1 })},
		{name: "grows", check: waitFor("warm", func(p api.PoolStatus) bool { return p.Ready == 3 })},
		{name: "a resize keeps the ready ones", check: func(t *testing.T, _ []byte) {
			live := level.liveIDs()
			for _, id := range before {
				if !slices.Contains(live, id) {
					t.Errorf("sandbox %s ended by a resize; live %q", id, live)
				}
			}
		}},
		{name: "read back", method: "GET", path: "/api/v1/pools/warm", status: 200, check: func(t *testing.T, data []byte) {
			var p api.PoolStatus
			json.Unmarshal(data, &p)
			b, _ := json.Marshal(p.Pool)
			readBack = string(b)
		}},
		{name: "its pool sent again as read", method: "PUT", path: "/api/v1/pools/warm", body: "{readBack}", status: 200,
			check: pool(func(p api.PoolStatus) bool { return p.Size == 3 && p.Spec.Timeout == api.Timeout{} })},
		{name: "delete configured", method: "DELETE", path: "/api/v1/pools/cfg", status: 409, code: api.CodeConflict, msg: "configuration file"},
		{name: "delete", method: "DELETE", path: "/api/v1/pools/warm", status: 200, check: pool(func(p api.PoolStatus) bool { return p.Name == "warm" && p.Claims == 1 })},
		{name: "deleted is gone", method: "GET", path: "/api/v1/pools/warm", status: 404, code: api.CodeNotFound},
		{name: "delete again", method: "DELETE", path: "/api/v1/pools/warm", status: 404, code: api.CodeNotFound},
		{name: "its unclaimed sandboxes ended", check: func(t *testing.T, _ []byte) {
			// Left: the claimed one, the cold one and the configured pool's.
			if live := level.liveIDs(); len(live) != 3 || !slices.Contains(live, claimed) || !slices.Contains(live, cold) {
				t.Errorf("live sandboxes %q; want %s, %s and the configured pool's", live, claimed, cold)
			}
		}},
		{name: "the claimed one stays", method: "GET", path: "/api/v1/sandboxes/{claimed}", status: 200, check: func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if json.Unmarshal(data, &sb); sb.Name != "mine" || sb.Status == api.StatusTerminated {
				t.Errorf("claimed sandbox after its pool's removal: %s", data)
			}
		}},
	}, func(v string) string {
		return strings.NewReplacer("{claimed}", claimed, "{readBack}", readBack).Replace(v)
	})
}

// TestPoolAPIClient goes through the Go client: its paths reach the routes, and its errors are
// the sentinels.
func TestPoolAPIClient(t *testing.T) {
	url, key, _ := poolAPI(t, api.Pool{Name: "cfg", Size: 1})
	c, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.PutPool(ctx, api.Pool{Name: "small", Spec: api.Spec{Resources: api.Resources{MemoryMB: 64}}, Size: 1, RefillPerSecond: 50})
	if err != nil || p.Name != "small" || p.Source != "api" || p.RefillPerSecond != 50 {
		t.Fatalf("PutPool = %+v, %v", p, err)
	}
	if got, err := c.Pool(ctx, "small"); err != nil || got.Spec.Resources.MemoryMB != 64 {
		t.Errorf("Pool = %+v, %v", got, err)
	}
	if list, err := c.Pools(ctx); err != nil || len(list) != 2 || list[0].Name != "cfg" || list[1].Name != "small" {
		t.Errorf("Pools = %+v, %v", list, err)
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		want  error
		field string
	}{
		{"put a claim-time field", func() error {
			_, err := c.PutPool(ctx, api.Pool{Name: "x", Spec: api.Spec{Name: "n"}, Size: 1})
			return err
		}, client.ErrInvalidArgument, "spec.name"},
		{"put a level this host lacks", func() error {
			_, err := c.PutPool(ctx, api.Pool{Name: "x", Spec: api.Spec{Isolation: "microvm"}, Size: 1})
			return err
		}, client.ErrIsolationUnavailable, "spec.isolation"},
		{"put a configured pool", func() error { _, err := c.PutPool(ctx, api.Pool{Name: "cfg", Size: 2}); return err }, client.ErrConflict, ""},
		{"pool unknown", func() error { _, err := c.Pool(ctx, "nope"); return err }, client.ErrNotFound, ""},
		{"pool with a slash", func() error { _, err := c.Pool(ctx, "a/b"); return err }, client.ErrNotFound, ""},
		{"delete a configured pool", func() error { _, err := c.DeletePool(ctx, "cfg"); return err }, client.ErrConflict, ""},
	} {
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else if ce, _ := errors.AsType[*client.Error](err); ce.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, ce.Field, tc.field)
		}
	}
	if p, err := c.DeletePool(ctx, "small"); err != nil || p.Name != "small" {
		t.Errorf("DeletePool = %+v, %v", p, err)
	}
	if _, err := c.DeletePool(ctx, "small"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("DeletePool twice: %v", err)
	}
}

// TestPoolRecycles lets a pool's only sandbox age out: it ends, a new one takes its place, and
// the pool counts it recycled.
func TestPoolRecycles(t *testing.T) {
	url, key, level := poolAPI(t)
	c, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.PutPool(ctx, api.Pool{Name: "short", Size: 1, MaxAgeSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	var first []string
	for deadline := time.Now().Add(10 * time.Second); len(first) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool never filled")
		}
		first = level.liveIDs()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := c.Pool(ctx, "short")
		live := level.liveIDs()
		if err == nil && p.Recycled >= 1 && p.Ready == 1 && len(live) == 1 && live[0] != first[0] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: pool %+v (%v), live %q; want %s recycled and replaced", p, err, live, first[0])
		}
	}
}
