package sandbox

import (
	"errors"
	"github.com/airlockrun/airlock/api"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/errdefs"
)

func TestDefaults(t *testing.T) {
	var s Spec
	SetDefaults(&s)
	if err := Validate(&s); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	r := s.Resources
	if r.CPU != 1 || r.MemoryMB != 2048 || r.DiskMB != 5120 || r.NetworkMbps != 100 || r.MaxProcesses != 64 || r.MaxOpenFiles != 1024 {
		t.Fatalf("resource defaults %+v differ from docs/levels.md#resources-and-limits", r)
	}
	if s.Timeout.MaxDurationSeconds != 3600 || s.Timeout.IdleTimeoutSeconds != 300 || s.User != UserAgent ||
		s.Isolation != LevelContainer || s.Network.EgressPolicy != EgressNone || !*s.Network.BlockLocalNetwork {
		t.Fatalf("defaults %+v", s)
	}
	s = Spec{Network: Network{AllowedDomains: []string{"example.com"}}}
	SetDefaults(&s)
	if s.Network.EgressPolicy != EgressRestricted {
		t.Fatalf("allowedDomains must default the policy to restricted, got %q", s.Network.EgressPolicy)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(*Spec)
		field string // "" = valid
	}{
		{"max values", func(s *Spec) {
			s.Resources = Resources{CPU: 8, MemoryMB: 32768, DiskMB: 51200, NetworkMbps: 1000, MaxProcesses: 512, MaxOpenFiles: 65536}
		}, ""},
		{"cpu above max is an error, not clamped", func(s *Spec) { s.Resources.CPU = 8.5 }, "resources.cpu"},
		{"negative cpu", func(s *Spec) { s.Resources.CPU = -1 }, "resources.cpu"},
		{"memory above max", func(s *Spec) { s.Resources.MemoryMB = 32769 }, "resources.memoryMb"},
		{"memory below min", func(s *Spec) { s.Resources.MemoryMB = 8 }, "resources.memoryMb"},
		{"disk above max", func(s *Spec) { s.Resources.DiskMB = 51201 }, "resources.diskMb"},
		{"pids above max", func(s *Spec) { s.Resources.MaxProcesses = 513 }, "resources.maxProcesses"},
		{"nofile above max", func(s *Spec) { s.Resources.MaxOpenFiles = 65537 }, "resources.maxOpenFiles"},
		{"network above max", func(s *Spec) { s.Resources.NetworkMbps = 1001 }, "resources.networkMbps"},
		{"duration above max", func(s *Spec) { s.Timeout.MaxDurationSeconds = 86401 }, "timeout.maxDurationSeconds"},
		{"unknown level", func(s *Spec) { s.Isolation = "vm" }, "isolation"},
		{"unknown user", func(s *Spec) { s.User = "admin" }, "user"},
		{"relative workdir", func(s *Spec) { s.Workdir = "work" }, "workdir"},
		{"workdir with ..", func(s *Spec) { s.Workdir = "/workspace/../etc" }, "workdir"},
		{"bad policy", func(s *Spec) { s.Network.EgressPolicy = "some" }, "network.egressPolicy"},
		{"allowlist entry with a path", func(s *Spec) { s.Network.AllowedDomains = []string{"a.com", "a.com/x"} }, "network.allowedDomains[1]"},
		{"allowlist IP literal", func(s *Spec) { s.Network.AllowedDomains = []string{"10.0.0.1"} }, "network.allowedDomains[0]"},
		{"allowlist wildcard inside", func(s *Spec) { s.Network.AllowedDomains = []string{"a.*.com"} }, "network.allowedDomains[0]"},
		{"good allowlist", func(s *Spec) {
			s.Network = Network{EgressPolicy: EgressRestricted, AllowedDomains: []string{"a.com", "*.b.com", "c.com:8443"}}
		}, ""},
		{"credential without value", func(s *Spec) {
			s.Network.Credentials = []Credential{{Host: "api.a.com", Header: "Authorization"}}
		}, "network.credentials[0]"},
		{"credential header injection", func(s *Spec) {
			s.Network.Credentials = []Credential{{Host: "api.a.com", Header: "X-Key", Value: "k\r\nEvil: 1"}}
		}, "network.credentials[0].value"},
		{"credential naming a secret", func(s *Spec) {
			s.Network.Credentials = []Credential{{Host: "api.a.com", Header: "Authorization", Secret: "openai"}}
		}, ""},
		{"env name with =", func(s *Spec) { s.Environment = map[string]string{"A=B": "c"} }, "environment"},
		{"relative ro mount", func(s *Spec) { s.Filesystem.ReadOnly = []string{"data"} }, "filesystem.readOnly[0]"},
		{"rw over the root", func(s *Spec) { s.Filesystem.ReadWrite = []string{"/"} }, "filesystem.readWrite[0]"},
		{"ro traversal", func(s *Spec) { s.Filesystem.ReadOnly = []string{"/a/../b"} }, "filesystem.readOnly[0]"},
		{"ro host path (HOST:DEST)", func(s *Spec) { s.Filesystem.ReadOnly = []string{"/etc:/hostetc"} }, "filesystem.readOnly[0]"},
		{"rw host path (HOST:DEST)", func(s *Spec) { s.Filesystem.ReadWrite = []string{"/srv:/rw"} }, "filesystem.readWrite[0]"},
		{"rw over /proc", func(s *Spec) { s.Filesystem.ReadWrite = []string{"/proc/sys"} }, "filesystem.readWrite[0]"},
		{"ro /dev", func(s *Spec) { s.Filesystem.ReadOnly = []string{"/dev"} }, "filesystem.readOnly[0]"},
		{"relative blocked", func(s *Spec) { s.Filesystem.Blocked = []string{"etc"} }, "filesystem.blocked[0]"},
		{"good paths", func(s *Spec) {
			s.Filesystem = Filesystem{ReadOnly: []string{"/workspace/data"}, ReadWrite: []string{"/srv/out"}, Blocked: []string{"/etc/ssl"}}
		}, ""},
		{"volume", func(s *Spec) { s.Volumes = []api.VolumeMount{{Name: "data", Path: "/data", ReadOnly: true}} }, ""},
		{"volume without name", func(s *Spec) { s.Volumes = []api.VolumeMount{{Path: "/data"}} }, "volumes[0].name"},
		{"volume with a path for a name", func(s *Spec) { s.Volumes = []api.VolumeMount{{Name: "/srv", Path: "/data"}} }, "volumes[0].name"},
		{"volume at a relative path", func(s *Spec) { s.Volumes = []api.VolumeMount{{Name: "d", Path: "data"}} }, "volumes[0].path"},
		{"volume over the root", func(s *Spec) { s.Volumes = []api.VolumeMount{{Name: "d", Path: "/"}} }, "volumes[0].path"},
		{"two volumes at one path", func(s *Spec) {
			s.Volumes = []api.VolumeMount{{Name: "a", Path: "/d"}, {Name: "b", Path: "/d"}}
		}, "volumes[1].path"},
		{"template name", func(s *Spec) { s.Template = "../etc" }, "template"},
		{"image and template", func(s *Spec) { s.Image, s.Template = "python:3", "py" }, "image"},
		{"seed 000's create", func(s *Spec) {
			s.Resources = Resources{CPU: 2, MemoryMB: 4096, DiskMB: 10240, NetworkMbps: 100, MaxProcesses: 64, MaxOpenFiles: 1024}
			s.Network = Network{EgressPolicy: EgressRestricted, AllowedDomains: []string{"api.openai.com", "api.anthropic.com", "*.drd.io"}, BlockLocalNetwork: s.Network.BlockLocalNetwork}
			s.Timeout = Timeout{MaxDurationSeconds: 3600, IdleTimeoutSeconds: 300}
		}, ""},
		{"seed 000's SDK: restricted, no domains", func(s *Spec) { s.Network.EgressPolicy = EgressRestricted }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Spec
			SetDefaults(&s)
			c.edit(&s)
			err := Validate(&s)
			if c.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("got %v, want a field error on %s", err, c.field)
			}
		})
	}
}

func TestLimitMessageNamesRange(t *testing.T) {
	err := Limits.MemoryMB.Check(40000)
	if err == nil || !strings.Contains(err.Error(), "between 16 and 32768 MiB (got 40000)") {
		t.Fatalf("message %q does not name the range", err)
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID("sbx_"), NewID("sbx_")
	if a == b || !strings.HasPrefix(a, "sbx_") || len(a) != 24 {
		t.Fatalf("ids %q %q", a, b)
	}
}

// TestGPU: gpuEnabled false is the default; true is refused as unavailable (422 gpu_unavailable),
// saying why.
func TestGPU(t *testing.T) {
	var s Spec
	SetDefaults(&s)
	s.Resources.GPUEnabled = true
	err := Validate(&s)
	fe, ok := errors.AsType[*errdefs.FieldError](err)
	if !ok || fe.Field != "resources.gpuEnabled" || fe.Code != api.CodeGPUUnavailable || !errors.Is(err, errdefs.ErrUnavailable) ||
		!strings.Contains(fe.Message, "GPU") {
		t.Fatalf("gpuEnabled true: %v", err)
	}
}
