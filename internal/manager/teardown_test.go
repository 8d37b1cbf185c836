package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// hostLevel is a "process" level whose sandboxes are names on a fake host: Create adds one,
// Destroy and Reclaim remove it. Destroy checks what the store says at that moment.
type hostLevel struct {
	st *store.Store

	mu        sync.Mutex // guards the fields below
	host      map[string]bool
	reclaimed []string
	failOn    string        // Reclaim of this instance fails
	seen      []string      // at each Destroy: the record's status, and "intent" if one was recorded
	hold      chan struct{} // when set, Destroy waits for it to close
	output    string        // what every exec writes to its stdout
}

var (
	_ driver.Driver    = (*hostLevel)(nil)
	_ driver.Reclaimer = (*hostLevel)(nil)
)

func (h *hostLevel) Name() string { return sandbox.LevelProcess }

func (h *hostLevel) Capabilities() driver.Capabilities {
	return driver.Capabilities{Level: sandbox.LevelProcess, Available: true}
}

func (h *hostLevel) Create(_ context.Context, id string, _ sandbox.Spec) (driver.Sandbox, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.host[id] = true
	return &hostSandbox{h: h, id: id}, nil
}

func (h *hostLevel) Reclaim(_ context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reclaimed = append(h.reclaimed, id)
	if id == h.failOn {
		return errors.New("the host refuses")
	}
	delete(h.host, id)
	return nil
}

func (h *hostLevel) left() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id := range h.host {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// destroys returns what the store said at each Destroy so far.
func (h *hostLevel) destroys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

type hostSandbox struct {
	h  *hostLevel
	id string
}

func (s *hostSandbox) ID() string { return s.id }

func (s *hostSandbox) Exec(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return sandbox.ExecResult{Stdout: s.h.output}, nil
}

func (s *hostSandbox) Destroy(ctx context.Context) error {
	rec, err := s.h.st.Sandbox(ctx, "", s.id)
	seen := rec.Status
	if err != nil {
		seen = err.Error()
	}
	if _, err := s.h.st.TeardownOf(ctx, s.id); err == nil {
		seen += " intent"
	}
	s.h.mu.Lock()
	s.h.seen = append(s.h.seen, seen)
	hold := s.h.hold
	s.h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	delete(s.h.host, s.id)
	return nil
}

func testManager(t *testing.T, st *store.Store, h *hostLevel) *Manager {
	t.Helper()
	return testManagerWith(t, st, h, Config{})
}

func testManagerWith(t *testing.T, st *store.Store, h *hostLevel, cfg Config) *Manager {
	t.Helper()
	drivers := driver.NewRegistry()
	drivers.Register(h)
	if cfg.DefaultIsolation == "" {
		cfg.DefaultIsolation = h.Name() // the tests' creates name no level
	}
	m := New(cfg, drivers, st, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	return m
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "airlock.db"), store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestReleaseRecordsIntentFirst: while the level destroys a sandbox, its record still says what
// it was and the teardown intent is recorded; after, it is terminated and the intent gone.
func TestReleaseRecordsIntentFirst(t *testing.T) {
	st := openStore(t)
	h := &hostLevel{st: st, host: map[string]bool{}}
	m := testManager(t, st, h)
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
	if want := []string{"running intent"}; !slices.Equal(h.seen, want) {
		t.Errorf("at destroy the store said %q, want %q", h.seen, want)
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
	if left := h.left(); len(left) != 0 {
		t.Errorf("left on the host: %v", left)
	}
}

// TestTerminateTwice: a DELETE while another's teardown is under way answers when the sandbox
// is terminated, not before, and does not destroy it twice.
func TestTerminateTwice(t *testing.T) {
	st := openStore(t)
	h := &hostLevel{st: st, host: map[string]bool{}, hold: make(chan struct{})}
	m := testManager(t, st, h)
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
	for len(h.destroys()) == 0 {
		time.Sleep(time.Millisecond)
	}
	go terminate()
	select {
	case a := <-answers:
		t.Fatalf("a DELETE answered %q while the destroy was under way", a)
	case <-time.After(100 * time.Millisecond):
	}
	close(h.hold)
	for range 2 {
		if a := <-answers; a != api.StatusTerminated+"<nil>" {
			t.Errorf("DELETE answered %q", a)
		}
	}
	if d := h.destroys(); len(d) != 1 {
		t.Errorf("destroyed %d times", len(d))
	}
}

// TestRecoverFinishesTeardowns: what a daemon killed mid-teardown left. Every recorded intent is
// finished by the instance's facts, whatever the record says; a live record without one is
// reclaimed and failed; a reclaim that fails keeps its intent, and a retried DELETE finishes it.
func TestRecoverFinishesTeardowns(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	h := &hostLevel{st: st, host: map[string]bool{"a": true, "b-r1": true, "c": true, "d": true, "e": true}, failOn: "d"}
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
	m := testManager(t, st, h)
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b-r1", "c", "d", "e"}; !sameSet(h.reclaimed, want) { // d's tried more than once
		t.Errorf("reclaimed %q, want %q", h.reclaimed, want)
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
	if left := h.left(); !slices.Equal(left, []string{"d"}) {
		t.Errorf("left on the host: %v", left)
	}

	// A retried DELETE finishes the job, and answers only once it is done.
	tctx := tenant.With(ctx, "t1")
	if _, err := m.Terminate(tctx, "d"); err == nil {
		t.Error("terminate while the reclaim still fails succeeded")
	}
	h.mu.Lock()
	h.failOn = ""
	h.mu.Unlock()
	if sb, err := m.Terminate(tctx, "d"); err != nil || sb.Status != api.StatusTerminated {
		t.Errorf("retried terminate: %s %v", sb.Status, err)
	}
	if _, err := st.TeardownOf(ctx, "d"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("d's intent after the retried terminate: %v", err)
	}
	if left := h.left(); len(left) != 0 {
		t.Errorf("left on the host: %v", left)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
