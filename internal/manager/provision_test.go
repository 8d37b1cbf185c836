package manager

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// holdCreates makes f's creates wait until the returned channel is closed (or their context
// ends), then fail with fail when it is not nil.
func holdCreates(f *drivertest.Fake, fail error) chan struct{} {
	hold := make(chan struct{})
	f.OnCreate(func(ctx context.Context, id string) error {
		select {
		case <-hold:
			return fail
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return hold
}

func statusOf(t *testing.T, m *Manager, ctx context.Context, id string) (string, string) {
	t.Helper()
	sb, err := m.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return sb.Status, sb.Reason
}

// TestCreateAsync: an asynchronous create answers provisioning at once, recorded, counted in the
// quota, while the level makes the sandbox; an exec sent meanwhile waits for it and runs; the
// sandbox then is ready (running after the exec), its transitions recorded in order.
func TestCreateAsync(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	hold := holdCreates(f, nil)
	m := testManagerWith(t, st, f, Config{MaxSandboxesPerTenant: 1})
	ctx := tenant.With(context.Background(), "t1")

	sb, err := m.CreateAsync(ctx, sandbox.Spec{})
	if err != nil || sb.Status != api.StatusProvisioning {
		t.Fatalf("create: %s %v", sb.Status, err)
	}
	if st, _ := statusOf(t, m, ctx, sb.ID); st != api.StatusProvisioning {
		t.Fatalf("polled: %s, want provisioning", st)
	}
	if _, err := m.CreateAsync(ctx, sandbox.Spec{}); !errors.Is(err, errdefs.ErrQuota) {
		t.Errorf("a second create past the quota of 1: %v, want a quota error", err)
	}
	execd := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"true"}}, Stream{})
		execd <- err
	}()
	select {
	case err := <-execd:
		t.Fatalf("the exec returned while the sandbox was provisioning: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(hold)
	if err := <-execd; err != nil {
		t.Fatalf("exec after provisioning: %v", err)
	}
	got, err := m.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, tr := range got.Transitions {
		path = append(path, tr.To)
	}
	if want := []string{"provisioning", "ready", "running"}; !slices.Equal(path, want) {
		t.Errorf("transitions %q, want %q", path, want)
	}
}

// TestCreateWaits: Create answers once the sandbox is ready, and a failure is its error.
func TestCreateWaits(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	hold := holdCreates(f, nil)
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	done := make(chan api.Sandbox, 1)
	go func() {
		sb, err := m.Create(ctx, sandbox.Spec{})
		if err != nil {
			t.Error(err)
		}
		done <- sb
	}()
	select {
	case sb := <-done:
		t.Fatalf("create answered before the level made it: %s", sb.Status)
	case <-time.After(100 * time.Millisecond):
	}
	close(hold)
	if sb := <-done; sb.Status != api.StatusReady {
		t.Errorf("create waited and answered %s, want ready", sb.Status)
	}

	f.OnCreate(func(context.Context, string) error { return errors.New("no such image") })
	if _, err := m.Create(ctx, sandbox.Spec{}); err == nil || !strings.Contains(err.Error(), "no such image") || !errors.Is(err, errdefs.ErrSetup) {
		t.Errorf("a failing create that waits: %v", err)
	}
}

// TestProvisioningFails: a failure after the answer ends the sandbox failed with the level's
// reason, seen by a poller and in its events; an operation that waited for it is refused naming
// it; it holds nothing, and a terminate closes its record.
func TestProvisioningFails(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	hold := holdCreates(f, errors.New("pull image nope:latest: not found"))
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.CreateAsync(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	execd := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"true"}}, Stream{})
		execd <- err
	}()
	time.Sleep(50 * time.Millisecond)
	close(hold)
	if err := <-execd; !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an exec that waited for a failed provisioning: %v", err)
	}
	status, reason := statusOf(t, m, ctx, sb.ID)
	if status != api.StatusFailed || !strings.Contains(reason, "nope:latest: not found") {
		t.Errorf("polled: %s (%s), want failed with the reason", status, reason)
	}
	m.events.Flush()
	page, err := m.store.Events(ctx, store.EventFilter{Tenant: "t1", SandboxID: sb.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var tos []any
	for _, e := range page {
		if e.Type == api.EventSandboxStatus {
			tos = append(tos, e.Data["to"])
		}
	}
	if !slices.Contains(tos, any(api.StatusFailed)) {
		t.Errorf("status events %v: no failed", tos)
	}
	eventually(t, "the failed sandbox let go", func() bool { return m.Live() == 0 })
	if len(f.Live()) != 0 {
		t.Errorf("on the host after a failed provisioning: %v", f.Live())
	}
	// An operation that comes once the sandbox was let go learns why as well.
	if _, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"true"}}, Stream{}); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an exec after the failed provisioning: %v, want a conflict naming why", err)
	}
	if got, err := m.Terminate(ctx, sb.ID); err != nil || got.Status != api.StatusTerminated {
		t.Errorf("terminate a failed sandbox: %s %v", got.Status, err)
	}
}

// TestCloseEndsProvisioning: a stop with provisioning in flight cuts it short: the record ends
// failed with reason daemon_shutdown and nothing is left on the host or live.
func TestCloseEndsProvisioning(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	holdCreates(f, nil) // never released: only the stop ends it
	drivers := driver.NewRegistry()
	drivers.Register(f)
	m := New(Config{DefaultIsolation: f.Name()}, drivers, st, slog.New(slog.DiscardHandler)) // closed below
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.CreateAsync(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		m.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the provisioning in flight")
	}
	rec, err := st.Sandbox(ctx, "t1", sb.ID)
	if err != nil || rec.Status != api.StatusFailed || rec.Reason != sandbox.ReasonDaemonShutdown {
		t.Errorf("after the stop: %s (%s) %v, want failed (daemon_shutdown)", rec.Status, rec.Reason, err)
	}
	if m.Live() != 0 || len(f.Live()) != 0 {
		t.Errorf("left: %d live, on the host %v", m.Live(), f.Live())
	}
}
