package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// TestStoreFull fills the database to its max_page_count (SQLite's SQLITE_FULL, as a full disk
// gives it): writes fail with ErrStoreFull naming the cause, the store is degraded (and says so
// when it changes), reads work, the writer connection is not left in a transaction; with room
// again a probe clears it and writes work.
func TestStoreFull(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	seedSandboxes(t, s)
	var mu sync.Mutex
	var changes []Health
	s.OnHealth(func(h Health) {
		mu.Lock()
		changes = append(changes, h)
		mu.Unlock()
	})
	var pages int
	if err := s.write.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.DB.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.Itoa(pages+2)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	var full error
	for i := range 20 {
		id := "f" + strconv.Itoa(i)
		if err := s.StartExec(ctx, api.Execution{ID: id, SandboxID: "a1", Command: []string{"sh"}, StartedAt: t0}); err != nil {
			full = err
			break
		}
		if err := s.FinishExec(ctx, id, api.ExecResult{ExecutionID: id, Stdout: big}, t0); err != nil {
			full = err
			break
		}
	}
	if !errors.Is(full, errdefs.ErrStoreFull) || !strings.Contains(full.Error(), "SQLITE_FULL") {
		t.Fatalf("writes past max_page_count: %v; want ErrStoreFull naming SQLITE_FULL", full)
	}
	if h := s.Health(); !h.Degraded || h.Reason == "" || h.Since.IsZero() {
		t.Fatalf("health after a full write: %+v", h)
	}
	// A transaction refused (a transition) leaves no transaction open behind it. (Under
	// max_page_count a write that needs no new page still succeeds, and clears the state; on a
	// full disk every commit needs room in the WAL.)
	tr := api.Transition{From: api.StatusRunning, To: api.StatusPaused, Reason: "paused", At: time.Now()}
	if err := s.Transition(ctx, "a1", api.StatusRunning, tr); err != nil && !errors.Is(err, errdefs.ErrStoreFull) {
		t.Fatalf("transition on a full store: %v", err)
	}
	if _, err := s.Execs(ctx, "a1", 0); err != nil {
		t.Fatalf("reads on a full store: %v", err)
	}
	if _, err := s.write.DB.ExecContext(ctx, `PRAGMA max_page_count = 1000000`); err != nil {
		t.Fatal(err)
	}
	s.health.lastProbe.Store(0) // no waiting for probeEvery
	if h := s.Probe(ctx); h.Degraded {
		t.Fatalf("probe with room: %+v", h)
	}
	if err := s.StartExec(ctx, api.Execution{ID: "after", SandboxID: "a1", Command: []string{"sh"}}); err != nil {
		t.Fatalf("write after the store has room: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(changes); n%2 != 0 || n == 0 || !changes[0].Degraded || changes[n-1].Degraded {
		t.Errorf("health changes %+v; want degraded, then cleared", changes)
	}
}
