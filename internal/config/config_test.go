package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	for _, c := range []struct {
		name, file, errHas string
	}{
		{"empty object keeps defaults", `{}`, ""},
		{"overrides", `{"version":1,"dataDir":"/srv/airlock","process":{"cgroupParent":"sandboxes","uidBase":300000}}`, ""},
		{"unknown field", `{"dataDirr":"/x"}`, "unknown field"},
		{"future version", `{"version":2}`, "version 2"},
		{"relative data dir", `{"dataDir":"data"}`, "absolute"},
		{"cgroup parent escapes", `{"process":{"cgroupParent":"../x"}}`, "cgroupParent"},
		{"uid base overlapping host users", `{"process":{"uidBase":1000}}`, "uidBase"},
		{"uid pool past 2^32", `{"process":{"uidBase":4200000000,"uidRanges":4096}}`, "uidRanges"},
		{"no uid ranges", `{"process":{"uidRanges":0}}`, "uidRanges"},
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
		{"network section", `{"network":{"pool":"10.50.0.0/20","resolvers":["192.0.2.53:53"],"trustedHosts":{"llm.internal":"10.1.2.3,10.1.2.4"},"secrets":{"k":{"value":"v","hosts":["api.x.com"],"tenants":["*"]}}}}`, ""},
		{"secret as a bare string", `{"network":{"secrets":{"k":"v"}}}`, "hosts"},
		{"secret without hosts", `{"network":{"secrets":{"k":{"value":"v","tenants":["*"]}}}}`, "hosts"},
		{"volume not a directory", `{"volumes":{"v":{"hostPath":"/nonexistent/dir","tenants":["*"]}}}`, "volumes[v]"},
		{"volume without tenants", `{"volumes":{"v":{"hostPath":"/tmp"}}}`, "tenants"},
		{"volume relative", `{"volumes":{"v":{"hostPath":"tmp","tenants":["*"]}}}`, "absolute"},
		{"template named host", `{"templates":{"host":{"dir":"/tmp","tenants":["*"]}}}`, "built-in"},
		{"negative quota", `{"tenants":{"defaults":{"maxMemoryMb":-1}}}`, "negative"},
		{"bad tenant override", `{"tenants":{"overrides":{"a b":{"maxSandboxes":1}}}}`, "tenants.overrides"},
		{"grants", `{"volumes":{"data":{"hostPath":"/tmp","readOnly":true,"tenants":["t1"]}},"templates":{"py":{"dir":"/usr","tenants":["*"]}},"tenants":{"defaults":{"maxSandboxes":5},"overrides":{"t1":{"maxMemoryMb":1024}}},"images":{"allowed":["docker.io/library/*"],"registries":["docker.io"]}}`, ""},
		{"bad pool", `{"network":{"pool":"10.50.0.0"}}`, "network.pool"},
		{"resolver without port", `{"network":{"resolvers":["192.0.2.53"]}}`, "network.resolvers[0]"},
		{"trusted host not an address", `{"network":{"trustedHosts":{"llm.internal":"llm.corp"}}}`, "trustedHosts[llm.internal]"},
		{"secret from an unset variable", `{"network":{"secrets":{"k":{"value":"env:AIRLOCK_TEST_NOT_SET","hosts":["a.com"],"tenants":["*"]}}}}`, "AIRLOCK_TEST_NOT_SET"},
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
		{"host template paths", `{"hostTemplate":{"paths":["/usr/local/bin","/usr/bin/env"]}}`, ""},
		{"host template path relative", `{"hostTemplate":{"paths":["usr/local"]}}`, "hostTemplate.paths[0]"},
		{"host template path unclean", `{"hostTemplate":{"paths":["/usr/local/../local"]}}`, "hostTemplate.paths[0]"},
		{"host template path root", `{"hostTemplate":{"paths":["/"]}}`, "hostTemplate.paths[0]"},
		{"host template path over /etc", `{"hostTemplate":{"paths":["/usr/bin","/etc/ssl"]}}`, "hostTemplate.paths[1]"},
		{"host template path over /proc", `{"hostTemplate":{"paths":["/proc/1"]}}`, "hostTemplate.paths[0]"},
		{"host template path missing", `{"hostTemplate":{"paths":["/usr/local/airlock-no-such-path"]}}`, "hostTemplate.paths[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "airlock.json")
			os.WriteFile(p, []byte(c.file), 0o644)
			cfg, err := Load(p)
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

func TestProcessDriverConfig(t *testing.T) {
	c := Default()
	c.DataDir = "/srv/airlock"
	inst := c.Instance()
	if p := c.ProcessDriver(); p.StateDir != "/srv/airlock/process" || p.CgroupParent != "airlock/"+inst || p.Instance != inst ||
		p.UIDBase != 2_000_000_000 || p.UIDRanges != 4096 {
		t.Fatalf("%+v", p)
	}
	if d := c.ContainerDriver(); d.CgroupParent != "airlock-container/"+inst || d.StateDir != "/run/airlock/container/"+inst {
		t.Fatalf("%+v", d)
	}
	// Another data dir is another airlock: nothing of theirs is shared.
	o := c
	o.DataDir = "/srv/airlock2"
	if o.Instance() == inst || o.ProcessDriver().CgroupParent == c.ProcessDriver().CgroupParent ||
		o.ContainerDriver().CgroupParent == c.ContainerDriver().CgroupParent || o.ContainerDriver().StateDir == c.ContainerDriver().StateDir {
		t.Fatalf("two data dirs share an instance, cgroup parent or state dir: %s, %s", inst, o.Instance())
	}
	if p := c.ProcessDriver(); p.HostPaths != nil {
		t.Fatalf("host paths by default: %+v", p.HostPaths)
	}
	c.HostTemplate.Paths = []string{"/opt/sdk"}
	if p := c.ProcessDriver(); len(p.HostPaths) != 1 || p.HostPaths[0] != "/opt/sdk" {
		t.Fatalf("host paths: %+v", p.HostPaths)
	}
}

func TestEgressConfig(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SECRET", "s3cret")
	c := Default()
	c.Network = NetworkConfig{Pool: "10.50.0.0/20", TrustedHosts: map[string]string{"llm.internal": "10.1.2.3, 10.1.2.4"},
		Secrets: map[string]SecretConfig{"a": {Value: "env:AIRLOCK_TEST_SECRET", Hosts: []string{"a.com"}, Tenants: []string{"*"}}, "b": {Value: "literal", Hosts: []string{"*.b.com"}, Tenants: []string{"t1"}}}}
	e, err := c.Egress()
	if err != nil {
		t.Fatal(err)
	}
	if e.Pool.String() != "10.50.0.0/20" || len(e.Trusted["llm.internal"]) != 2 || e.Secrets["a"] != "s3cret" || e.Secrets["b"] != "literal" {
		t.Fatalf("%+v", e)
	}
}
