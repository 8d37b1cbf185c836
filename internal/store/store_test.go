package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as the process it kills.
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	goleak.VerifyTestMain(m)
}

// openTest opens a new database in a temporary directory and closes it when the test ends.
func openTest(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "airlock.db")
	s, err := Open(context.Background(), path, opts, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []string{"", SyncNormal, SyncFull} {
		t.Run("sync="+sync, func(t *testing.T) {
			s, path := openTest(t, Options{Sync: sync})
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("database file: mode %v, err %v; want 0600", fi.Mode().Perm(), err)
			}
			if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("database dir: mode %v, err %v; want 0700", fi.Mode().Perm(), err)
			}
			want := map[string]string{
				"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000",
				"synchronous": map[string]string{"": "1", SyncNormal: "1", SyncFull: "2"}[sync],
			}
			for pragma, v := range want {
				var got string
				if err := s.write.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != v {
					t.Errorf("PRAGMA %s = %q, %v; want %q", pragma, got, err, v)
				}
			}
			var version int
			if err := s.read.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil ||
				version != len(migrations) {
				t.Errorf("schema version %d, %v; want %d", version, err, len(migrations))
			}
		})
	}
}

func TestOpenInvalidSync(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "db"), Options{Sync: "off"}, nil)
	if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != "sync" {
		t.Fatalf("Open(sync=off) = %v; want a FieldError for sync", err)
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InsertSandbox(ctx, Sandbox{ID: "sb1", Tenant: "a", Status: api.StatusReady}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening applies nothing and keeps the data.
	s, err = Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sandbox(ctx, "", "sb1"); err != nil {
		t.Errorf("after reopen: %v", err)
	}
	// A database from a newer airlock is refused, not damaged.
	if _, err := s.write.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(ctx, path, Options{}, nil); err == nil {
		s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
}

// TestSharedFile is the daemon and `airlock keys create` on one database at once: two Stores,
// each with its own writer, must both succeed.
func TestSharedFile(t *testing.T) {
	ctx := context.Background()
	daemon, path := openTest(t, Options{})
	cli, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := daemon.InsertSandbox(ctx, Sandbox{ID: "sb", Tenant: "a", Status: api.StatusRunning}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 200 {
		wg.Go(func() {
			e := api.Execution{ID: fmt.Sprintf("ex%d", i), SandboxID: "sb", Command: []string{"true"}}
			if err := daemon.StartExec(ctx, e); err != nil {
				errs <- err
				return
			}
			errs <- daemon.FinishExec(ctx, e.ID, api.ExecResult{ExecutionID: e.ID}, time.Now())
		})
		wg.Go(func() {
			_, _, err := cli.CreateKey(ctx, "tenant-a")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	keys, err := daemon.Keys(ctx)
	if err != nil || len(keys) != 200 {
		t.Errorf("daemon sees %d keys, %v; want 200", len(keys), err)
	}
}
