package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/compat"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

func TestErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
		field  string
	}{
		{errdefs.Invalid("resources.cpu", "too many"), 400, api.CodeInvalidArgument, "resources.cpu"},
		{fmt.Errorf("x: %w", errdefs.ErrNotFound), 404, api.CodeNotFound, ""},
		{&sandbox.StateError{ID: "sbx_1", Status: api.StatusPaused, Op: "exec"}, 409, api.CodeConflict, ""},
		{&errdefs.FieldError{Field: "isolation", Message: "no", Kind: errdefs.ErrUnavailable}, 422, api.CodeIsolationUnavailable, "isolation"},
		{&errdefs.FieldError{Field: "spec.isolation", Message: "no", Kind: errdefs.ErrUnavailable}, 422, api.CodeIsolationUnavailable, "spec.isolation"},
		{errdefs.Unavailable("network.egressPolicy", "later"), 422, api.CodeUnavailable, "network.egressPolicy"},
		{errdefs.New(errdefs.ErrServiceUnavailable, "no image store"), 503, api.CodeUnavailable, ""},
		{fmt.Errorf("q: %w", errdefs.ErrQuota), 429, api.CodeQuotaExceeded, ""},
		{fmt.Errorf("k: %w", errdefs.ErrUnauthenticated), 401, api.CodeUnauthorized, ""},
		{fmt.Errorf("p: %w", errdefs.ErrPermissionDenied), 403, api.CodeForbidden, ""},
		{fmt.Errorf("big: %w", errdefs.ErrTooLarge), 413, api.CodePayloadTooLarge, ""},
		{&http.MaxBytesError{Limit: 5}, 413, api.CodePayloadTooLarge, ""},
		{fmt.Errorf("full: %w", errdefs.ErrNoSpace), 507, api.CodeInsufficientStorage, ""},
		{fmt.Errorf("record exec: %w", errdefs.ErrStoreFull), 507, api.CodeInsufficientStorage, ""},
		{fmt.Errorf("setup: %w", errdefs.ErrSetup), 500, api.CodeInternal, ""},
		{errors.New("boom"), 500, api.CodeInternal, ""},
	} {
		status, e := errorStatus(c.err)
		if status != c.status || e.Code != c.code || e.Field != c.field || e.Message == "" {
			t.Errorf("%v: %d %+v, want %d %s %q", c.err, status, e, c.status, c.code, c.field)
		}
	}
	if _, e := errorStatus(&sandbox.StateError{ID: "sbx_1", Status: api.StatusTerminated, Op: "exec"}); e.Status != api.StatusTerminated {
		t.Errorf("conflict does not name the status: %+v", e)
	}
}

