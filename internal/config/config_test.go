package config

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
)

func TestLoad(t *testing.T) {
	for _, c := range []struct {
		name, file, errHas string
	}{
		{"empty object keeps defaults", `{}`, ""},
		{"unknown field", `{"dataDirr":"/x"}`, "unknown field"},
		{"future version", `{"version":2}`, "version 2"},
		{"relative data dir", `{"dataDir":"data"}`, "absolute"},
		{"not json", `dataDir: /x`, "invalid character"},
		{"network listen without TLS", `{"listen":"0.0.0.0:7070"}`, "--insecure"},
		{"network listen with TLS", `{"listen":"0.0.0.0:7070","tls":{"cert":"/c.pem","key":"/k.pem"}}`, ""},
		{"network listen, insecure", `{"listen":"10.0.0.5:7070","insecure":true}`, ""},
		{"IPv6 loopback", `{"listen":"[::1]:7070"}`, ""},
		{"localhost", `{"listen":"localhost:7070"}`, ""},
		{"cert without key", `{"tls":{"cert":"/c.pem"}}`, "go together"},
		{"listen without port", `{"listen":"127.0.0.1"}`, "HOST:PORT"},
		{"bad sync mode", `{"database":{"sync":"sometimes"}}`, "database.sync"},
		{"zero quota", `{"limits":{"maxSandboxesPerTenant":-1}}`, "maxSandboxesPerTenant"},
		{"volume not a directory", `{"volumes":{"v":{"hostPath":"/nonexistent/dir","tenants":["*"]}}}`, "volumes[v]"},
		{"volume without tenants", `{"volumes":{"v":{"hostPath":"/tmp"}}}`, "tenants"},
		{"volume relative", `{"volumes":{"v":{"hostPath":"tmp","tenants":["*"]}}}`, "absolute"},
		{"template named host", `{"templates":{"host":{"dir":"/tmp","tenants":["*"]}}}`, "built-in"},
		{"negative quota", `{"tenants":{"defaults":{"maxMemoryMb":-1}}}`, "negative"},
		{"bad tenant override", `{"tenants":{"overrides":{"a b":{"maxSandboxes":1}}}}`, "tenants.overrides"},
		{"webhooks section", `{"webhooks":{"allowPrivateNetworks":true,"maxAttempts":3,"timeoutSeconds":5,"queueSize":100}}`, ""},
		{"webhooks zero attempts", `{"webhooks":{"maxAttempts":0}}`, "webhooks.maxAttempts"},
		{"webhooks long timeout", `{"webhooks":{"timeoutSeconds":301}}`, "webhooks.timeoutSeconds"},
		{"webhooks negative queue", `{"webhooks":{"queueSize":-1}}`, "webhooks.queueSize"},
		{"server section", `{"server":{"readTimeoutSeconds":30,"writeTimeoutSeconds":30,"idleTimeoutSeconds":10,"maxHeaderBytes":32768,"maxConnections":100,"maxConnectionsPerClient":10}}`, ""},
		{"server partial keeps defaults", `{"server":{"idleTimeoutSeconds":5}}`, ""},
		{"server zero read timeout", `{"server":{"readTimeoutSeconds":0}}`, "server.readTimeoutSeconds"},
		{"server long write timeout", `{"server":{"writeTimeoutSeconds":3601}}`, "server.writeTimeoutSeconds"},
		{"server zero idle timeout", `{"server":{"idleTimeoutSeconds":0}}`, "server.idleTimeoutSeconds"},
		{"server tiny header cap", `{"server":{"maxHeaderBytes":100}}`, "server.maxHeaderBytes"},
		{"server one client takes all", `{"server":{"maxConnections":100,"maxConnectionsPerClient":100}}`, "server.maxConnectionsPerClient"},
		{"server per client above total", `{"server":{"maxConnections":10}}`, "server.maxConnectionsPerClient"},
		{"server no connections", `{"server":{"maxConnectionsPerClient":0}}`, "server.maxConnectionsPerClient"},
		{"default isolation", `{"defaults":{"isolation":"process"}}`, ""},
		{"unknown default isolation", `{"defaults":{"isolation":"vm"}}`, "defaults.isolation"},
		{"empty default isolation", `{"defaults":{"isolation":""}}`, "defaults.isolation"},
		{"public url", `{"publicUrl":"https://airlock.example.com/prefix"}`, ""},
		{"public url with port", `{"publicUrl":"http://10.0.0.5:7070"}`, ""},
		{"public url without scheme", `{"publicUrl":"airlock.example.com"}`, "publicUrl"},
		{"public url ws", `{"publicUrl":"wss://airlock.example.com"}`, "publicUrl"},
		{"public url with query", `{"publicUrl":"https://a.example.com/?x=1"}`, "publicUrl"},
		{"agent", `{"agents":{"scanner":{"command":"python3 /app/scan.py","env":{"MODE":"full"},"workdir":"/app","tenants":["*"]}}}`, ""},
		{"agent argv", `{"agents":{"scanner":{"command":["python3","/app/scan.py"],"tenants":["acme"]}}}`, ""},
		{"agent without command", `{"agents":{"scanner":{"tenants":["*"]}}}`, "agents[scanner].command"},
		{"agent without tenants", `{"agents":{"scanner":{"command":"true"}}}`, "agents[scanner]"},
		{"agent relative workdir", `{"agents":{"scanner":{"command":"true","workdir":"app","tenants":["*"]}}}`, "agents[scanner].workdir"},
		{"agent bad name", `{"agents":{"a b":{"command":"true","tenants":["*"]}}}`, "agents"},
		{"agent unknown field", `{"agents":{"scanner":{"command":"true","tenants":["*"],"image":"x"}}}`, "agents[scanner].image"},
		{"plans", `{"tenants":{"plans":{"pro":{"maxSandboxes":20}},"defaults":{"plan":"free"},"overrides":{"acme":{"plan":"pro"}}}}`, ""},
		{"unknown plan", `{"tenants":{"overrides":{"acme":{"plan":"gold"}}}}`, "gold"},
		{"plan naming a plan", `{"tenants":{"plans":{"pro":{"plan":"free"}}}}`, "tenants.plans[pro]"},
		{"negative plan", `{"tenants":{"plans":{"pro":{"maxSandboxes":-1}}}}`, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "airlock.json")
			if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := Default()
			err := Read(p, &cfg)
			if err == nil {
				err = cfg.Validate()
			}
			if c.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.DataDir == "" || cfg.Database.Sync == "" {
					t.Fatalf("defaults lost: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("got %v, want error containing %q", err, c.errHas)
			}
		})
	}
}

