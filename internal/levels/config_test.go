package levels

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
)

// TestLoad checks the sections of the levels, the image store and the network in the whole file;
// package config's own test checks the daemon's part.
func TestLoad(t *testing.T) {
	for _, c := range []struct {
		name, file, errHas string
	}{
		{"empty object keeps defaults", `{}`, ""},
		{"unknown field at the top", `{"dataDirr":"/x"}`, `unknown field "dataDirr"`},
		{"unknown field in a section", `{"process":{"uidBasee":1}}`, `unknown field "process.uidBasee"`},
		{"unknown field in a secret", `{"network":{"secrets":{"k":{"value":"v","hosts":["a.com"],"tenants":["*"],"tenant":"t"}}}}`, `unknown field "network.secrets[k].tenant"`},
		{"daemon part checked", `{"dataDir":"data"}`, "absolute"},
		{"container runtime", `{"container":{"runtime":"crun"}}`, "container.runtime"},
		{"container platform", `{"container":{"runscPlatform":"vm"}}`, "container.runscPlatform"},
		{"container cgroup parent escapes", `{"container":{"cgroupParent":"../x"}}`, "container.cgroupParent"},
		{"one cgroup parent for two levels", `{"container":{"cgroupParent":"airlock"}}`, "container.cgroupParent"},
		{"orphan grace", `{"process":{"orphanGraceSeconds":3601}}`, "process.orphanGraceSeconds"},
		{"wasm idle", `{"wasm":{"workerIdleSeconds":-1}}`, "wasm.workerIdleSeconds"},
		{"image size", `{"images":{"maxImageSizeMb":0}}`, "images.maxImageSizeMb"},
		{"overrides", `{"version":1,"dataDir":"/srv/airlock","process":{"cgroupParent":"sandboxes","uidBase":300000}}`, ""},
		{"cgroup parent escapes", `{"process":{"cgroupParent":"../x"}}`, "cgroupParent"},
		{"uid base overlapping host users", `{"process":{"uidBase":1000}}`, "uidBase"},
		{"uid pool past 2^32", `{"process":{"uidBase":4200000000,"uidRanges":4096}}`, "uidRanges"},
		{"no uid ranges", `{"process":{"uidRanges":0}}`, "uidRanges"},
		{"network section", `{"network":{"pool":"10.50.0.0/20","resolvers":["192.0.2.53:53"],"trustedHosts":{"llm.internal":"10.1.2.3,10.1.2.4"},"secrets":{"k":{"value":"v","hosts":["api.x.com"],"tenants":["*"]}}}}`, ""},
		{"secret as a bare string", `{"network":{"secrets":{"k":"v"}}}`, "hosts"},
		{"secret without hosts", `{"network":{"secrets":{"k":{"value":"v","tenants":["*"]}}}}`, "hosts"},
		{"grants", `{"volumes":{"data":{"hostPath":"/tmp","readOnly":true,"tenants":["t1"]}},"templates":{"py":{"dir":"/usr","tenants":["*"]}},"tenants":{"defaults":{"maxSandboxes":5},"overrides":{"t1":{"maxMemoryMb":1024}}},"images":{"allowed":["docker.io/library/*"],"registries":["docker.io"]}}`, ""},
		{"bad pool", `{"network":{"pool":"10.50.0.0"}}`, "network.pool"},
		{"resolver without port", `{"network":{"resolvers":["192.0.2.53"]}}`, "network.resolvers[0]"},
		{"trusted host not an address", `{"network":{"trustedHosts":{"llm.internal":"llm.corp"}}}`, "trustedHosts[llm.internal]"},
		{"secret from an unset variable", `{"network":{"secrets":{"k":{"value":"env:AIRLOCK_TEST_NOT_SET","hosts":["a.com"],"tenants":["*"]}}}}`, "AIRLOCK_TEST_NOT_SET"},
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
			if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(p)
			if err == nil {
				err = cfg.Validate()
			}
			if c.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.DataDir == "" || cfg.Database.Sync == "" || cfg.Process.UIDRanges == 0 || cfg.Container.Runtime == "" {
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

// TestDefaultFile checks that the whole file, as the effective configuration prints it, is the
// daemon's part and every section with its owner's defaults, at the top level as before.
func TestDefaultFile(t *testing.T) {
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"version": `1`, "listen": `"127.0.0.1:7070"`, "webhooks": `"maxAttempts":8`,
		"process":   `{"cgroupParent":"airlock","uidBase":2000000000,"uidRanges":4096,"orphanGraceSeconds":60}`,
		"container": `{"runtime":"runsc","runsc":"","runc":"","runscPlatform":"systrap","cgroupParent":"airlock-container","prepareRestores":true}`,
		"wasm":      `{"runtimeDir":"/usr/local/lib/airlock/wasm","workerIdleSeconds":30}`,
		"images":    `"maxImageSizeMb":8192`, "network": `"pool":""`, "hostTemplate": `{"paths":null}`,
	} {
		if !strings.Contains(string(file[key]), want) {
			t.Errorf("%s: %s, want %s in it", key, file[key], want)
		}
	}
	// What the file prints, it reads back.
	p := filepath.Join(t.TempDir(), "airlock.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
}

func TestDriverConfigs(t *testing.T) {
	c := Default()
	c.DataDir = "/srv/airlock"
	inst := c.Instance()
	if p := c.processConfig(); p.StateDir != "/srv/airlock/process" || p.CgroupParent != "airlock/"+inst || p.Instance != inst ||
		p.UIDBase != 2_000_000_000 || p.UIDRanges != 4096 || p.OrphanGrace.Seconds() != 60 {
		t.Fatalf("%+v", p)
	}
	if d := c.containerConfig(); d.CgroupParent != "airlock-container/"+inst || d.StateDir != "/run/airlock/container/"+inst ||
		d.StateDir != ContainerStateDir(c.DataDir) || d.NoPreparedRestores {
		t.Fatalf("%+v", d)
	}
	if w := c.Wasm.Config(c.DataDir); w.StateDir != "/srv/airlock/wasm" || w.WorkerIdle.Seconds() != 30 {
		t.Fatalf("%+v", w)
	}
	if dir, opts := c.Images.Store(c.DataDir); dir != "/srv/airlock/images" || opts.MaxImageBytes != 8<<30 {
		t.Fatalf("%s %+v", dir, opts)
	}
	// Another data dir is another airlock: nothing of theirs is shared.
	o := c
	o.DataDir = "/srv/airlock2"
	if o.Instance() == inst || o.processConfig().CgroupParent == c.processConfig().CgroupParent ||
		o.containerConfig().CgroupParent == c.containerConfig().CgroupParent || o.containerConfig().StateDir == c.containerConfig().StateDir {
		t.Fatalf("two data dirs share an instance, cgroup parent or state dir: %s, %s", inst, o.Instance())
	}
	if p := c.processConfig(); p.HostPaths != nil {
		t.Fatalf("host paths by default: %+v", p.HostPaths)
	}
	c.HostTemplate.Paths = []string{"/opt/sdk"}
	if p := c.processConfig(); len(p.HostPaths) != 1 || p.HostPaths[0] != "/opt/sdk" {
		t.Fatalf("host paths: %+v", p.HostPaths)
	}
}

func TestEgressConfig(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SECRET", "s3cret")
	c := Default()
	c.Network = egress.Settings{Pool: "10.50.0.0/20", TrustedHosts: map[string]string{"llm.internal": "10.1.2.3, 10.1.2.4"},
		Secrets: map[string]egress.SecretSettings{"a": {Value: "env:AIRLOCK_TEST_SECRET", Hosts: []string{"a.com"}, Tenants: []string{"*"}}, "b": {Value: "literal", Hosts: []string{"*.b.com"}, Tenants: []string{"t1"}}}}
	e, err := c.egressConfig()
	if err != nil {
		t.Fatal(err)
	}
	if e.Pool.String() != "10.50.0.0/20" || len(e.Trusted["llm.internal"]) != 2 || e.Secrets["a"] != "s3cret" || e.Secrets["b"] != "literal" {
		t.Fatalf("%+v", e)
	}
}

// TestGrants checks that the grants join the daemon's part with the sections' images and secrets.
func TestGrants(t *testing.T) {
	c := Default()
	c.Volumes = map[string]config.VolumeConfig{"data": {HostPath: "/tmp", Tenants: []string{"t1"}}}
	c.Images.Allowed, c.Images.Registries = []string{"docker.io/library/*"}, []string{"docker.io"}
	c.Network.Secrets = map[string]egress.SecretSettings{"k": {Value: "v", Hosts: []string{"a.com"}, Tenants: []string{"t1"}}}
	g := c.Grants()
	if _, ok := g.Volumes["data"]; !ok || len(g.Images.Allowed) != 1 || len(g.Images.Registries) != 1 ||
		len(g.Secrets["k"].Hosts) != 1 || g.Quota.MaxSandboxes != 100 {
		t.Fatalf("%+v", g)
	}
}
