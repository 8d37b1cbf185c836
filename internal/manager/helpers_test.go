package manager

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/store"
)

// The manager's tests run it over drivertest.Fake, a level whose sandboxes are records, and a
// real store in a temporary directory: no root, and fast.

func testManager(t *testing.T, st *store.Store, f *drivertest.Fake) *Manager {
	t.Helper()
	return testManagerWith(t, st, f, Config{})
}

// testManagerWith returns a manager over level f and store st with cfg (its snapshots in a
// temporary directory unless cfg names one), closed when the test ends.
func testManagerWith(t *testing.T, st *store.Store, f *drivertest.Fake, cfg Config) *Manager {
	t.Helper()
	drivers := driver.NewRegistry()
	drivers.Register(f)
	if cfg.SnapshotDir == "" {
		cfg.SnapshotDir = filepath.Join(t.TempDir(), "snapshots")
	}
	if cfg.DefaultIsolation == "" {
		cfg.DefaultIsolation = f.Name() // a create that names no level gets the fake's
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

// destroyWatch records what the store said of a sandbox at each Destroy of the fake level: its
// status, and " intent" when its teardown was recorded.
type destroyWatch struct {
	mu   sync.Mutex // guards seen
	seen []string
}

// watchDestroys watches f's destroys; with hold set, each waits for hold to close.
func watchDestroys(st *store.Store, f *drivertest.Fake, hold chan struct{}) *destroyWatch {
	w := &destroyWatch{}
	f.OnDestroy(func(id string) {
		ctx := context.Background()
		rec, err := st.Sandbox(ctx, "", id)
		seen := rec.Status
		if err != nil {
			seen = err.Error()
		}
		if _, err := st.TeardownOf(ctx, id); err == nil {
			seen += " intent"
		}
		w.mu.Lock()
		w.seen = append(w.seen, seen)
		w.mu.Unlock()
		if hold != nil {
			<-hold
		}
	})
	return w
}

func (w *destroyWatch) destroys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// eventually fails the test unless ok holds within 10 seconds.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
