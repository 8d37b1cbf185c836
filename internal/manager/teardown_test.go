package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// TestReleaseRecordsIntentFirst: while the level destroys a sandbox, its record still says what
// it was and the teardown intent is recorded; after, it is terminated and the intent gone.
func TestReleaseRecordsIntentFirst(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	w := watchDestroys(st, f, nil)
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Fatal(err)
	}
	got, err := m.Terminate(ctx, sb.ID)
	if err != nil || got.Status != api.StatusTerminated {
		t.Fatalf("terminate: %s %v", got.Status, err)
	}
	if seen, want := w.destroys(), []string{"running intent"}; !slices.Equal(seen, want) {
		t.Errorf("at destroy the store said %q, want %q", seen, want)
	}
	if tds, err := st.Teardowns(ctx); err != nil || len(tds) != 0 {
		t.Errorf("teardowns after the end: %+v %v", tds, err)
	}
	var path []string
	for _, tr := range got.Transitions {
		path = append(path, tr.To)
	}
	if want := []string{"provisioning", "ready", "running", "completed", "terminated"}; !slices.Equal(path, want) {
		t.Errorf("transitions %q, want %q", path, want)
	}
	if left := f.Live(); len(left) != 0 {
		t.Errorf("left on the host: %v", left)
	}
}

// TestTerminateTwice: a DELETE while another's teardown is under way answers when the sandbox
// is terminated, not before, and does not destroy it twice.
func TestTerminateTwice(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	hold := make(chan struct{})
	w := watchDestroys(st, f, hold)
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan string, 2)
	terminate := func() {
		got, err := m.Terminate(ctx, sb.ID)
		answers <- got.Status + fmt.Sprint(err)
	}
	go terminate()
	for len(w.destroys()) == 0 {
		time.Sleep(time.Millisecond)
	}
	go terminate()
	select {
	case a := <-answers:
		t.Fatalf("a DELETE answered %q while the destroy was under way", a)
	case <-time.After(100 * time.Millisecond):
	}
	close(hold)
	for range 2 {
		if a := <-answers; a != api.StatusTerminated+"<nil>" {
			t.Errorf("DELETE answered %q", a)
		}
	}
	if d := w.destroys(); len(d) != 1 {
		t.Errorf("destroyed %d times", len(d))
	}
}

// TestRecoverFinishesTeardowns: what a daemon killed mid-teardown left. Every recorded intent is
// finished by the instance's facts, whatever the record says; a live record without one is
// reclaimed and failed; a reclaim that fails keeps its intent, and a retried DELETE finishes it.
func TestRecoverFinishesTeardowns(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	f := drivertest.NewFake()
	f.Put("a", "b-r1", "c", "d", "e")
	f.FailReclaim("d")
	put := func(id, status, instance string, end string) {
		t.Helper()
		rec := store.Sandbox{ID: id, Tenant: "t1", Status: status, Reason: "x", Spec: sandbox.Spec{Isolation: api.LevelProcess}}
		if err := st.InsertSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if end != "" {
			td := store.Teardown{SandboxID: id, LevelID: instance, Isolation: api.LevelProcess, End: end, Reason: sandbox.ReasonIdle}
			if err := st.BeginTeardown(ctx, td); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("a", api.StatusPaused, "a", api.StatusTerminated)        // killed between intent and destroy
	put("b", api.StatusTerminated, "b-r1", api.StatusTerminated) // killed after the end, before the intent was cleared
	put("c", api.StatusRunning, "", "")                          // killed with no teardown under way
	put("d", api.StatusReady, "d", api.StatusTerminated)         // its reclaim fails
	put("e", api.StatusCompleted, "e", api.StatusTerminated)     // killed between completed and terminated
	m := testManager(t, st, f)
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b-r1", "c", "d", "e"}; !sameSet(f.Reclaimed(), want) { // d's tried more than once
		t.Errorf("reclaimed %q, want %q", f.Reclaimed(), want)
	}
	for id, want := range map[string]string{"a": "terminated idle", "b": "terminated x", "c": "failed daemon_restart", "d": "failed daemon_restart", "e": "terminated idle"} {
		rec, err := st.Sandbox(ctx, "", id)
		if got := rec.Status + " " + rec.Reason; err != nil || got != want {
			t.Errorf("sandbox %s after recovery: %q %v, want %q", id, got, err, want)
		}
	}
	if trs, _ := st.Transitions(ctx, "a"); len(trs) != 3 || trs[1].To != api.StatusCompleted {
		t.Errorf("transitions of a: %+v", trs)
	}
	tds, err := st.Teardowns(ctx)
	if err != nil || len(tds) != 1 || tds[0].SandboxID != "d" {
		t.Fatalf("teardowns after recovery: %+v %v, want d's only", tds, err)
	}
	if left := f.Live(); !slices.Equal(left, []string{"d"}) {
		t.Errorf("left on the host: %v", left)
	}

	// A retried DELETE finishes the job, and answers only once it is done.
	tctx := tenant.With(ctx, "t1")
	if _, err := m.Terminate(tctx, "d"); err == nil {
		t.Error("terminate while the reclaim still fails succeeded")
	}
	f.FailReclaim("")
	if sb, err := m.Terminate(tctx, "d"); err != nil || sb.Status != api.StatusTerminated {
		t.Errorf("retried terminate: %s %v", sb.Status, err)
	}
	if _, err := st.TeardownOf(ctx, "d"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("d's intent after the retried terminate: %v", err)
	}
	if left := f.Live(); len(left) != 0 {
		t.Errorf("left on the host: %v", left)
	}
}

// TestRefusedTerminateStaysEndable: a terminate refused because its intent could not be recorded
// leaves the sandbox as it was, and endable: a later end (here the daemon's stop, which destroys
// whether or not the store takes its records) still destroys it.
func TestRefusedTerminateStaysEndable(t *testing.T) {
	st, f := openStore(t), drivertest.NewFake()
	drivers := driver.NewRegistry()
	drivers.Register(f)
	m := New(Config{DefaultIsolation: f.Name()}, drivers, st, slog.New(slog.DiscardHandler)) // closed below
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.Create(ctx, sandbox.Spec{})
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	st.Close() // every write fails from now on
	if _, err := m.Terminate(ctx, sb.ID); !errors.Is(err, errNothingDestroyed) {
		t.Errorf("terminate with no store: %v, want it refused", err)
	}
	if live := f.Live(); !slices.Equal(live, []string{sb.ID}) {
		t.Errorf("a refused terminate destroyed the sandbox: on the host %q", live)
	}
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon's stop hangs after a refused terminate")
	}
	if live := f.Live(); len(live) != 0 {
		t.Errorf("the daemon's stop left %q on the host after a refused terminate", live)
	}
}