func TestDecodeNamesTheField(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"resources":{"cpu":"x"}}`, "resources.cpu"},
		{`{"resources":{"bogus":1}}`, "resources.bogus"},
		{`{"resources":{"memoryMB":1}}`, "resources.memoryMB"},
		{`{"Name":"x"}`, "Name"},
		{`{"metadata":{"a":1}}`, "metadata"},
		{`{"name":5}`, "name"},
		{`[1]`, "body"},
		{`{"name":"a"`, "body"},
		{`{"name":"a"}x`, "body"},
		{`   `, "body"},
	} {
		var spec api.Spec
		err := decodeJSON([]byte(c.body), &spec)
		fe, ok := errors.AsType[*errdefs.FieldError](err)
		if !ok || fe.Field != c.field {
			t.Errorf("%s: %v, want field %q", c.body, err, c.field)
		}
	}
	var req api.ExecRequest
	if err := decodeJSON([]byte(`{"command":{"a":1}}`), &req); err == nil || !strings.Contains(err.Error(), "command") {
		t.Errorf("bad command: %v", err)
	}
	if err := decodeJSON([]byte(`{"command":"echo hi"}`), &req); err != nil || strings.Join(req.Command, " ") != "/bin/sh -c echo hi" {
		t.Errorf("string command: %v %q", err, req.Command)
	}
}

// FuzzDecode feeds arbitrary bodies to the strict decoder and the spec validation: they must never
// panic, and every refusal must be a field error (the API names what is wrong).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"resources":{"cpu":0.5,"memoryMb":512}}`, `{"isolation":"process","network":{"allowedDomains":["*.x.com"]}}`,
		`{"filesystem":{"readOnly":["/workspace/data"],"blocked":["/etc/shadow"]},"volumes":[{"name":"v","path":"/v"}]}`, `{"command":["ls","-l"],"timeout":3}`,
		`{"command":"echo hi","env":{"A":"b"},"stdin":"x"}`, `{"agent_id":"a","mode":"wasm","config":{"resources":{"memory":"512m"}}}`,
		`{"resources":{"cpu":1e400}}`, `{"timeout":{"maxDurationSeconds":-1}}`, `{"environment":{"A=B":"c"}}`, "\x00", `{"a":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec api.Spec
		if err := decodeJSON(body, &spec); err != nil {
			mustFieldError(t, err)
		} else {
			sandbox.SetDefaults(&spec)
			if err := sandbox.Validate(&spec); err != nil {
				mustFieldError(t, err)
			}
		}
		var req api.ExecRequest
		if err := decodeJSON(body, &req); err != nil {
			mustFieldError(t, err)
		}
		var creq api.CompatCreateRequest
		if err := decodeJSON(body, &creq); err == nil {
			if _, err := compat.Spec(creq); err != nil {
				mustFieldError(t, err)
			}
		} else {
			mustFieldError(t, err)
		}
	})
}

func mustFieldError(t *testing.T, err error) {
	t.Helper()
	fe, ok := errors.AsType[*errdefs.FieldError](err)
	if !ok || fe.Field == "" || fe.Message == "" {
		t.Fatalf("refusal without a field: %v", err)
	}
	if status, _ := errorStatus(err); status != 400 && status != 422 {
		t.Fatalf("refusal maps to %d: %v", status, err)
	}
}

// TestOpenAPI checks the served document: OpenAPI 3.1, every route of the server in it with its
// method, every path of it routed by the server's mux to that very route, and every $ref defined.
func TestOpenAPI(t *testing.T) {
	s := New(Config{Version: "test"}, nil, nil, nil, Images{}, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	if rec.Code != 200 {
		t.Fatalf("openapi.json: %d %s", rec.Code, rec.Body)
	}
	raw := rec.Body.String()
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("document: %v %q", err, doc.OpenAPI)
	}
	n := 0
	for _, rt := range routes() {
		op, ok := doc.Paths[docPath(rt.path)][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("route %s %s is not in the document", rt.method, rt.path)
			continue
		}
		if op["summary"] == "" || op["responses"] == nil {
			t.Errorf("route %s %s: undocumented", rt.method, rt.path)
		}
		n++
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			concrete := strings.NewReplacer("{id}", "sbx_x", "{execId}", "exec_x", "{runId}", "exec_y", "{ref}", "ghcr.io/org/app:v1", "{name}", "warm").Replace(path)
			_, pattern := s.mux.Handler(httptest.NewRequest(strings.ToUpper(method), concrete, nil))
			if docPath(pattern) != strings.ToUpper(method)+" "+path {
				t.Errorf("documented %s %s is served by %q", method, path, pattern)
			}
		}
	}
	if n < 25 {
		t.Errorf("only %d routes", n)
	}
	for _, m := range regexpRef.FindAllStringSubmatch(raw, -1) {
		if _, ok := doc.Components.Schemas[m[1]]; !ok {
			t.Errorf("$ref to undefined schema %s", m[1])
		}
	}
	for _, name := range []string{"Spec", "Sandbox", "ExecResult", "ExecRequest", "FileInfo", "Error", "Image", "PullRequest", "ImageRemoval", "Pool", "PoolStatus"} {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schema %s missing", name)
		}
	}
}

var regexpRef = regexp.MustCompile(`"#/components/schemas/(\w+)"`)

// apiStep is one request of a scripted API test: the status it must get and, for a failure, the
// error's code, field and a substring of its message, or for a success a check of its data. A
// step without a method only runs its check.
type apiStep struct {
	name, method, path, body string
	noKey                    bool
	status                   int
	code, field, msg         string
	check                    func(t *testing.T, data []byte)
}

// runSteps runs steps in order against the API at url with key. expand rewrites each step's path
// and body just before it runs, so that a step can use what an earlier one learned.
func runSteps(t *testing.T, url, key string, steps []apiStep, expand func(string) string) {
	t.Helper()
	for _, s := range steps {
		if s.method == "" {
			s.check(t, nil)
			continue
		}
		k := key
		if s.noKey {
			k = ""
		}
		path := expand(s.path)
		status, env := call(t, s.method, url+path, k, expand(s.body))
		if status != s.status {
			t.Fatalf("%s: %s %s: %d %+v %s, want %d", s.name, s.method, path, status, env.Error, env.Data, s.status)
		}
		if s.status >= 300 {
			if e := env.Error; env.OK || e == nil || e.Code != s.code || e.Field != s.field || !strings.Contains(e.Message, s.msg) {
				t.Errorf("%s: error %+v, want %s %q %q", s.name, e, s.code, s.field, s.msg)
			}
			continue
		}
		if !env.OK {
			t.Fatalf("%s: ok false", s.name)
		}
		s.check(t, env.Data)
	}
}

// TestDecodeRefusesDuplicateKeys: an object that repeats a key is a 400 naming the key's path, at
// any depth — inside objects, arrays, maps and values the types do not describe — since
// encoding/json would silently keep the last one.
func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	for _, c := range []struct {
		body  string
		into  any
		field string
	}{
		{`{"name":"a","name":"b"}`, &api.Spec{}, "name"},
		{`{"name":"a","name":"a"}`, &api.Spec{}, "name"},
		{`{"resources":{"cpu":1,"memoryMb":512,"cpu":2}}`, &api.Spec{}, "resources.cpu"},
		{`{"environment":{"A":"1","A":"2"}}`, &api.Spec{}, "environment.A"},
		{`{"metadata":{"":"1","":"2"}}`, &api.Spec{}, "metadata"},
		{`{"network":{"credentials":[{"host":"a"},{"host":"b","header":"X","host":"c"}]}}`, &api.Spec{}, "network.credentials[1].host"},
		{`{"network":{"credentials":[{"x":1}],"credentials":[]}}`, &api.Spec{}, "network.credentials"},
		{`{"unknown":{"a":[{"b":1,"b":2}]}}`, &api.Spec{}, "unknown.a[0].b"},
		{`{"command":["ls"],"env":{"PATH":"/bin","PATH":"/usr/bin"}}`, &api.ExecRequest{}, "env.PATH"},
		{`{"command":"ls","stdin":"a","stdin":"b"}`, &api.ExecRequest{}, "stdin"},
		{`{"type":"start","start":{"command":["sh"],"tty":true,"tty":false}}`, &api.Frame{}, "start.tty"},
		{`{"egressPolicy":"none","egressPolicy":"open"}`, &api.Network{}, "egressPolicy"},
		{`{"agent_id":"a","config":{"resources":{"memory":"1g","memory":"2g"}}}`, &api.CompatCreateRequest{}, "config.resources.memory"},
		{`{"code":"print(1)","code":"import os"}`, &api.CompatRunRequest{}, "code"},
		{`{"url":"http://x","url":"http://y"}`, &api.WebhookRequest{}, "url"},
		{`{"snapshotId":"snap_1","snapshotId":"snap_2"}`, &api.RestoreRequest{}, "snapshotId"},
	} {
		err := decodeJSON([]byte(c.body), c.into)
		fe, ok := errors.AsType[*errdefs.FieldError](err)
		if !ok || fe.Field != c.field || !strings.Contains(fe.Message, "duplicate") {
			t.Errorf("%s: %v, want a duplicate at %q", c.body, err, c.field)
			continue
		}
		if status, _ := errorStatus(err); status != 400 {
			t.Errorf("%s: status %d", c.body, status)
		}
	}
	// The same keys in different objects are no duplicates.
	var spec api.Spec
	if err := decodeJSON([]byte(`{"name":"a","network":{"credentials":[{"host":"a"},{"host":"b"}]},"environment":{"name":"x"}}`), &spec); err != nil {
		t.Errorf("distinct objects: %v", err)
	}
	// Too deep to walk is the decoder's error, still a 400.
	deep := strings.Repeat(`{"a":`, maxDepth+5) + "1" + strings.Repeat("}", maxDepth+5)
	if err := decodeJSON([]byte(`{"metadata":`+deep+`}`), &spec); err == nil {
		t.Error("a document deeper than encoding/json allows was accepted")
	} else {
		mustFieldError(t, err)
	}
}

// TestEveryJSONRouteRefusesDuplicateKeys sends a body that repeats a key to every route of the
// table that takes a JSON body: each answers 400 naming the key.
func TestEveryJSONRouteRefusesDuplicateKeys(t *testing.T) {
	url, key, _ := poolAPI(t)
	status, env := call(t, "POST", url+"/api/v1/sandboxes?wait=true", key, `{}`)
	if status != 201 {
		t.Fatalf("create: %d %+v", status, env.Error)
	}
	var sb api.Sandbox
	if err := json.Unmarshal(env.Data, &sb); err != nil {
		t.Fatal(err)
	}
	path := strings.NewReplacer("{id}", sb.ID, "{name}", "p1")
	tried := 0
	for _, r := range routes() {
		if r.doc.body == nil {
			continue
		}
		tried++
		status, env := call(t, r.method, url+path.Replace(r.path), key, `{"zz":1, "zz":2}`)
		if e := env.Error; status != 400 || e == nil || e.Field != "zz" || !strings.Contains(e.Message, "duplicate") {
			t.Errorf("%s %s: %d %+v, want 400 naming zz", r.method, r.path, status, e)
		}
	}
	if tried < 10 {
		t.Errorf("only %d routes take a JSON body", tried)
	}
}