func TestUnknownFieldPath(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{"dataDirr":"/x"}`, `unknown field "dataDirr"`},
		{`{"server":{"idleTimeoutSecond":5}}`, `unknown field "server.idleTimeoutSecond"`},
		{`{"tenants":{"overrides":{"t1":{"maxSandboxez":1}}}}`, `unknown field "tenants.overrides[t1].maxSandboxez"`},
		{`{"pools":[{"name":"p","size":1},{"name":"q","sizee":1}]}`, `unknown field "pools[1].sizee"`},
		{`{"Listen":"127.0.0.1:7070","volumes":{"v":{"hostpath":"/tmp","readonly":true,"tenants":["*"],"mode":"x"}}}`, `unknown field "volumes[v].mode"`},
	} {
		p := filepath.Join(t.TempDir(), "airlock.json")
		if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		if err := Read(p, &cfg); err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error ending %s", c.file, err, c.want)
		}
	}
}

// TestLeaf keeps config below the packages whose settings it once imported: the levels, the image
// store and the network own their sections, and package levels composes the file.
func TestLeaf(t *testing.T) {
	const module = "github.com/airlockrun/airlock/"
	forbidden := []string{"internal/driver", "internal/levels", "internal/image", "internal/netpolicy/egress",
		"internal/manager", "internal/server", "internal/daemon", "internal/cli"}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var visit func(pkg, from string)
	visit = func(pkg, from string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, f+"/") {
				t.Errorf("internal/config depends on %s (through %s)", pkg, from)
			}
		}
		bp, err := build.Default.ImportDir(filepath.Join(root, pkg), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range bp.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				visit(rel, pkg)
			}
		}
	}
	visit("internal/config", "itself")
	if len(seen) < 2 {
		t.Fatalf("found no imports of internal/config: %v", seen)
	}
}

// TestPlans: a tenant's quota is its own fields, then its plan's (its own, else the defaults'),
// then the defaults', then the built-in ones; the free plan is built in (seed 002: 3 sandboxes).
func TestPlans(t *testing.T) {
	c := Default()
	c.Tenants = TenantsConfig{
		Defaults:  api.Quota{MaxSandboxes: 50, RequestsPerSecond: 20},
		Plans:     map[string]api.Quota{"pro": {MaxSandboxes: 20, MaxStoredMB: 100}},
		Overrides: map[string]api.Quota{"a": {Plan: "free"}, "b": {Plan: "pro", MaxSandboxes: 7}, "c": {MaxDiskMB: 9}},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g := c.Grants()
	for _, w := range []struct {
		tenant    string
		plan      string
		sandboxes int
		rps       float64
		stored    int64
	}{
		{"a", "free", 3, 20, 10240},
		{"b", "pro", 7, 20, 100},
		{"c", "", 50, 20, 10240},
		{"someone", "", 50, 20, 10240},
	} {
		q := g.QuotaOf(w.tenant)
		if q.Plan != w.plan || q.MaxSandboxes != w.sandboxes || q.RequestsPerSecond != w.rps || q.MaxStoredMB != w.stored {
			t.Errorf("%s: %+v, want plan %q, %d sandboxes, %g requests/s, %d MiB stored", w.tenant, q, w.plan, w.sandboxes, w.rps, w.stored)
		}
	}
	if q := g.QuotaOf("a"); q.MaxMemoryMB != 3*2048 {
		t.Errorf("free plan's memory: %+v", q)
	}
	// defaults.plan puts every tenant on a plan; a redefined built-in plan is the operator's.
	c.Tenants = TenantsConfig{Defaults: api.Quota{Plan: "free"}, Plans: map[string]api.Quota{"free": {MaxSandboxes: 5}}}
	if q := c.Grants().QuotaOf("x"); q.Plan != "free" || q.MaxSandboxes != 5 {
		t.Errorf("defaults.plan: %+v", q)
	}
}
