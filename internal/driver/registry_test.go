package driver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

type fake struct {
	name string
	caps Capabilities
}

func (f fake) Name() string               { return f.name }
func (f fake) Capabilities() Capabilities { return f.caps }
func (f fake) Create(context.Context, string, sandbox.Spec) (Sandbox, error) {
	return nil, errors.New("not for this test")
}

func TestLookup(t *testing.T) {
	r := NewRegistry()
	r.Register(fake{"process", Capabilities{Available: true}})
	r.Register(fake{"microvm", Capabilities{Reason: "no /dev/kvm", Fix: "enable KVM"}})
	for _, c := range []struct {
		level, errHas string
	}{
		{"process", ""},
		{"microvm", "no /dev/kvm (fix: enable KVM)"},
		{"enclave", "not built into this airlock"},
	} {
		d, err := r.Lookup(c.level)
		if c.errHas == "" {
			if err != nil || d.Name() != c.level {
				t.Fatalf("lookup %s: %v", c.level, err)
			}
			continue
		}
		// Never silently another level: an error that names why.
		if d != nil || !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), c.errHas) {
			t.Fatalf("lookup %s: %v, %v", c.level, d, err)
		}
	}
	if names := r.All(); len(names) != 2 || names[0].Name() != "microvm" {
		t.Fatalf("All() = %v", names)
	}
}

func TestReport(t *testing.T) {
	r := NewRegistry()
	r.Register(fake{"process", Capabilities{Level: "process", Available: true}})
	rep := r.Report()
	if len(rep) != len(sandbox.Levels) {
		t.Fatalf("%d levels reported, want every level of docs/levels.md#isolation-levels", len(rep))
	}
	for i, c := range rep {
		if c.Level != sandbox.Levels[i] || c.Available != (c.Level == "process") {
			t.Errorf("level %d: %+v", i, c)
		}
		if !c.Available && !strings.Contains(c.Reason, "not built") {
			t.Errorf("%s unavailable without a reason: %+v", c.Level, c)
		}
	}
}
