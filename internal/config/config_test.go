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
		{"not json", `dataDir: /x`, "invalid character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "airlock.json")
			os.WriteFile(p, []byte(c.file), 0o644)
			cfg, err := Load(p)
			if c.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Listen != "127.0.0.1:7070" {
					t.Fatalf("default listen lost: %+v", cfg)
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
	if p := c.ProcessDriver(); p.StateDir != "/srv/airlock/process" || p.CgroupParent != "airlock" || p.UIDBase != 2_000_000_000 {
		t.Fatalf("%+v", p)
	}
}
