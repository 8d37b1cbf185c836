package tenancy

import (
	"errors"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

func grants() *Grants {
	return &Grants{
		Volumes: map[string]Volume{
			"data":   {HostPath: "/srv/data", ReadOnly: true, Tenants: []string{"t1"}},
			"shared": {HostPath: "/srv/shared", Tenants: []string{Everyone}},
		},
		Templates: map[string]Template{"py": {Dir: "/srv/py", Tenants: []string{"t1"}}},
		Secrets: map[string]Secret{
			"openai": {Hosts: []string{"api.openai.com"}, Tenants: []string{"t1"}},
			"gh":     {Hosts: []string{"*.github.com"}, Tenants: []string{Everyone}},
		},
		Agents: map[string]Agent{"scanner": {Agent: api.Agent{Command: api.Shell("scan"), Env: map[string]string{"MODE": "full"}}, Tenants: []string{"t1"}}},
		Images: Images{Allowed: []string{"docker.io/library/python:*", "ghcr.io/acme/*"}, Registries: []string{"docker.io", "ghcr.io"}},
		Quota:  Quota{MaxSandboxes: 5},
		Quotas: map[string]Quota{"big": {MaxSandboxes: 50}},
	}
}

func TestCheck(t *testing.T) {
	g := grants()
	cred := func(host, secret string) sandbox.Spec {
		return sandbox.Spec{Network: sandbox.Network{Credentials: []sandbox.Credential{{Host: host, Header: "Authorization", Secret: secret}}}}
	}
	for _, c := range []struct {
		name, tenant string
		spec         sandbox.Spec
		code, field  string // "" for allowed
	}{
		{"nothing asked", "t2", sandbox.Spec{}, "", ""},
		{"host template", "t2", sandbox.Spec{Template: "host"}, "", ""},
		{"granted volume", "t1", sandbox.Spec{Volumes: []api.VolumeMount{{Name: "data", Path: "/d"}}}, "", ""},
		{"volume for everyone", "t2", sandbox.Spec{Volumes: []api.VolumeMount{{Name: "shared", Path: "/s"}}}, "", ""},
		{"volume of another tenant", "t2", sandbox.Spec{Volumes: []api.VolumeMount{{Name: "shared", Path: "/s"}, {Name: "data", Path: "/d"}}},
			api.CodeVolumeNotGranted, "volumes[1].name"},
		{"unknown volume", "t1", sandbox.Spec{Volumes: []api.VolumeMount{{Name: "etc", Path: "/e"}}}, api.CodeVolumeNotGranted, "volumes[0].name"},
		{"granted template", "t1", sandbox.Spec{Template: "py"}, "", ""},
		{"template of another tenant", "t2", sandbox.Spec{Template: "py"}, api.CodeTemplateNotGranted, "template"},
		{"granted secret", "t1", cred("api.openai.com", "openai"), "", ""},
		{"secret host by wildcard", "t2", cred("api.github.com", "gh"), "", ""},
		{"wildcard is not its apex", "t2", cred("github.com", "gh"), api.CodeSecretNotGranted, "network.credentials[0].secret"},
		{"secret to a foreign host", "t1", cred("evil.test", "openai"), api.CodeSecretNotGranted, "network.credentials[0].secret"},
		{"secret suffix trick", "t1", cred("api.openai.com.evil.test", "openai"), api.CodeSecretNotGranted, "network.credentials[0].secret"},
		{"secret of another tenant", "t2", cred("api.openai.com", "openai"), api.CodeSecretNotGranted, "network.credentials[0].secret"},
		{"unknown secret", "t1", cred("api.openai.com", "nope"), api.CodeSecretNotGranted, "network.credentials[0].secret"},
		{"own value", "t2", sandbox.Spec{Network: sandbox.Network{Credentials: []sandbox.Credential{{Host: "x.com", Header: "A", Value: "v"}}}}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := g.Check(c.tenant, c.spec)
			if c.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok || fe.Code != c.code || fe.Field != c.field || !errors.Is(err, errdefs.ErrPermissionDenied) {
				t.Fatalf("error %#v, want a 403 %s on %s", err, c.code, c.field)
			}
		})
	}
}

