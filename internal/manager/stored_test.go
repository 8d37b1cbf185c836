package manager

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenancy"
	"github.com/airlockrun/airlock/internal/tenant"
)

// TestStoredQuota: a tenant whose exec output passes its maxStoredMb has its oldest execs'
// output dropped (the records kept, marked), its newest kept whole, and another tenant's
// untouched; snapshots past the quota are refused.
func TestStoredQuota(t *testing.T) {
	st := openStore(t)
	grants := &tenancy.Grants{Quotas: map[string]api.Quota{"small": {MaxStoredMB: 1}}}
	m := testManagerWith(t, st, drivertest.NewFake(), Config{Grants: grants})
	var otherSandbox string
	for _, ten := range []string{"big", "small"} {
		ctx := tenant.With(context.Background(), ten)
		sb, err := m.Create(ctx, sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		for range 6 { // 1.8 MB of output against a quota of 1 MiB
			res, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"bytes " + strconv.Itoa(300<<10)}}, Stream{})
			if err != nil || len(res.Stdout) != 300<<10 {
				t.Fatalf("exec: %d bytes, %v (the answer has it whole)", len(res.Stdout), err)
			}
		}
		if ten == "big" {
			otherSandbox = sb.ID
		}
		if ten == "small" {
			list, err := m.Execs(ctx, sb.ID) // newest first
			if err != nil || len(list) != 6 {
				t.Fatalf("execs: %d, %v", len(list), err)
			}
			execs := []string{list[5].ID, list[0].ID}
			deadline := time.Now().Add(10 * time.Second)
			for {
				first, err := m.Execution(ctx, sb.ID, execs[0])
				if err == nil && first.Result != nil && first.Result.OutputDropped {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the oldest exec's output was not dropped past the quota: %+v %v", first.Result, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			last, err := m.Execution(ctx, sb.ID, execs[len(execs)-1])
			if err != nil || last.Result == nil || last.Result.OutputDropped || len(last.Result.Stdout) != 300<<10 {
				t.Errorf("the newest exec lost its output: %v", err)
			}
			if ts := m.Tenants(ctx, nil); len(ts) != 1 || ts[0].Usage.StoredMB > 1 {
				t.Errorf("small's usage after the drop: %+v", ts)
			}
		}
	}
	bigCtx := tenant.With(context.Background(), "big")
	list, err := m.Execs(bigCtx, otherSandbox)
	if err != nil || len(list) != 6 {
		t.Fatalf("big's execs: %d, %v", len(list), err)
	}
	for _, e := range list {
		if e.Result == nil || e.Result.OutputDropped {
			t.Errorf("another tenant's output was dropped: %+v", e.Result)
		}
	}
	m.snapshotStored("small", 2<<20)
	if err := m.snapshotRoom("small"); err == nil || !strings.Contains(err.Error(), "maxStoredMb") {
		t.Errorf("a snapshot past the quota: %v", err)
	}
	if err := m.snapshotRoom("big"); err != nil {
		t.Errorf("another tenant's snapshot: %v", err)
	}
}
