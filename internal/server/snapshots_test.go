package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// TestSnapshotRouting: each snapshot route is served by its own pattern, and a method or path
// the API does not have is the API's 404, not the mux's 405.
func TestSnapshotRouting(t *testing.T) {
	s := New(Config{}, nil, nil, nil, Images{}, slog.New(slog.DiscardHandler))
	for _, c := range []struct{ method, path, pattern string }{
		{"POST", "/api/v1/sandboxes/sbx_1/snapshots", "POST " + sbx + "/snapshots"},
		{"GET", "/api/v1/sandboxes/sbx_1/snapshots", "GET " + sbx + "/snapshots"},
		{"POST", "/api/v1/sandboxes/sbx_1/restore", "POST " + sbx + "/restore"},
		{"POST", "/api/v1/sandboxes/sbx_1/fork", "POST " + sbx + "/fork"},
		{"GET", "/api/v1/snapshots", "GET /api/v1/snapshots"},
		{"GET", "/api/v1/snapshots/snap_1", "GET " + snapPath},
		{"DELETE", "/api/v1/snapshots/snap_1", "DELETE " + snapPath},
		{"PUT", "/api/v1/snapshots/snap_1", "/"},
		{"POST", "/api/v1/snapshots", "/"},
		{"DELETE", "/api/v1/snapshots", "/"},
		{"GET", "/api/v1/sandboxes/sbx_1/restore", "/"},
		{"GET", "/api/v1/sandboxes/sbx_1/fork", "/"},
		{"DELETE", "/api/v1/sandboxes/sbx_1/snapshots", "/"},
		{"GET", "/api/v1/snapshots/snap_1/restore", "/"},
	} {
		if _, pattern := s.mux.Handler(httptest.NewRequest(c.method, c.path, nil)); pattern != c.pattern {
			t.Errorf("%s %s is served by %q, want %q", c.method, c.path, pattern, c.pattern)
		}
	}
}

// TestSnapshotRequests drives what the snapshot routes refuse before the manager sees the request
// (the key, strict decoding, the body's size, routes that do not exist): the API is served
// without a manager, so a request that reached it would fail the test.
func TestSnapshotRequests(t *testing.T) {
	url, key := imageAPI(t, Images{})
	big := `{"name":"` + strings.Repeat("x", 1<<20) + `"}`
	var steps []apiStep
	for _, r := range []struct{ method, path string }{
		{"POST", "/api/v1/sandboxes/sbx_1/snapshots"}, {"GET", "/api/v1/sandboxes/sbx_1/snapshots"},
		{"POST", "/api/v1/sandboxes/sbx_1/restore"}, {"POST", "/api/v1/sandboxes/sbx_1/fork"},
		{"GET", "/api/v1/snapshots"}, {"GET", "/api/v1/snapshots/snap_1"}, {"DELETE", "/api/v1/snapshots/snap_1"},
	} {
		steps = append(steps, apiStep{name: "no key", method: r.method, path: r.path, noKey: true, status: 401, code: api.CodeUnauthorized})
	}
	steps = append(steps, []apiStep{
		{name: "snapshot: unknown field", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: `{"nmae":"x"}`,
			status: 400, code: api.CodeInvalidArgument, field: "nmae", msg: "unknown field"},
		{name: "snapshot: case-mismatched key", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: `{"Name":"x"}`,
			status: 400, code: api.CodeInvalidArgument, field: "Name", msg: "unknown field"},
		{name: "snapshot: wrong type", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: `{"description":1}`,
			status: 400, code: api.CodeInvalidArgument, field: "description", msg: "must be a string"},
		{name: "snapshot: not an object", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: `["x"]`,
			status: 400, code: api.CodeInvalidArgument, field: "body"},
		{name: "snapshot: trailing data", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: `{} {}`,
			status: 400, code: api.CodeInvalidArgument, field: "body", msg: "after the JSON object"},
		{name: "snapshot: truncated", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: `{"name":`,
			status: 400, code: api.CodeInvalidArgument, field: "body"},
		{name: "snapshot: too large", method: "POST", path: "/api/v1/sandboxes/sbx_1/snapshots", body: big,
			status: 413, code: api.CodePayloadTooLarge},
		{name: "restore: no body", method: "POST", path: "/api/v1/sandboxes/sbx_1/restore",
			status: 400, code: api.CodeInvalidArgument, field: "body", msg: "JSON object is required"},
		{name: "restore: case-mismatched key", method: "POST", path: "/api/v1/sandboxes/sbx_1/restore", body: `{"snapshotID":"snap_1"}`,
			status: 400, code: api.CodeInvalidArgument, field: "snapshotID", msg: "unknown field"},
		{name: "restore: wrong type", method: "POST", path: "/api/v1/sandboxes/sbx_1/restore", body: `{"snapshotId":1}`,
			status: 400, code: api.CodeInvalidArgument, field: "snapshotId", msg: "must be a string"},
		{name: "restore: too large", method: "POST", path: "/api/v1/sandboxes/sbx_1/restore", body: big,
			status: 413, code: api.CodePayloadTooLarge},
		{name: "fork: unknown field", method: "POST", path: "/api/v1/sandboxes/sbx_1/fork", body: `{"count":2,"prefix":"w"}`,
			status: 400, code: api.CodeInvalidArgument, field: "prefix", msg: "unknown field"},
		{name: "fork: count as a string", method: "POST", path: "/api/v1/sandboxes/sbx_1/fork", body: `{"count":"2"}`,
			status: 400, code: api.CodeInvalidArgument, field: "count", msg: "must be a number"},
		{name: "fork: count not whole", method: "POST", path: "/api/v1/sandboxes/sbx_1/fork", body: `{"count":1.5}`,
			status: 400, code: api.CodeInvalidArgument, field: "count"},
		{name: "fork: too large", method: "POST", path: "/api/v1/sandboxes/sbx_1/fork", body: big,
			status: 413, code: api.CodePayloadTooLarge},
		{name: "no such method", method: "PUT", path: "/api/v1/snapshots/snap_1", body: `{}`,
			status: 404, code: api.CodeNotFound, msg: "no route PUT /api/v1/snapshots/snap_1"},
		{name: "no create of a snapshot by itself", method: "POST", path: "/api/v1/snapshots", body: `{}`,
			status: 404, code: api.CodeNotFound, msg: "no route POST"},
		{name: "restore is not a GET", method: "GET", path: "/api/v1/sandboxes/sbx_1/restore",
			status: 404, code: api.CodeNotFound, msg: "no route GET"},
	}...)
	runSteps(t, url, key, steps, func(v string) string { return v })
}

