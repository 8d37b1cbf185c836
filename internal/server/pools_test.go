package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// poolAPI serves the API over a manager with the fake level and the configuration pools, and
// returns its URL, a key and the level.
func poolAPI(t *testing.T, configured ...api.Pool) (url, key string, level *drivertest.Fake) {
	t.Helper()
	st, _ := openStore(t)
	key = adminKey(t, st, "t1")
	level = drivertest.NewFake()
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
			if err := json.Unmarshal(data, &ps); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
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
		{name: "create of the shape", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"resources":{"memoryMb":256},"environment":{"FOO":"bar"},"name":"mine"}`,
			status: 201, check: created(&claimed)},
		{name: "claimed", method: "GET", path: "/api/v1/pools/warm", status: 200, check: pool(func(p api.PoolStatus) bool {
			return p.Claims == 1 && p.Misses == 0 && p.HitRate == 1
		})},
		{name: "the claim's environment", method: "POST", path: "/api/v1/sandboxes/{claimed}/exec", body: `{"command":"env"}`, status: 200, check: func(t *testing.T, data []byte) {
			var r api.ExecResult
			if err := json.Unmarshal(data, &r); err != nil || !strings.Contains(r.Stdout, "FOO=bar\n") {
				t.Errorf("exec in the claimed sandbox: %s", data)
			}
		}},
		{name: "claimed event", method: "GET", path: "/api/v1/sandboxes/{claimed}/events?type=sandbox.claimed", status: 200, check: func(t *testing.T, data []byte) {
			var p api.EventPage
			if err := json.Unmarshal(data, &p); err != nil || len(p.Events) != 1 || p.Events[0].Data["pool"] != "warm" {
				t.Errorf("events %s, want one sandbox.claimed of pool warm", data)
			}
		}},
		{name: "refills", check: waitFor("warm", func(p api.PoolStatus) bool { return p.Ready == 2 })},
		{name: "create of another shape", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"resources":{"memoryMb":512}}`, status: 201, check: created(&cold)},
		{name: "not counted", method: "GET", path: "/api/v1/pools/warm", status: 200, check: pool(func(p api.PoolStatus) bool { return p.Claims == 1 && p.Misses == 0 })},
		{name: "another pool of the same shape", method: "PUT", path: "/api/v1/pools/twin", body: `{` + spec256 + `,"size":1}`,
			status: 409, code: api.CodeConflict, msg: "same shape"},
		{name: "remember the ready ones", check: func(t *testing.T, _ []byte) { before = level.Live() }},
		{name: "resize", method: "PUT", path: "/api/v1/pools/warm", body: `{` + spec256 + `,"size":3}`, status: 200,
			check: pool(func(p api.PoolStatus) bool { return p.Size == 3 && p.Claims == 1 })},
		{name: "grows", check: waitFor("warm", func(p api.PoolStatus) bool { return p.Ready == 3 })},
		{name: "a resize keeps the ready ones", check: func(t *testing.T, _ []byte) {
			live := level.Live()
			for _, id := range before {
				if !slices.Contains(live, id) {
					t.Errorf("sandbox %s ended by a resize; live %q", id, live)
				}
			}
		}},
		{name: "read back", method: "GET", path: "/api/v1/pools/warm", status: 200, check: func(t *testing.T, data []byte) {
			var p api.PoolStatus
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
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
			if live := level.Live(); len(live) != 3 || !slices.Contains(live, claimed) || !slices.Contains(live, cold) {
				t.Errorf("live sandboxes %q; want %s, %s and the configured pool's", live, claimed, cold)
			}
		}},
		{name: "the claimed one stays", method: "GET", path: "/api/v1/sandboxes/{claimed}", status: 200, check: func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if err := json.Unmarshal(data, &sb); err != nil || sb.Name != "mine" || sb.Status == api.StatusTerminated {
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
		first = level.Live()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := c.Pool(ctx, "short")
		live := level.Live()
		if err == nil && p.Recycled >= 1 && p.Ready == 1 && len(live) == 1 && live[0] != first[0] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: pool %+v (%v), live %q; want %s recycled and replaced", p, err, live, first[0])
		}
	}
}
