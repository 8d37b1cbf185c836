package manager

import (
	"context"
	"errors"
	"testing"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenant"
)

// TestCreateWithID: a spec's ID (an airlock node's Pod, made with the ID the front API chose)
// is the sandbox's; an ID in use, live or ended, is refused and harms nothing.
func TestCreateWithID(t *testing.T) {
	f := drivertest.NewFake()
	m := testManager(t, openStore(t), f)
	ctx := tenant.With(context.Background(), "t1")
	const id = "sbx_0123456789abcdef0123"
	sb, err := m.Create(ctx, sandbox.Spec{ID: id})
	if err != nil || sb.ID != id {
		t.Fatalf("create with ID %s: %s, %v", id, sb.ID, err)
	}
	if _, err := m.Create(tenant.With(context.Background(), "t2"), sandbox.Spec{ID: id}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a second create with a live sandbox's ID: %v, want a conflict", err)
	}
	if got, err := m.Get(ctx, id); err != nil || !sandbox.Live(got.Status) {
		t.Errorf("the first sandbox after the refused create: %+v, %v", got.Status, err)
	}
	if _, err := m.Terminate(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, sandbox.Spec{ID: id}); err == nil {
		t.Errorf("a create with an ended sandbox's ID succeeded")
	}
}