// TestDecodeOptional: the bodies that snapshot and fork may leave out. Nothing, or white space,
// leaves the request zero; anything else is decoded as strictly as every other body.
func TestDecodeOptional(t *testing.T) {
	for _, c := range []struct {
		body  string
		want  api.ForkRequest
		field string // of the refusal, "" for none
	}{
		{"", api.ForkRequest{}, ""},
		{" \r\n\t", api.ForkRequest{}, ""},
		{"{}", api.ForkRequest{}, ""},
		{`{"count":3,"name":"w"}`, api.ForkRequest{Count: 3, Name: "w"}, ""},
		{`{"Count":3}`, api.ForkRequest{}, "Count"},
		{`{"count":3}x`, api.ForkRequest{}, "body"},
		{`"x"`, api.ForkRequest{}, "body"},
	} {
		var req api.ForkRequest
		r := httptest.NewRequest("POST", "/api/v1/sandboxes/sbx_1/fork", strings.NewReader(c.body))
		err := decodeOptional(httptest.NewRecorder(), r, 1<<10, &req)
		fe, _ := errors.AsType[*errdefs.FieldError](err)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%q: %v", c.body, err)
		case c.field != "" && (fe == nil || fe.Field != c.field):
			t.Errorf("%q: %v, want a refusal of field %q", c.body, err, c.field)
		case c.field == "" && req != c.want:
			t.Errorf("%q: %+v, want %+v", c.body, req, c.want)
		}
	}
	var req api.SnapshotRequest
	r := httptest.NewRequest("POST", "/api/v1/sandboxes/sbx_1/snapshots", strings.NewReader(" "+strings.Repeat(" ", 1<<10)))
	if err := decodeOptional(httptest.NewRecorder(), r, 1<<10, &req); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("white space beyond the limit: %v, want ErrTooLarge", err)
	}
}

