package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenancy"
)

// containerFake is the fake level of pools_test.go under the container level's name: the seeds'
// requests name that level.
type containerFake struct{ *drivertest.Fake }

func (containerFake) Name() string { return sandbox.LevelContainer }

func (c containerFake) Capabilities() driver.Capabilities {
	caps := c.Fake.Capabilities()
	caps.Level = sandbox.LevelContainer
	return caps
}

// seedAPI serves the API over a real manager and store with the fake level as "container" and
// the given configuration; it returns the URL and a key of tenant t1, whose quota is the free
// plan's (3 sandboxes), and who may use the images of docker.io/agentcop.
func seedAPI(t *testing.T, cfg Config, mcfg manager.Config) (url, key string) {
	t.Helper()
	st, keys := openStore(t, "t1")
	drivers := driver.NewRegistry()
	drivers.Register(containerFake{drivertest.NewFake()})
	log := slog.New(slog.DiscardHandler)
	mcfg.SnapshotDir = filepath.Join(t.TempDir(), "snapshots")
	mcfg.Grants = &tenancy.Grants{Images: tenancy.Images{Allowed: []string{"docker.io/agentcop/*"}},
		Quotas: map[string]api.Quota{"t1": {Plan: "free", MaxSandboxes: 3}}}
	m := manager.New(mcfg, drivers, st, log)
	t.Cleanup(m.Close)
	srv := httptest.NewServer(New(cfg, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	return srv.URL, keys[0]
}

// rawCall makes one request, with key unless it is "", and returns the status and the body as
// it came.
func rawCall(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// object decodes a JSON object, failing t otherwise.
func object(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("not a JSON object: %q: %v", b, err)
	}
	return o
}

// TestSeed000Shapes: seed 000's create as written (cpu a string, gpuEnabled false) is created
// and answered with cpu as a string and absolute endpoints; gpuEnabled true is a 422 saying why,
// and the capabilities say gpu false with the reason; restore answers seed 000's shape.
func TestSeed000Shapes(t *testing.T) {
	url, key := seedAPI(t, Config{}, manager.Config{})
	status, env := call(t, "POST", url+"/api/v1/sandboxes", key, `{"name": "content-scanner-test", "isolation": "container", "agentId": "019agent-scanner-...",
		"resources": {"cpu": "2.0", "memoryMb": 4096, "diskMb": 10240, "gpuEnabled": false},
		"network": {"egressPolicy": "restricted", "allowedDomains": ["api.openai.com", "*.drd.io"], "blockLocalNetwork": true},
		"timeout": {"maxDurationSeconds": 3600, "idleTimeoutSeconds": 300}, "environment": {"DRD_ENV": "sandbox"}}`)
	// As the seed shows: 202, provisioning; the operations below wait for it to be ready.
	if status != http.StatusAccepted {
		t.Fatalf("create: %d %+v", status, env.Error)
	}
	sb := object(t, env.Data)
	if sb["status"] != api.StatusProvisioning {
		t.Errorf("create: status %v, want provisioning", sb["status"])
	}
	res := sb["resources"].(map[string]any)
	if sb["name"] != "content-scanner-test" || sb["agentId"] != "019agent-scanner-..." || sb["isolation"] != "container" ||
		res["cpu"] != "2.0" || res["memoryMb"] != 4096.0 || res["diskMb"] != 10240.0 || res["gpuEnabled"] != nil {
		t.Errorf("created: %s", env.Data)
	}
	id := sb["id"].(string)
	host := strings.TrimPrefix(url, "http://")
	want := map[string]any{"exec": "ws://" + host + "/api/v1/sandboxes/" + id + "/exec", "logs": "ws://" + host + "/api/v1/sandboxes/" + id + "/logs",
		"metrics": "http://" + host + "/api/v1/sandboxes/" + id + "/metrics", "files": "http://" + host + "/api/v1/sandboxes/" + id + "/files"}
	if got := sb["endpoints"].(map[string]any); !maps.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
	// A number is taken too, and answered as the string.
	if status, env := call(t, "POST", url+"/api/v1/sandboxes?wait=true", key, `{"isolation": "container", "resources": {"cpu": 0.5}}`); status != 201 ||
		!strings.Contains(string(env.Data), `"cpu":"0.5"`) {
		t.Errorf("cpu as a number: %d %s %+v", status, env.Data, env.Error)
	}

	runSteps(t, url, key, []apiStep{
		{name: "gpu", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"isolation":"container","resources":{"gpuEnabled":true}}`,
			status: 422, code: api.CodeGPUUnavailable, field: "resources.gpuEnabled", msg: "passes a GPU"},
		{name: "cpu not a number", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"isolation":"container","resources":{"cpu":"two"}}`,
			status: 400, code: api.CodeInvalidArgument, field: "resources.cpu", msg: `"2.0"`},
		{name: "capabilities", method: "GET", path: "/api/v1/capabilities", status: 200, check: func(t *testing.T, data []byte) {
			var c api.Capabilities
			if err := json.Unmarshal(data, &c); err != nil || c.DefaultIsolation != "container" {
				t.Errorf("capabilities %s: %v", data, err)
			}
			if gpu, ok := c.Features["gpu"]; !ok || gpu || c.Reasons["gpu"] != sandbox.GPUUnavailableReason {
				t.Errorf("capabilities' gpu: %s", data)
			}
		}},
		{name: "snapshot", method: "POST", path: "/api/v1/sandboxes/" + id + "/snapshots", body: `{"name": "pre-adversarial-test", "description": "Baseline"}`,
			status: 201, check: func(t *testing.T, data []byte) {
				o := object(t, data)
				for _, k := range []string{"snapshotId", "sandboxId", "name", "sizeMb", "createdAt"} {
					if _, ok := o[k]; !ok {
						t.Errorf("snapshot without %s: %s", k, data)
					}
				}
				status, env := call(t, "POST", url+"/api/v1/sandboxes/"+id+"/restore", key, `{"snapshotId": "`+o["snapshotId"].(string)+`"}`)
				r := object(t, env.Data)
				at, err := time.Parse(time.RFC3339Nano, r["restoredAt"].(string))
				if status != 200 || r["id"] != id || r["state"] != "ready" || r["restoredFrom"] != o["snapshotId"] || err != nil || time.Since(at) > time.Minute {
					t.Errorf("restore: %d %s", status, env.Data)
				}
			}},
	}, func(s string) string { return s })
}

// TestEndpointsPublicURL: with publicUrl the endpoints start with it (wss for https), whatever
// host the request named.
func TestEndpointsPublicURL(t *testing.T) {
	url, key := seedAPI(t, Config{PublicURL: "https://airlock.example.com/edge/"}, manager.Config{DefaultIsolation: sandbox.LevelContainer})
	status, env := call(t, "POST", url+"/api/v1/sandboxes?wait=true", key, `{}`)
	var sb api.Sandbox
	if status != 201 || json.Unmarshal(env.Data, &sb) != nil {
		t.Fatalf("create: %d %+v", status, env.Error)
	}
	base := "airlock.example.com/edge/api/v1/sandboxes/" + sb.ID
	if e := sb.Endpoints; e.Exec != "wss://"+base+"/exec" || e.Logs != "wss://"+base+"/logs" || e.Metrics != "https://"+base+"/metrics" || e.Files != "https://"+base+"/files" {
		t.Errorf("endpoints %+v", e)
	}
	_, env = call(t, "GET", url+"/api/v1/sandboxes", key, "")
	var list []api.Sandbox
	if json.Unmarshal(env.Data, &list) != nil || len(list) != 1 || list[0].Endpoints != sb.Endpoints {
		t.Errorf("listed %s", env.Data)
	}
}

// TestDefaultIsolationUnavailable: a create without isolation whose default level this host lacks
// is a 422 naming the fix, never another level.
func TestDefaultIsolationUnavailable(t *testing.T) {
	url, key := seedAPI(t, Config{}, manager.Config{DefaultIsolation: sandbox.LevelMicroVM})
	runSteps(t, url, key, []apiStep{
		{name: "default", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{}`, status: 422, code: api.CodeIsolationUnavailable, field: "isolation", msg: "defaults.isolation"},
		{name: "compat default", method: "POST", path: "/api/v1/sandboxes?wait=true", body: `{"isolation":"microvm"}`, status: 422, code: api.CodeIsolationUnavailable, field: "isolation"},
	}, func(s string) string { return s })
	status, b := rawCall(t, "POST", url+"/api/sandbox/create", key, `{}`)
	if e := object(t, b)["error"].(map[string]any); status != 422 || e["field"] != "mode" || !strings.Contains(e["message"].(string), "defaults.isolation") {
		t.Errorf("compat create with an unavailable default: %d %s", status, b)
	}
}

// TestSeed002Surface: seed 002's create as written answers the bare object it shows; delete is a
// 204 after which GET shows destroyed; errors are {"error": {...}} naming this surface's
// fields; the run timeout's and the sandbox timeout's caps; the free plan's 4th sandbox is a 429.
func TestSeed002Surface(t *testing.T) {
	url, key := seedAPI(t, Config{}, manager.Config{})
	status, b := rawCall(t, "POST", url+"/api/sandbox/create", key, `{
"agent_id": "data-processor",
"mode": "container",
"config": {
"image": "agentcop/agent-sandbox:latest",
"filesystem": {"read_only": ["/workspace/data"], "read_write": ["/workspace/output"], "blocked": ["/etc", "/root"]},
"network": {"allow": ["api.company.com"], "block_outbound": true},
"resources": {"cpu": "0.5", "memory": "512m", "timeout": 30}
}
}`)
	created := object(t, b)
	if status != http.StatusCreated || !slices.Equal(slices.Sorted(maps.Keys(created)), []string{"created_at", "expires_at", "mode", "sandbox_id", "status"}) ||
		created["status"] != "ready" || created["mode"] != "container" || !strings.HasPrefix(created["sandbox_id"].(string), "sbx_") {
		t.Fatalf("create: %d %s", status, b)
	}
	c, err1 := time.Parse(time.RFC3339, created["created_at"].(string))
	e, err2 := time.Parse(time.RFC3339, created["expires_at"].(string))
	if err1 != nil || err2 != nil || e.Sub(c) != 30*time.Second || !strings.HasSuffix(created["created_at"].(string), "Z") {
		t.Errorf("times: %s", b)
	}
	id := created["sandbox_id"].(string)

	bare := func(name, method, path, body string, wantStatus int, field, msg string) {
		t.Helper()
		status, b := rawCall(t, method, url+path, key, body)
		o := object(t, b)
		e, _ := o["error"].(map[string]any)
		if status != wantStatus || len(o) != 1 || e == nil || e["field"] != field && field != "" || !strings.Contains(e["message"].(string), msg) {
			t.Errorf("%s: %d %s, want %d naming %q", name, status, b, wantStatus, field)
		}
	}
	bare("host path", "POST", "/api/sandbox/create", `{"config":{"filesystem":{"read_only":["/etc:/x"]}}}`, 400, "config.filesystem.read_only[0]", "inside the sandbox")
	bare("sandbox timeout over 3600", "POST", "/api/sandbox/create", `{"config":{"resources":{"timeout":3601}}}`, 400, "config.resources.timeout", "3600")
	bare("unknown mode", "POST", "/api/sandbox/create", `{"mode":"vm"}`, 400, "mode", "container or wasm")
	bare("unapproved image", "POST", "/api/sandbox/create", `{"config":{"image":"evil/miner:1"}}`, 403, "config.image", "not approved")
	bare("cpu over the max", "POST", "/api/sandbox/create", `{"config":{"resources":{"cpu":"9.0"}}}`, 400, "config.resources.cpu", "8")
	bare("run timeout over 600", "POST", "/api/sandbox/"+id+"/run", `{"code":"print(1)","timeout":601}`, 400, "timeout", "600")
	bare("run without code", "POST", "/api/sandbox/"+id+"/run", `{}`, 400, "code", "required")
	bare("unknown sandbox", "GET", "/api/sandbox/sbx_nope", "", 404, "", "sbx_nope")
	bare("unknown route", "GET", "/api/sandbox/"+id+"/nope", "", 404, "", "no route")
	if status, b := rawCall(t, "GET", url+"/api/sandbox/"+id, "alk_wrong", ""); status != 401 || !strings.HasPrefix(string(b), `{"error":{"code":"unauthorized"`) {
		t.Errorf("wrong key: %d %s", status, b)
	}

	// The free plan: 3 concurrent sandboxes, the 4th a 429.
	for range 2 {
		if status, b := rawCall(t, "POST", url+"/api/sandbox/create", key, `{}`); status != 201 {
			t.Fatalf("create: %d %s", status, b)
		}
	}
	bare("4th on the free plan", "POST", "/api/sandbox/create", `{}`, 429, "quota.maxSandboxes", `plan "free"`)

	if status, b := rawCall(t, "DELETE", url+"/api/sandbox/"+id, key, ""); status != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("delete: %d %q", status, b)
	}
	status, b = rawCall(t, "GET", url+"/api/sandbox/"+id, key, "")
	if got := object(t, b); status != 200 || got["status"] != "destroyed" || got["sandbox_id"] != id || got["reason"] != sandbox.ReasonTerminated {
		t.Errorf("after delete: %d %s", status, b)
	}
	if status, _ := rawCall(t, "DELETE", url+"/api/sandbox/"+id, key, ""); status != http.StatusNoContent {
		t.Errorf("second delete: %d", status)
	}
}
