package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenant"
)

// TestPoolClaims: creates of two tenants racing for a warm pool's sandboxes each get a sandbox of
// their own. None is handed out twice; each claimed one is its claimant's alone, with the
// claimant's environment; those that find the pool empty are made cold.
func TestPoolClaims(t *testing.T) {
	const size, racers = 4, 12
	st, f := openStore(t), drivertest.NewFake()
	m := testManager(t, st, f)
	if err := m.StartPools(context.Background(), []api.Pool{{Name: "warm", Size: size, RefillPerSecond: 1000}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool full", func() bool { return m.Pools()[0].Ready == size })
	pooled := f.Live()

	tenants := []string{"t1", "t2"}
	type answer struct {
		sb  api.Sandbox
		err error
		ten string
	}
	answers := make(chan answer, racers)
	start := make(chan struct{})
	for i := range racers {
		ten := tenants[i%2]
		go func() {
			<-start
			ctx := tenant.With(context.Background(), ten)
			sb, err := m.Create(ctx, sandbox.Spec{Environment: map[string]string{"OWNER": ten}})
			answers <- answer{sb, err, ten}
		}()
	}
	close(start)
	owner := map[string]string{}
	claimed := 0
	for range racers {
		var a answer
		select {
		case a = <-answers:
		case <-time.After(30 * time.Second):
			t.Fatal("a create did not answer within 30 s")
		}
		if a.err != nil {
			t.Errorf("create for %s: %v", a.ten, a.err)
			continue
		}
		if prev, ok := owner[a.sb.ID]; ok {
			t.Errorf("sandbox %s handed to %s and to %s", a.sb.ID, prev, a.ten)
		}
		owner[a.sb.ID] = a.ten
		switch n := f.Claims(a.sb.ID); n {
		case 0: // made cold
		case 1:
			claimed++
		default:
			t.Errorf("sandbox %s claimed %d times", a.sb.ID, n)
		}
	}
	if claimed < size {
		t.Errorf("%d creates claimed from a full pool of %d", claimed, size)
	}
	if s := m.Pools()[0]; s.Claims != int64(claimed) || s.Claims+s.Misses != racers {
		t.Errorf("pool status %+v: want %d claims and %d misses", s, claimed, racers-claimed)
	}
	for _, id := range pooled {
		if _, ok := owner[id]; !ok && f.Claims(id) > 0 {
			t.Errorf("sandbox %s claimed but handed to no create", id)
		}
	}
	for id, ten := range owner {
		ctx := tenant.With(context.Background(), ten)
		res, err := m.Exec(ctx, id, api.ExecRequest{Command: []string{"env"}}, Stream{})
		if err != nil || res.Stdout != "OWNER="+ten+"\n" {
			t.Errorf("exec in %s's sandbox %s: %q %v", ten, id, res.Stdout, err)
		}
		other := tenant.With(context.Background(), tenants[0])
		if ten == tenants[0] {
			other = tenant.With(context.Background(), tenants[1])
		}
		if _, err := m.Get(other, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's sandbox %s seen by the other tenant: %v", ten, id, err)
		}
	}
}

// TestPoolFillsAtItsRate: a pool fills at its refill rate when its level is fast, not at the pace
// of the loop's periodic check: a create that ends frees a slot at once.
func TestPoolFillsAtItsRate(t *testing.T) {
	const size = 16
	st, f := openStore(t), drivertest.NewFake()
	m := testManager(t, st, f)
	start := time.Now()
	if err := m.StartPools(context.Background(), []api.Pool{{Name: "warm", Size: size, RefillPerSecond: 1000}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool full", func() bool { return m.Pools()[0].Ready == size })
	// 16 at 1000 a second take 16 ms; the periodic check (poolCheckInterval) would take seconds.
	if took := time.Since(start); took > poolCheckInterval {
		t.Errorf("a pool of %d at 1000/s over an instant level filled in %v", size, took.Round(time.Millisecond))
	}
}
