package manager

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenancy"
	"github.com/airlockrun/airlock/internal/tenant"
)

// race runs n creates of spec for the tenant in ctx at once and returns what each answered.
func race(ctx context.Context, m *Manager, n int, spec sandbox.Spec) ([]api.Sandbox, []error) {
	sbs, errs := make([]api.Sandbox, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			sbs[i], errs[i] = m.Create(ctx, spec)
		})
	}
	close(start)
	wg.Wait()
	return sbs, errs
}

// TestQuotaRaces: creates racing past a tenant's quota are admitted up to it exactly, cold or
// claimed from a warm pool; the rest are refused with a 429 naming the quota, and leave nothing.
func TestQuotaRaces(t *testing.T) {
	const racers = 16
	quota := func(q api.Quota) Config {
		return Config{Grants: &tenancy.Grants{Quotas: map[string]api.Quota{"t1": q}}}
	}
	for _, c := range []struct {
		name  string
		cfg   Config
		spec  sandbox.Spec
		pool  bool // a warm pool of racers sandboxes of spec's shape is full first
		want  int
		field string
	}{
		{"maxSandboxes", Config{MaxSandboxesPerTenant: 3}, sandbox.Spec{}, false, 3, "quota.maxSandboxes"},
		{"maxSandboxes of the grants", quota(api.Quota{MaxSandboxes: 5}), sandbox.Spec{}, false, 5, "quota.maxSandboxes"},
		{"maxMemoryMb", quota(api.Quota{MaxMemoryMB: 1000}), sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 256}}, false, 3, "quota.maxMemoryMb"},
		{"maxDiskMb", quota(api.Quota{MaxDiskMB: 2048}), sandbox.Spec{Resources: sandbox.Resources{DiskMB: 512}}, false, 4, "quota.maxDiskMb"},
		{"claims from a pool", Config{MaxSandboxesPerTenant: 3}, sandbox.Spec{}, true, 3, "quota.maxSandboxes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, f := openStore(t), drivertest.NewFake()
			m := testManagerWith(t, st, f, c.cfg)
			if c.pool {
				p := api.Pool{Name: "warm", Spec: c.spec, Size: racers, RefillPerSecond: 1000}
				if err := m.StartPools(context.Background(), []api.Pool{p}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the pool full", func() bool { return m.Pools()[0].Ready == racers })
			}
			ctx := tenant.With(context.Background(), "t1")
			sbs, errs := race(ctx, m, racers, c.spec)
			admitted := map[string]bool{}
			for i, err := range errs {
				if err == nil {
					admitted[sbs[i].ID] = true
					continue
				}
				if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != c.field || !errors.Is(err, errdefs.ErrQuota) {
					t.Errorf("refused with %v, want a quota error naming %s", err, c.field)
				}
			}
			if len(admitted) != c.want {
				t.Errorf("%d of %d creates admitted (%d distinct), want %d", racers-countErrs(errs), racers, len(admitted), c.want)
			}
			if u := m.Tenants(ctx, nil)[0].Usage; u.Sandboxes != c.want {
				t.Errorf("usage %+v, want %d sandboxes", u, c.want)
			}
			list, err := m.List(ctx, ListOptions{})
			if err != nil || len(list) != c.want {
				t.Errorf("the tenant has %d sandboxes recorded (%v), want %d", len(list), err, c.want)
			}
			if c.pool {
				if s := m.Pools()[0]; s.Claims != int64(c.want) {
					t.Errorf("the pool counts %d claims, want %d (a refused claim is given back)", s.Claims, c.want)
				}
				for id := range admitted {
					if n := f.Claims(id); n != 1 {
						t.Errorf("sandbox %s claimed %d times", id, n)
					}
				}
			}
		})
	}
}

func countErrs(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}