// TestSnapshotOpenAPI: the document has every snapshot route with its body, answer and status,
// and the wire types as schemas.
func TestSnapshotOpenAPI(t *testing.T) {
	raw, err := json.Marshal(buildOpenAPI("test"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters  []struct{ Name, In, Description string }
			RequestBody map[string]any             `json:"requestBody"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path, status, data string // data: the schema the answer's data refers to
		body                       bool
	}{
		{"post", "/api/v1/sandboxes/{id}/snapshots", "201", "Snapshot", true},
		{"get", "/api/v1/sandboxes/{id}/snapshots", "200", "Snapshot", false},
		{"post", "/api/v1/sandboxes/{id}/restore", "200", "Restore", true},
		{"post", "/api/v1/sandboxes/{id}/fork", "201", "Fork", true},
		{"get", "/api/v1/snapshots", "200", "Snapshot", false},
		{"get", "/api/v1/snapshots/{snapshotId}", "200", "Snapshot", false},
		{"delete", "/api/v1/snapshots/{snapshotId}", "200", "Snapshot", false},
	} {
		op, ok := doc.Paths[c.path][c.method]
		if !ok {
			t.Errorf("%s %s is not in the document", c.method, c.path)
			continue
		}
		if resp := op.Responses[c.status]; !strings.Contains(string(resp), `"#/components/schemas/`+c.data+`"`) {
			t.Errorf("%s %s: no %s answer of %s: %s", c.method, c.path, c.status, c.data, resp)
		}
		if (op.RequestBody != nil) != c.body {
			t.Errorf("%s %s: request body %v, want one: %v", c.method, c.path, op.RequestBody, c.body)
		}
		if strings.Contains(c.path, "{snapshotId}") && !slices.ContainsFunc(op.Parameters, func(p struct{ Name, In, Description string }) bool {
			return p.Name == "snapshotId" && p.In == "path" && strings.Contains(p.Description, "snap_")
		}) {
			t.Errorf("%s %s: {snapshotId} undocumented: %+v", c.method, c.path, op.Parameters)
		}
	}
	for _, name := range []string{"Snapshot", "SnapshotRequest", "RestoreRequest", "ForkRequest", "Fork"} {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schema %s missing", name)
		}
	}
}

// snapshotAPI serves the API over a real manager, store and snapshot store, with the fake level
// (drivertest.Fake) and cfg, and returns its URL, a key of tenant t1 and one of t2, the level and
// the snapshot directory.
func snapshotAPI(t *testing.T, cfg manager.Config) (url, key, other string, level *drivertest.Fake, dir string) {
	t.Helper()
	st, keys := openStore(t, "t1", "t2")
	key, other = keys[0], keys[1]
	level = drivertest.NewFake()
	drivers := driver.NewRegistry()
	drivers.Register(level)
	log := slog.New(slog.DiscardHandler)
	cfg.SnapshotDir = filepath.Join(t.TempDir(), "snapshots")
	cfg.DefaultIsolation = sandbox.LevelProcess // the fake level's
	m := manager.New(cfg, drivers, st, log)
	t.Cleanup(m.Close)
	srv := httptest.NewServer(New(Config{}, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	return srv.URL, key, other, level, cfg.SnapshotDir
}

// TestSnapshotAPI drives the snapshot routes, and creates from a snapshot, against a real
// manager, store and snapshot store over the fake level, whose layers are tars of a sandbox's
// files: each step runs after the previous one.
func TestSnapshotAPI(t *testing.T) {
	url, key, other, level, dir := snapshotAPI(t, manager.Config{})
	vars := map[string]string{}
	expand := func(v string) string {
		for k, x := range vars {
			v = strings.ReplaceAll(v, "{"+k+"}", x)
		}
		return v
	}
	var live []string // the level's live sandboxes, remembered
	var blob []byte   // the stored layer, before it was corrupted

	decodeInto := func(t *testing.T, data []byte, v any) {
		t.Helper()
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
	}
	// sandboxAs checks a sandbox answered ready and, when name is not "", remembers its id.
	sandboxAs := func(name string, check func(api.Sandbox) bool) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var sb api.Sandbox
			decodeInto(t, data, &sb)
			if !strings.HasPrefix(sb.ID, "sbx_") || sb.Status != api.StatusReady || (check != nil && !check(sb)) {
				t.Fatalf("sandbox %s", data)
			}
			if name != "" {
				vars[name] = sb.ID
			}
		}
	}
	// snapAs checks a snapshot and, when name is not "", remembers its id.
	snapAs := func(name string, check func(api.Snapshot) bool) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var sn api.Snapshot
			decodeInto(t, data, &sn)
			if !strings.HasPrefix(sn.ID, "snap_") || sn.Isolation != sandbox.LevelProcess || sn.Memory || sn.LayerBytes <= 0 ||
				sn.SizeMB <= 0 || !strings.HasPrefix(sn.Digest, "sha256:") || sn.CreatedAt.IsZero() || !check(sn) {
				t.Fatalf("snapshot %s", data)
			}
			if name != "" {
				vars[name] = sn.ID
			}
		}
	}
	// snaps checks a listing: the snapshots named, in that order.
	snaps := func(names ...string) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var list []api.Snapshot
			decodeInto(t, data, &list)
			var have, want []string
			for _, sn := range list {
				have = append(have, sn.ID)
			}
			for _, n := range names {
				want = append(want, vars[n])
			}
			if !slices.Equal(have, want) {
				t.Errorf("listed %q, want %q (%q)", have, want, names)
			}
		}
	}
	// files checks what sandbox {name}'s files are, as its exec prints them.
	files := func(name, want string) apiStep {
		return apiStep{name: name + "'s files", method: "POST", path: "/api/v1/sandboxes/{" + name + "}/exec", body: `{"command":"files"}`, status: 200,
			check: func(t *testing.T, data []byte) {
				var r api.ExecResult
				if decodeInto(t, data, &r); r.Stdout != want {
					t.Errorf("%s's files %q, want %q", name, r.Stdout, want)
				}
			}}
	}
	put := func(name, file, text string) apiStep {
		return apiStep{name: "write " + file + " in " + name, method: "POST", path: "/api/v1/sandboxes/{" + name + "}/exec",
			body: `{"command":"put ` + file + ` ` + text + `"}`, status: 200, check: func(*testing.T, []byte) {}}
	}
	// as is a request of tenant t2's: its status and, for a failure, code and field; for a success
	// then does what it will with the data.
	as := func(name, method, path, body string, status int, code, field string, then func(*testing.T, []byte)) apiStep {
		return apiStep{name: name, check: func(t *testing.T, _ []byte) {
			t.Helper()
			got, env := call(t, method, url+expand(path), other, expand(body))
			switch {
			case got != status:
				t.Fatalf("%s: %d %+v %s, want %d", name, got, env.Error, env.Data, status)
			case status >= 300 && (env.Error == nil || env.Error.Code != code || env.Error.Field != field):
				t.Errorf("%s: error %+v, want %s %q", name, env.Error, code, field)
			case then != nil:
				then(t, env.Data)
			}
		}}
	}
	// stateOf is a request refused because the sandbox is terminated: a conflict that says so.
	terminated := func(name, method, path, body string) apiStep {
		return apiStep{name: name, check: func(t *testing.T, _ []byte) {
			got, env := call(t, method, url+expand(path), key, expand(body))
			if e := env.Error; got != 409 || e == nil || e.Code != api.CodeConflict || e.Status != api.StatusTerminated {
				t.Errorf("%s: %d %+v, want 409 conflict with status terminated", name, got, e)
			}
		}}
	}
	// blobPath is where the layer of snapshot {name} is stored.
	blobPath := func(t *testing.T, name string) string {
		_, env := call(t, "GET", url+"/api/v1/snapshots/"+vars[name], key, "")
		var sn api.Snapshot
		decodeInto(t, env.Data, &sn)
		p := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(sn.Digest, "sha256:"))
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	const sbxA = "/api/v1/sandboxes/{a}"

	runSteps(t, url, key, []apiStep{
		{name: "capabilities", method: "GET", path: "/api/v1/capabilities", status: 200, check: func(t *testing.T, data []byte) {
			var c api.Capabilities
			if decodeInto(t, data, &c); !c.Features["snapshots"] || len(c.Levels) == 0 || c.Levels[0].Level != sandbox.LevelProcess || !slices.Contains(c.Levels[0].Features, driver.FeatureSnapshotFilesystem) {
				t.Errorf("capabilities %s: want snapshots, and level process's %s", data, driver.FeatureSnapshotFilesystem)
			}
		}},
		{name: "create a", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"resources":{"memoryMb":256},"environment":{"STAGE":"one"},"metadata":{"step":"1"}}`,
			status: 201, check: sandboxAs("a", nil)},
		put("a", "f", "v1"),
		{name: "create a sandbox of user root", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"user":"root"}`, status: 201, check: sandboxAs("root", nil)},
		{name: "create one to terminate", method: "POST", path: "/api/v1/sandboxes?wait=true", status: 201, body: `{}`, check: sandboxAs("gone", nil)},
		{name: "terminate it", method: "DELETE", path: "/api/v1/sandboxes/{gone}", status: 200, check: func(*testing.T, []byte) {}},
		as("t2 creates a sandbox", "POST", "/api/v1/sandboxes?wait=true", `{}`, 201, "", "", sandboxAs("theirs", nil)),

		// Snapshot.
		{name: "snapshot, no body", method: "POST", path: sbxA + "/snapshots", status: 201, check: snapAs("s1", func(sn api.Snapshot) bool {
			return sn.Name == sn.ID && sn.Description == "" && sn.SandboxID == vars["a"]
		})},
		put("a", "f", "v2"),
		put("a", "g", "new"),
		{name: "snapshot with name and description", method: "POST", path: sbxA + "/snapshots", body: `{"name":"second","description":"after the change"}`,
			status: 201, check: snapAs("s2", func(sn api.Snapshot) bool {
				return sn.Name == "second" && sn.Description == "after the change" && sn.SandboxID == vars["a"] && sn.ID != vars["s1"]
			})},
		{name: "snapshot, empty object", method: "POST", path: "/api/v1/sandboxes/{root}/snapshots", body: `{}`, status: 201, check: snapAs("sRoot", func(sn api.Snapshot) bool {
			return sn.Name == sn.ID && sn.SandboxID == vars["root"]
		})},
		{name: "name at the limit", method: "POST", path: sbxA + "/snapshots", body: `{"name":"` + long(128) + `"}`, status: 201,
			check: snapAs("s3", func(sn api.Snapshot) bool { return sn.Name == long(128) })},
		{name: "name too long", method: "POST", path: sbxA + "/snapshots", body: `{"name":"` + long(129) + `"}`,
			status: 400, code: api.CodeInvalidArgument, field: "name", msg: "128"},
		{name: "description too long", method: "POST", path: sbxA + "/snapshots", body: `{"description":"` + long(1025) + `"}`,
			status: 400, code: api.CodeInvalidArgument, field: "description", msg: "1024"},
		{name: "unknown sandbox", method: "POST", path: "/api/v1/sandboxes/sbx_nope/snapshots", status: 404, code: api.CodeNotFound},
		as("another tenant's sandbox", "POST", sbxA+"/snapshots", ``, 404, api.CodeNotFound, "", nil),
		{name: "terminated sandbox", method: "POST", path: "/api/v1/sandboxes/{gone}/snapshots", status: 409, code: api.CodeConflict, msg: "terminated"},
		terminated("terminated sandbox: its status", "POST", "/api/v1/sandboxes/{gone}/snapshots", ``),
		{name: "a level that cannot snapshot", check: func(t *testing.T, _ []byte) {
			level.SetSnapshots(false)
			defer level.SetSnapshots(true)
			if status, env := call(t, "POST", url+"/api/v1/sandboxes?wait=true", key, `{}`); status != 201 {
				t.Fatalf("create: %d %+v", status, env.Error)
			} else {
				sandboxAs("plain", nil)(t, env.Data)
			}
		}},
		{name: "snapshot of it", method: "POST", path: "/api/v1/sandboxes/{plain}/snapshots", status: 422, code: api.CodeUnavailable, msg: "cannot snapshot"},
		{name: "a snapshot event", method: "GET", path: sbxA + "/events?type=sandbox.snapshot", status: 200, check: func(t *testing.T, data []byte) {
			var p api.EventPage
			if decodeInto(t, data, &p); len(p.Events) != 3 || p.Events[0].Data["snapshotId"] != vars["s1"] || p.Events[1].Data["name"] != "second" {
				t.Errorf("sandbox.snapshot events %s, want those of s1, s2 and s3", data)
			}
		}},

		// List and get.
		{name: "the sandbox's, newest first", method: "GET", path: sbxA + "/snapshots", status: 200, check: snaps("s3", "s2", "s1")},
		{name: "another sandbox's", method: "GET", path: "/api/v1/sandboxes/{root}/snapshots", status: 200, check: snaps("sRoot")},
		{name: "a sandbox without any", method: "GET", path: "/api/v1/sandboxes/{gone}/snapshots", status: 200, check: snaps()},
		{name: "the tenant's", method: "GET", path: "/api/v1/snapshots", status: 200, check: snaps("s3", "sRoot", "s2", "s1")},
		{name: "list of an unknown sandbox", method: "GET", path: "/api/v1/sandboxes/sbx_nope/snapshots", status: 404, code: api.CodeNotFound},
		as("list of another tenant's sandbox", "GET", sbxA+"/snapshots", ``, 404, api.CodeNotFound, "", nil),
		as("t2 has none", "GET", "/api/v1/snapshots", ``, 200, "", "", snaps()),
		{name: "get", method: "GET", path: "/api/v1/snapshots/{s2}", status: 200, check: snapAs("", func(sn api.Snapshot) bool {
			return sn.ID == vars["s2"] && sn.Name == "second" && sn.Description == "after the change"
		})},
		{name: "get unknown", method: "GET", path: "/api/v1/snapshots/snap_nope", status: 404, code: api.CodeNotFound},
		as("get another tenant's", "GET", "/api/v1/snapshots/{s2}", ``, 404, api.CodeNotFound, "", nil),
		as("t2 snapshots its sandbox", "POST", "/api/v1/sandboxes/{theirs}/snapshots", ``, 201, "", "", snapAs("sTheirs", func(api.Snapshot) bool { return true })),

		// Restore.
		{name: "running before the restore", method: "GET", path: sbxA, status: 200, check: func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if decodeInto(t, data, &sb); sb.Status != api.StatusRunning {
				t.Errorf("before the restore: %s", data)
			}
		}},
		{name: "restore", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s1}"}`, status: 200, check: sandboxAs("", func(sb api.Sandbox) bool {
			return sb.ID == vars["a"] && sb.Reason == sandbox.ReasonRestored && sb.Environment["STAGE"] == "one" && sb.Metadata["step"] == "1"
		})},
		files("a", "f=v1\n"),
		{name: "sandbox.restored", method: "GET", path: sbxA + "/events?type=sandbox.restored", status: 200, check: func(t *testing.T, data []byte) {
			var p api.EventPage
			if decodeInto(t, data, &p); len(p.Events) != 1 || p.Events[0].Data["snapshotId"] != vars["s1"] || p.Events[0].Data["memory"] != false {
				t.Errorf("sandbox.restored events %s, want one of s1", data)
			}
		}},
		{name: "the restore replaced the level's sandbox", check: func(t *testing.T, _ []byte) {
			if ids := level.Live(); !slices.Contains(ids, vars["a"]+"-r1") || slices.Contains(ids, vars["a"]) {
				t.Errorf("live %q, want %s-r1 in place of %[2]s", ids, vars["a"])
			}
		}},
		{name: "restore again", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s2}"}`, status: 200, check: sandboxAs("", nil)},
		files("a", "f=v2\ng=new\n"),
		{name: "restore, no snapshot", method: "POST", path: sbxA + "/restore", body: `{}`, status: 400, code: api.CodeInvalidArgument, field: "snapshotId", msg: "required"},
		{name: "restore, unknown snapshot", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"snap_nope"}`,
			status: 404, code: api.CodeNotFound, field: "snapshotId"},
		{name: "restore, another tenant's snapshot", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{sTheirs}"}`,
			status: 404, code: api.CodeNotFound, field: "snapshotId"},
		{name: "restore, another shape", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{sRoot}"}`,
			status: 409, code: api.CodeConflict, field: "snapshotId", msg: `user "root"`},
		{name: "restore, unknown sandbox", method: "POST", path: "/api/v1/sandboxes/sbx_nope/restore", body: `{"snapshotId":"{s1}"}`, status: 404, code: api.CodeNotFound},
		{name: "restore, terminated sandbox", method: "POST", path: "/api/v1/sandboxes/{gone}/restore", body: `{"snapshotId":"{s1}"}`,
			status: 409, code: api.CodeConflict, msg: "terminated"},
		terminated("restore, terminated sandbox: its status", "POST", "/api/v1/sandboxes/{gone}/restore", `{"snapshotId":"{s1}"}`),
		as("restore into another tenant's sandbox", "POST", sbxA+"/restore", `{"snapshotId":"{s1}"}`, 404, api.CodeNotFound, "", nil),
		files("a", "f=v2\ng=new\n"),

		// Fork.
		{name: "fork, no body", method: "POST", path: sbxA + "/fork", status: 201, check: func(t *testing.T, data []byte) {
			var f api.Fork
			decodeInto(t, data, &f)
			if len(f.Sandboxes) != 1 || f.Snapshot.SandboxID != vars["a"] || !strings.HasPrefix(f.Snapshot.ID, "snap_") {
				t.Fatalf("fork %s", data)
			}
			sandboxAs("kid", func(sb api.Sandbox) bool {
				return sb.FromSnapshot == f.Snapshot.ID && sb.Name == "" && sb.Environment["STAGE"] == "one" && sb.Resources.MemoryMB == 256
			})(t, mustJSON(t, f.Sandboxes[0]))
			vars["fork1"] = f.Snapshot.ID
		}},
		files("kid", "f=v2\ng=new\n"),
		put("kid", "f", "kid"),
		files("a", "f=v2\ng=new\n"),
		{name: "the fork's snapshot is listed", method: "GET", path: sbxA + "/snapshots", status: 200, check: snaps("fork1", "s3", "s2", "s1")},
		{name: "fork 3", method: "POST", path: sbxA + "/fork", body: `{"count":3,"name":"w"}`, status: 201, check: func(t *testing.T, data []byte) {
			var f api.Fork
			decodeInto(t, data, &f)
			if len(f.Sandboxes) != 3 || f.Snapshot.ID == vars["fork1"] {
				t.Fatalf("fork %s", data)
			}
			vars["fork3"] = f.Snapshot.ID
			for i, sb := range f.Sandboxes {
				sandboxAs(fmt.Sprintf("w%d", i+1), func(sb api.Sandbox) bool {
					return sb.Name == fmt.Sprintf("w-%d", i+1) && sb.FromSnapshot == f.Snapshot.ID
				})(t, mustJSON(t, sb))
			}
		}},
		files("w3", "f=v2\ng=new\n"),
		{name: "fork 65", method: "POST", path: sbxA + "/fork", body: `{"count":65}`, status: 400, code: api.CodeInvalidArgument, field: "count", msg: "64"},
		{name: "fork -1", method: "POST", path: sbxA + "/fork", body: `{"count":-1}`, status: 400, code: api.CodeInvalidArgument, field: "count"},
		{name: "fork, name too long", method: "POST", path: sbxA + "/fork", body: `{"name":"` + long(129) + `"}`, status: 400, code: api.CodeInvalidArgument, field: "name"},
		{name: "fork, unknown sandbox", method: "POST", path: "/api/v1/sandboxes/sbx_nope/fork", status: 404, code: api.CodeNotFound},
		{name: "fork, terminated sandbox", method: "POST", path: "/api/v1/sandboxes/{gone}/fork", status: 409, code: api.CodeConflict, msg: "terminated"},
		as("fork of another tenant's sandbox", "POST", sbxA+"/fork", ``, 404, api.CodeNotFound, "", nil),

		// Create from a snapshot.
		{name: "create from a snapshot", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{s1}","environment":{"EXTRA":"yes"},"metadata":{"step":"2"}}`,
			status: 201, check: sandboxAs("from", func(sb api.Sandbox) bool {
				return sb.FromSnapshot == vars["s1"] && sb.Resources.MemoryMB == 256 && sb.Environment["STAGE"] == "one" &&
					sb.Environment["EXTRA"] == "yes" && sb.Metadata["step"] == "2"
			})},
		files("from", "f=v1\n"),
		{name: "create from a snapshot, the same resources given", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{s1}","resources":{"memoryMb":256},"workdir":"/workspace/"}`,
			status: 201, check: func(t *testing.T, data []byte) {
				var sb api.Sandbox
				if err := json.Unmarshal(data, &sb); err != nil || sb.Spec.Resources.MemoryMB != 256 || sb.Spec.Workdir != "/workspace" {
					t.Errorf("sandbox from a snapshot with its own resources: %s (%v)", data, err)
				}
			}},
		{name: "create from a snapshot, other resources", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{s1}","resources":{"memoryMb":1024}}`,
			status: 400, code: api.CodeInvalidArgument, field: "resources.memoryMb"},
		{name: "create from a snapshot, another user", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{s1}","user":"root"}`,
			status: 400, code: api.CodeInvalidArgument, field: "user"},
		{name: "create from an unknown snapshot", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"snap_nope"}`,
			status: 404, code: api.CodeNotFound, field: "fromSnapshot"},
		{name: "create from another tenant's snapshot", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{sTheirs}"}`,
			status: 404, code: api.CodeNotFound, field: "fromSnapshot"},

		// A snapshot outlives its sandbox.
		{name: "create a short-lived one", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{}`, status: 201, check: sandboxAs("short", nil)},
		{name: "snapshot it", method: "POST", path: "/api/v1/sandboxes/{short}/snapshots", body: `{"name":"last"}`, status: 201,
			check: snapAs("sShort", func(sn api.Snapshot) bool { return sn.Name == "last" })},
		{name: "terminate it", method: "DELETE", path: "/api/v1/sandboxes/{short}", status: 200, check: func(*testing.T, []byte) {}},
		{name: "its snapshots", method: "GET", path: "/api/v1/sandboxes/{short}/snapshots", status: 200, check: snaps("sShort")},
		{name: "the tenant's, after", method: "GET", path: "/api/v1/snapshots", status: 200, check: func(t *testing.T, data []byte) {
			var list []api.Snapshot
			decodeInto(t, data, &list)
			if len(list) != 7 || list[0].ID != vars["sShort"] || !slices.IsSortedFunc(list, func(x, y api.Snapshot) int { return y.CreatedAt.Compare(x.CreatedAt) }) {
				t.Errorf("listed %s, want 7, %s first, newest first", data, vars["sShort"])
			}
		}},
		{name: "a sandbox from it", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{sShort}"}`, status: 201, check: sandboxAs("", nil)},

		// Delete.
		as("delete another tenant's", "DELETE", "/api/v1/snapshots/{s2}", ``, 404, api.CodeNotFound, "", nil),
		{name: "delete", method: "DELETE", path: "/api/v1/snapshots/{s2}", status: 200, check: snapAs("", func(sn api.Snapshot) bool {
			return sn.ID == vars["s2"] && sn.Name == "second"
		})},
		{name: "deleted is gone", method: "GET", path: "/api/v1/snapshots/{s2}", status: 404, code: api.CodeNotFound},
		{name: "and not listed", method: "GET", path: sbxA + "/snapshots", status: 200, check: snaps("fork3", "fork1", "s3", "s1")},
		{name: "delete again", method: "DELETE", path: "/api/v1/snapshots/{s2}", status: 404, code: api.CodeNotFound},
		{name: "restore a deleted one", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s2}"}`, status: 404, code: api.CodeNotFound, field: "snapshotId"},
		{name: "delete unknown", method: "DELETE", path: "/api/v1/snapshots/snap_nope", status: 404, code: api.CodeNotFound},

		// Corruption: a restore and a create are refused and change nothing.
		{name: "corrupt s1's layer", check: func(t *testing.T, _ []byte) {
			p := blobPath(t, "s1")
			var err error
			if blob, err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
			bad := slices.Clone(blob)
			bad[len(bad)/2] ^= 0x40
			if err := os.WriteFile(p, bad, 0o400); err != nil {
				t.Fatal(err)
			}
			live = level.Live()
		}},
		put("a", "marker", "after"),
		{name: "restore a corrupt snapshot", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s1}"}`,
			status: 409, code: api.CodeConflict, msg: "corrupt"},
		files("a", "f=v2\ng=new\nmarker=after\n"),
		{name: "still running", method: "GET", path: sbxA, status: 200, check: func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if decodeInto(t, data, &sb); sb.Status != api.StatusRunning {
				t.Errorf("after a refused restore: %s", data)
			}
		}},
		{name: "create from a corrupt snapshot", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{s1}"}`,
			status: 409, code: api.CodeConflict, msg: "corrupt"},
		{name: "nothing made", check: func(t *testing.T, _ []byte) {
			if now := level.Live(); !slices.Equal(now, live) {
				t.Errorf("live %q after refused restores, was %q", now, live)
			}
		}},
		{name: "no restored event", method: "GET", path: sbxA + "/events?type=sandbox.restored", status: 200, check: func(t *testing.T, data []byte) {
			var p api.EventPage
			if decodeInto(t, data, &p); len(p.Events) != 2 {
				t.Errorf("sandbox.restored events %s, want the two restores that were done", data)
			}
		}},
		{name: "corrupt the end of s1's layer", check: func(t *testing.T, _ []byte) {
			bad := slices.Clone(blob)
			bad[len(bad)-1] ^= 0x01
			if err := os.WriteFile(blobPath(t, "s1"), bad, 0o400); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "restore a snapshot corrupt at its end", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s1}"}`,
			status: 409, code: api.CodeConflict, msg: "corrupt"},
		{name: "append to s1's layer", check: func(t *testing.T, _ []byte) {
			if err := os.WriteFile(blobPath(t, "s1"), append(slices.Clone(blob), "x"...), 0o400); err != nil {
				t.Fatal(err)
			}
		}},
		// The stream holds the whole tar before what was appended: a level that stops reading at
		// the tar's end never learns that the blob's digest is wrong.
		{name: "restore a snapshot with bytes appended", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s1}"}`,
			status: 409, code: api.CodeConflict, msg: "corrupt"},
		{name: "repair s1's layer", check: func(t *testing.T, _ []byte) {
			if err := os.WriteFile(blobPath(t, "s1"), blob, 0o400); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "restore the repaired snapshot", method: "POST", path: sbxA + "/restore", body: `{"snapshotId":"{s1}"}`, status: 200, check: sandboxAs("", nil)},
		files("a", "f=v1\n"),
		{name: "a missing layer", check: func(t *testing.T, _ []byte) {
			if err := os.Remove(blobPath(t, "sShort")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "create from a snapshot whose layer is missing", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"fromSnapshot":"{sShort}"}`,
			status: 409, code: api.CodeConflict, msg: "missing"},
	}, expand)
}

// TestSnapshotQuota forks more sandboxes than the tenant may have: the fork is refused, none of
// the sandboxes it made is left live, and its snapshot stays.
func TestSnapshotQuota(t *testing.T) {
	url, key, _, level, _ := snapshotAPI(t, manager.Config{MaxSandboxesPerTenant: 3})
	var id string
	runSteps(t, url, key, []apiStep{
		{name: "create", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{}`, status: 201, check: func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if err := json.Unmarshal(data, &sb); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			id = sb.ID
		}},
		{name: "fork 2 fits", method: "POST", path: "/api/v1/sandboxes/{id}/fork", body: `{"count":2}`, status: 201, check: func(t *testing.T, data []byte) {
			var f api.Fork
			if err := json.Unmarshal(data, &f); err != nil || len(f.Sandboxes) != 2 {
				t.Errorf("fork %s", data)
			}
			for _, sb := range f.Sandboxes {
				if status, env := call(t, "DELETE", url+"/api/v1/sandboxes/"+sb.ID, key, ""); status != 200 {
					t.Fatalf("terminate %s: %d %+v", sb.ID, status, env.Error)
				}
			}
		}},
		{name: "fork 3 does not", method: "POST", path: "/api/v1/sandboxes/{id}/fork", body: `{"count":3}`, status: 429, code: api.CodeQuotaExceeded, field: "quota.maxSandboxes", msg: "live sandboxes"},
		{name: "none left live", check: func(t *testing.T, _ []byte) {
			if live := level.Live(); !slices.Equal(live, []string{id}) {
				t.Errorf("live %q, want only %s", live, id)
			}
		}},
		{name: "the API agrees", method: "GET", path: "/api/v1/sandboxes?status=ready&status=running&status=provisioning", status: 200, check: func(t *testing.T, data []byte) {
			var sbs []api.Sandbox
			if err := json.Unmarshal(data, &sbs); err != nil || len(sbs) != 1 || sbs[0].ID != id {
				t.Errorf("live sandboxes %s, want only %s", data, id)
			}
		}},
		{name: "the fork's snapshot stays", method: "GET", path: "/api/v1/sandboxes/{id}/snapshots", status: 200, check: func(t *testing.T, data []byte) {
			var list []api.Snapshot
			if err := json.Unmarshal(data, &list); err != nil || len(list) != 2 {
				t.Errorf("snapshots %s, want the two forks'", data)
			}
		}},
		{name: "a create fits again", method: "POST", path: "/api/v1/sandboxes/{id}/fork", body: `{"count":2}`, status: 201, check: func(*testing.T, []byte) {}},
	}, func(v string) string { return strings.ReplaceAll(v, "{id}", id) })
}

