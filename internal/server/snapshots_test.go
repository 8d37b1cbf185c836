package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
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
		{"post", "/api/v1/sandboxes/{id}/restore", "200", "Sandbox", true},
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