// TestAgentFor: an agentId names the operator's agent for a tenant it is granted to (and an
// admin), a copy the caller may change; for others, and for unknown IDs, it is only a label.
func TestAgentFor(t *testing.T) {
	g := grants()
	for _, c := range []struct {
		name, tenant, id string
		admin, want      bool
	}{
		{"granted", "t1", "scanner", false, true},
		{"not granted", "t2", "scanner", false, false},
		{"admin", "operator", "scanner", true, true},
		{"unknown", "t1", "019agent-scanner-...", false, false},
	} {
		ag, ok := g.AgentFor(c.tenant, c.admin, c.id)
		if ok != c.want || ok && (len(ag.Command) != 3 || ag.Command[2] != "scan" || ag.Env["MODE"] != "full") {
			t.Errorf("%s: %+v %v, want %v", c.name, ag, ok, c.want)
		}
		if ok {
			ag.Command[2], ag.Env["MODE"] = "changed", "changed"
		}
	}
	if a := g.Agents["scanner"].Agent; a.Command[2] != "scan" || a.Env["MODE"] != "full" {
		t.Errorf("a caller changed the operator's agent: %+v", a)
	}
}

func TestResolve(t *testing.T) {
	g := grants()
	spec := sandbox.Spec{Template: "py", Volumes: []api.VolumeMount{{Name: "data", Path: "/d"}, {Name: "shared", Path: "/s", ReadOnly: true}, {Name: "shared", Path: "/w"}},
		Binds: []sandbox.Bind{{Host: "/etc", Path: "/hostetc"}}} // never from a request; replaced
	if err := g.Resolve(&spec); err != nil {
		t.Fatal(err)
	}
	want := []sandbox.Bind{{Host: "/srv/data", Path: "/d", ReadOnly: true}, {Host: "/srv/shared", Path: "/s", ReadOnly: true}, {Host: "/srv/shared", Path: "/w"}}
	if spec.RootDir != "/srv/py" || len(spec.Binds) != len(want) {
		t.Fatalf("resolved %+v %q", spec.Binds, spec.RootDir)
	}
	for i := range want {
		if spec.Binds[i] != want[i] {
			t.Errorf("bind %d = %+v, want %+v", i, spec.Binds[i], want[i])
		}
	}
	gone := sandbox.Spec{Volumes: []api.VolumeMount{{Name: "removed", Path: "/r"}}}
	if err := g.Resolve(&gone); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("a volume no longer configured: %v", err)
	}
}

func TestImages(t *testing.T) {
	g := grants().Images
	for _, c := range []struct {
		ref     string
		allowed bool
	}{
		{"python:3.12-slim", true}, // docker.io/library/python:3.12-slim, canonically index.docker.io/...
		{"docker.io/library/python:3", true},
		{"ghcr.io/acme/app:v1", true},
		{"ghcr.io/acme/team/app@sha256:" + "0123456789012345678901234567890123456789012345678901234567890123", true},
		{"ghcr.io/evil/app:v1", false},
		{"node:20", false},
		{"127.0.0.1:5000/x:1", false},
	} {
		if got := g.ImageAllowed(c.ref); got != c.allowed {
			t.Errorf("ImageAllowed(%q) = %v", c.ref, got)
		}
	}
	for reg, want := range map[string]bool{"index.docker.io": true, "docker.io": true, "ghcr.io": true, "GHCR.IO": true, "127.0.0.1:5000": false, "169.254.169.254": false} {
		if got := g.RegistryAllowed(reg); got != want {
			t.Errorf("RegistryAllowed(%q) = %v", reg, got)
		}
	}
	if !(&Images{}).RegistryAllowed("any.example") {
		t.Error("no registries listed should allow any")
	}
}

func TestQuotaOf(t *testing.T) {
	g := grants()
	if g.QuotaOf("t1").MaxSandboxes != 5 || g.QuotaOf("big").MaxSandboxes != 50 {
		t.Fatalf("quotas: %+v %+v", g.QuotaOf("t1"), g.QuotaOf("big"))
	}
}

func TestListings(t *testing.T) {
	g := grants()
	vs := g.VolumesFor("t2", false)
	if len(vs) != 1 || vs[0].Name != "shared" || vs[0].HostPath != "" {
		t.Errorf("t2's volumes: %+v (host paths are the operator's)", vs)
	}
	if vs := g.VolumesFor("t2", true); len(vs) != 2 || vs[0].HostPath != "/srv/data" {
		t.Errorf("admin's volumes: %+v", vs)
	}
	ts := g.TemplatesFor("t2", false)
	if len(ts) != 1 || ts[0].Name != "host" {
		t.Errorf("t2's templates: %+v", ts)
	}
	if ts := g.TemplatesFor("t1", false); len(ts) != 2 || ts[1].Name != "py" || ts[1].Dir != "" {
		t.Errorf("t1's templates: %+v", ts)
	}
}