// TestSnapshotsUnavailable: without a snapshot store the snapshot routes answer 503, and what
// does not need one still works.
func TestSnapshotsUnavailable(t *testing.T) {
	st, keys := openStore(t, "t1")
	key := keys[0]
	drivers := driver.NewRegistry()
	drivers.Register(drivertest.NewFake())
	log := slog.New(slog.DiscardHandler)
	m := manager.New(manager.Config{DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	srv := httptest.NewServer(New(Config{}, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	var id string
	runSteps(t, srv.URL, key, []apiStep{
		{name: "create", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{}`, status: 201, check: func(t *testing.T, data []byte) {
			var sb api.Sandbox
			if err := json.Unmarshal(data, &sb); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			id = sb.ID
		}},
		{name: "capabilities", method: "GET", path: "/api/v1/capabilities", status: 200, check: func(t *testing.T, data []byte) {
			var c api.Capabilities
			if err := json.Unmarshal(data, &c); err != nil || c.Features["snapshots"] {
				t.Errorf("capabilities %s: snapshots without a snapshot store", data)
			}
		}},
		{name: "snapshot", method: "POST", path: "/api/v1/sandboxes/{id}/snapshots", status: 503, code: api.CodeUnavailable, msg: "no snapshot store"},
		{name: "fork", method: "POST", path: "/api/v1/sandboxes/{id}/fork", status: 503, code: api.CodeUnavailable, msg: "no snapshot store"},
		{name: "list", method: "GET", path: "/api/v1/snapshots", status: 200, check: func(t *testing.T, data []byte) {
			if string(data) != "[]" {
				t.Errorf("listed %s", data)
			}
		}},
	}, func(v string) string { return strings.ReplaceAll(v, "{id}", id) })
}

// TestSnapshotAPIClient goes through the Go client: its paths reach the snapshot routes, and its
// errors are the sentinels.
func TestSnapshotAPIClient(t *testing.T) {
	url, key, level := poolAPI(t)
	c, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	files := func(id string) string {
		t.Helper()
		r, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Shell("files")})
		if err != nil {
			t.Fatalf("exec in %s: %v", id, err)
		}
		return r.Stdout
	}
	put := func(id, file, text string) {
		t.Helper()
		if _, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Shell("put " + file + " " + text)}); err != nil {
			t.Fatalf("exec in %s: %v", id, err)
		}
	}
	a, err := c.Create(ctx, api.Spec{Resources: api.Resources{MemoryMB: 256}})
	if err != nil {
		t.Fatal(err)
	}
	put(a.ID, "f", "v1")
	s1, err := c.Snapshot(ctx, a.ID, api.SnapshotRequest{})
	if err != nil || s1.Name != s1.ID || s1.SandboxID != a.ID {
		t.Fatalf("Snapshot = %+v, %v", s1, err)
	}
	put(a.ID, "f", "v2")
	s2, err := c.Snapshot(ctx, a.ID, api.SnapshotRequest{Name: "second", Description: "d"})
	if err != nil || s2.Name != "second" || s2.Description != "d" {
		t.Fatalf("Snapshot = %+v, %v", s2, err)
	}
	if list, err := c.Snapshots(ctx, a.ID); err != nil || len(list) != 2 || list[0].ID != s2.ID || list[1].ID != s1.ID {
		t.Errorf("Snapshots(a) = %+v, %v", list, err)
	}
	if got, err := c.GetSnapshot(ctx, s1.ID); err != nil || got.ID != s1.ID || got.Digest != s1.Digest {
		t.Errorf("GetSnapshot = %+v, %v", got, err)
	}
	if sb, err := c.Restore(ctx, a.ID, s1.ID); err != nil || sb.ID != a.ID || sb.Status != api.StatusReady || sb.State != api.StatusReady ||
		sb.RestoredFrom != s1.ID || time.Since(sb.RestoredAt) > time.Minute {
		t.Errorf("Restore = %+v, %v", sb, err)
	}
	if got := files(a.ID); got != "f=v1\n" {
		t.Errorf("after Restore: %q", got)
	}
	f, err := c.Fork(ctx, a.ID, api.ForkRequest{Count: 2, Name: "w"})
	if err != nil || len(f.Sandboxes) != 2 || f.Sandboxes[1].Name != "w-2" || f.Sandboxes[1].FromSnapshot != f.Snapshot.ID {
		t.Fatalf("Fork = %+v, %v", f, err)
	}
	if got := files(f.Sandboxes[0].ID); got != "f=v1\n" {
		t.Errorf("a fork's files: %q", got)
	}
	if f, err := c.Fork(ctx, a.ID, api.ForkRequest{}); err != nil || len(f.Sandboxes) != 1 {
		t.Errorf("Fork of the zero request = %+v, %v", f, err)
	}
	from, err := c.Create(ctx, api.Spec{FromSnapshot: s2.ID})
	if err != nil || from.FromSnapshot != s2.ID {
		t.Fatalf("Create from a snapshot = %+v, %v", from, err)
	}
	if got := files(from.ID); got != "f=v2\n" {
		t.Errorf("a sandbox from a snapshot: %q", got)
	}
	root, err := c.Create(ctx, api.Spec{User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	sRoot, err := c.Snapshot(ctx, root.ID, api.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Terminate(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	if all, err := c.Snapshots(ctx, ""); err != nil || len(all) != 5 || all[0].ID != sRoot.ID {
		t.Errorf("Snapshots() = %+v, %v", all, err)
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		want  error
		field string
	}{
		{"snapshot a name too long", func() error {
			_, err := c.Snapshot(ctx, a.ID, api.SnapshotRequest{Name: strings.Repeat("n", 129)})
			return err
		}, client.ErrInvalidArgument, "name"},
		{"snapshot an unknown sandbox", func() error { _, err := c.Snapshot(ctx, "sbx_nope", api.SnapshotRequest{}); return err }, client.ErrNotFound, ""},
		{"snapshot a terminated sandbox", func() error { _, err := c.Snapshot(ctx, root.ID, api.SnapshotRequest{}); return err }, client.ErrConflict, ""},
		{"snapshots of an unknown sandbox", func() error { _, err := c.Snapshots(ctx, "sbx_nope"); return err }, client.ErrNotFound, ""},
		{"get unknown", func() error { _, err := c.GetSnapshot(ctx, "snap_nope"); return err }, client.ErrNotFound, ""},
		{"get with a slash", func() error { _, err := c.GetSnapshot(ctx, "snap/x"); return err }, client.ErrNotFound, ""},
		{"restore without a snapshot", func() error { _, err := c.Restore(ctx, a.ID, ""); return err }, client.ErrInvalidArgument, "snapshotId"},
		{"restore an unknown snapshot", func() error { _, err := c.Restore(ctx, a.ID, "snap_nope"); return err }, client.ErrNotFound, "snapshotId"},
		{"restore another shape", func() error { _, err := c.Restore(ctx, a.ID, sRoot.ID); return err }, client.ErrConflict, "snapshotId"},
		{"restore a terminated sandbox", func() error { _, err := c.Restore(ctx, root.ID, sRoot.ID); return err }, client.ErrConflict, ""},
		{"fork 65", func() error { _, err := c.Fork(ctx, a.ID, api.ForkRequest{Count: 65}); return err }, client.ErrInvalidArgument, "count"},
		{"fork an unknown sandbox", func() error { _, err := c.Fork(ctx, "sbx_nope", api.ForkRequest{}); return err }, client.ErrNotFound, ""},
		{"create from an unknown snapshot", func() error { _, err := c.Create(ctx, api.Spec{FromSnapshot: "snap_nope"}); return err }, client.ErrNotFound, "fromSnapshot"},
		{"create from a snapshot, other resources", func() error {
			_, err := c.Create(ctx, api.Spec{FromSnapshot: s1.ID, Resources: api.Resources{MemoryMB: 1024}})
			return err
		}, client.ErrInvalidArgument, "resources.memoryMb"},
	} {
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else if ce, _ := errors.AsType[*client.Error](err); ce.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, ce.Field, tc.field)
		}
	}
	if ce, _ := errors.AsType[*client.Error](func() error { _, err := c.Snapshot(ctx, root.ID, api.SnapshotRequest{}); return err }()); ce == nil || ce.Status != api.StatusTerminated {
		t.Errorf("snapshot of a terminated sandbox: %+v, want its status", ce)
	}
	live := len(level.Live())
	if d, err := c.DeleteSnapshot(ctx, s2.ID); err != nil || d.ID != s2.ID || d.Name != "second" {
		t.Errorf("DeleteSnapshot = %+v, %v", d, err)
	}
	if _, err := c.DeleteSnapshot(ctx, s2.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("DeleteSnapshot twice: %v", err)
	}
	if _, err := c.GetSnapshot(ctx, s2.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetSnapshot of a deleted one: %v", err)
	}
	if n := len(level.Live()); n != live {
		t.Errorf("%d live sandboxes after a delete, had %d: a snapshot's sandboxes do not depend on it", n, live)
	}
	if got := files(from.ID); got != "f=v2\n" {
		t.Errorf("a sandbox from a deleted snapshot: %q", got)
	}
}

// mustJSON is v encoded, for checks that take an answer's data.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
