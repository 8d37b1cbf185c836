package audit

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/store"
)

func openStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock.db")
	st, err := store.Open(context.Background(), path, store.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// raw opens the database behind the store's back, as someone tampering with it would.
func raw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// write adds n events of sandbox sbx_1 through a Log and writes them.
func write(t *testing.T, st *store.Store, cfg Config, n int) *Log {
	t.Helper()
	l := New(st, cfg, slog.New(slog.DiscardHandler))
	for i := range n {
		l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{Type: api.EventExecExited, SandboxID: "sbx_1", ExecutionID: fmt.Sprintf("exec_%d", i),
			Message: fmt.Sprintf("exit %d", i), Data: map[string]any{"exitCode": i}}})
	}
	l.Flush()
	return l
}

func verify(t *testing.T, st *store.Store) Report {
	t.Helper()
	rep, err := Verify(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestChainWhole(t *testing.T) {
	st, _ := openStore(t)
	write(t, st, Config{}, 2500) // several batches
	rep := verify(t, st)
	if rep.Problem != nil || rep.Events != 2500 || rep.Chain.HeadSeq != 2500 {
		t.Fatalf("report %+v, problem %v", rep, rep.Problem)
	}
	evs, err := st.Events(context.Background(), store.EventFilter{Tenant: "acme", Limit: 10000})
	if err != nil || len(evs) != 2500 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || e.ExecutionID != fmt.Sprintf("exec_%d", i) {
			t.Fatalf("event %d: seq %d exec %s", i, e.Seq, e.ExecutionID)
		}
	}
	// A second writer (a restarted daemon) goes on from the head.
	write(t, st, Config{}, 10)
	if rep := verify(t, st); rep.Problem != nil || rep.Events != 2510 {
		t.Fatalf("after restart: %+v %v", rep, rep.Problem)
	}
}

// TestTamper changes the stored log the ways an attacker could and checks that Verify names the
// first bad event.
func TestTamper(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, db *sql.DB)
		seq    int64
		reason string
	}{
		{"edit body", func(t *testing.T, db *sql.DB) {
			exec(t, db, `UPDATE events SET body = replace(body, 'exit 5', 'exit 0') WHERE seq = 6`)
		}, 6, "edited"},
		{"edit column", func(t *testing.T, db *sql.DB) {
			exec(t, db, `UPDATE events SET execution_id = 'exec_x' WHERE seq = 3`)
		}, 3, "edited"},
		{"edit time", func(t *testing.T, db *sql.DB) { exec(t, db, `UPDATE events SET at = at + 1 WHERE seq = 9`) }, 9, "edited"},
		{"delete one", func(t *testing.T, db *sql.DB) { exec(t, db, `DELETE FROM events WHERE seq = 4`) }, 4, "missing"},
		{"delete several", func(t *testing.T, db *sql.DB) { exec(t, db, `DELETE FROM events WHERE seq BETWEEN 4 AND 7`) }, 4, "events 4 to 7 are missing"},
		{"delete first", func(t *testing.T, db *sql.DB) { exec(t, db, `DELETE FROM events WHERE seq = 1`) }, 1, "missing"},
		{"reorder", func(t *testing.T, db *sql.DB) {
			// Swap events 5 and 6 whole (hashes included), keeping the numbering.
			exec(t, db, `UPDATE events SET seq = -5 WHERE seq = 5`)
			exec(t, db, `UPDATE events SET seq = 5 WHERE seq = 6`)
			exec(t, db, `UPDATE events SET seq = 6 WHERE seq = -5`)
		}, 5, "reordered"},
		{"truncate", func(t *testing.T, db *sql.DB) { exec(t, db, `DELETE FROM events WHERE seq > 17`) }, 18, "cut off"},
		{"truncate all", func(t *testing.T, db *sql.DB) { exec(t, db, `DELETE FROM events`) }, 1, "cut off"},
		{"drop chain record", func(t *testing.T, db *sql.DB) { exec(t, db, `DELETE FROM audit_chain`) }, 1, "chain record is missing"},
		{"append outside", func(t *testing.T, db *sql.DB) {
			exec(t, db, `INSERT INTO events (seq, id, tenant, sandbox_id, execution_id, type, at, body, hash)
				SELECT 21, 'evt_forged', tenant, sandbox_id, execution_id, type, at, body, hash FROM events WHERE seq = 20`)
		}, 21, "added outside"},
		{"rehash after edit", func(t *testing.T, db *sql.DB) {
			// The attacker edits event 8 and recomputes every hash after it, but cannot make the
			// chain record agree without also changing it: caught at the head.
			exec(t, db, `UPDATE events SET body = replace(body, 'exit 7', 'exit 0') WHERE seq = 8`)
			rehash(t, db, 8)
		}, 20, "head hash"},
		{"no hash", func(t *testing.T, db *sql.DB) { exec(t, db, `UPDATE events SET hash = '' WHERE seq = 12`) }, 12, "no hash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, path := openStore(t)
			write(t, st, Config{}, 20)
			if rep := verify(t, st); rep.Problem != nil {
				t.Fatalf("before tampering: %v", rep.Problem)
			}
			tc.tamper(t, raw(t, path))
			rep := verify(t, st)
			if rep.Problem == nil {
				t.Fatalf("tampering not detected: %+v", rep)
			}
			if rep.Problem.Seq != tc.seq || !strings.Contains(rep.Problem.Reason, tc.reason) {
				t.Fatalf("problem %v, want event %d and %q", rep.Problem, tc.seq, tc.reason)
			}
		})
	}
}

// rehash recomputes the stored hashes from event from on, as an attacker without a secret can.
func rehash(t *testing.T, db *sql.DB, from int64) {
	t.Helper()
	var prevHex string
	if err := db.QueryRow(`SELECT hash FROM events WHERE seq = ?`, from-1).Scan(&prevHex); err != nil {
		t.Fatal(err)
	}
	prev, _ := decodeHash(prevHex)
	rows, err := db.Query(`SELECT seq, id, tenant, sandbox_id, execution_id, type, at, body FROM events WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		t.Fatal(err)
	}
	var all []store.EventRow
	for rows.Next() {
		var r store.EventRow
		var body string
		if err := rows.Scan(&r.Seq, &r.ID, &r.Tenant, &r.SandboxID, &r.ExecutionID, &r.Type, &r.At, &body); err != nil {
			t.Fatal(err)
		}
		r.Body = []byte(body)
		all = append(all, r)
	}
	rows.Close()
	for _, r := range all {
		prev = Hash(prev, r)
		exec(t, db, `UPDATE events SET hash = ? WHERE seq = ?`, fmt.Sprintf("%x", prev), r.Seq)
	}
}

// TestRecoveredDamageStaysVisible: a daemon started on a cut-off log goes on writing, and the
// damage it found stays in the chain for Verify to report.
func TestRecoveredDamageStaysVisible(t *testing.T) {
	st, path := openStore(t)
	write(t, st, Config{}, 10)
	exec(t, raw(t, path), `DELETE FROM events WHERE seq > 7`)
	write(t, st, Config{}, 5) // a restarted daemon
	rep := verify(t, st)
	if rep.Problem == nil || rep.Problem.Seq != 8 || !strings.Contains(rep.Problem.Reason, "events 8 to 10 are missing") {
		t.Fatalf("problem %v", rep.Problem)
	}
	evs, _ := st.Events(context.Background(), store.EventFilter{SandboxID: "", Tenant: "acme", Limit: 100})
	if len(evs) != 12 {
		t.Fatalf("%d events of acme", len(evs))
	}
}

func TestRetention(t *testing.T) {
	t.Run("maxEvents", func(t *testing.T) {
		st, _ := openStore(t)
		l := write(t, st, Config{MaxEvents: 30}, 100)
		n, err := l.Prune(context.Background(), time.Now())
		if err != nil || n != 70 {
			t.Fatalf("pruned %d, %v", n, err)
		}
		l.Flush() // the audit.pruned event
		rep := verify(t, st)
		if rep.Problem != nil || rep.Chain.AnchorSeq != 70 || rep.Events != 31 {
			t.Fatalf("%+v %v", rep, rep.Problem)
		}
		last, _, _ := st.LastEvent(context.Background())
		if last.Type != EventPruned || !strings.Contains(string(last.Body), `"throughSeq":70`) {
			t.Fatalf("last event %s %s", last.Type, last.Body)
		}
		// The audit.pruned event made the log one longer than the cap: the next pass removes one.
		if n, err := l.Prune(context.Background(), time.Now()); err != nil || n != 1 {
			t.Fatalf("second prune: %d %v", n, err)
		}
	})
	t.Run("age", func(t *testing.T) {
		st, _ := openStore(t)
		l := New(st, Config{Retention: time.Hour}, slog.New(slog.DiscardHandler))
		now := time.Now()
		for i := range 10 {
			at := now.Add(-2 * time.Hour)
			if i >= 6 {
				at = now.Add(-time.Minute)
			}
			l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{Type: "sandbox.status", SandboxID: "sbx_1", Time: at}})
		}
		l.Flush()
		if n, err := l.Prune(context.Background(), now); err != nil || n != 6 {
			t.Fatalf("pruned %d, %v", n, err)
		}
		l.Flush()
		if rep := verify(t, st); rep.Problem != nil || rep.Chain.AnchorSeq != 6 || rep.Events != 5 {
			t.Fatalf("%+v %v", rep, rep.Problem)
		}
	})
}

// TestUnhashedLog: events written before the chain existed (schema 4) are chained on first use.
func TestUnhashedLog(t *testing.T) {
	st, path := openStore(t)
	db := raw(t, path)
	for i := 1; i <= 5; i++ {
		exec(t, db, `INSERT INTO events (seq, id, tenant, sandbox_id, execution_id, type, at, body) VALUES (?, ?, 'acme', 'sbx_1', '', 'network.dns', ?, ?)`,
			i, fmt.Sprintf("evt_%d", i), int64(i)*1e9, fmt.Sprintf(`{"id":"evt_%d","type":"network.dns","time":"%s","sandboxId":"sbx_1"}`, i, time.Unix(int64(i), 0).UTC().Format(time.RFC3339Nano)))
	}
	write(t, st, Config{}, 3)
	if rep := verify(t, st); rep.Problem != nil || rep.Events != 8 {
		t.Fatalf("%+v %v", rep, rep.Problem)
	}
}

type recorder struct {
	mu  sync.Mutex
	evs []store.TenantEvent
}

func (r *recorder) Publish(evs []store.TenantEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, evs...)
	r.mu.Unlock()
}

func TestSinksAndFollowers(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprint("disabled=", disabled), func(t *testing.T) {
			st, _ := openStore(t)
			rec := &recorder{}
			l := New(st, Config{Disabled: disabled, Sinks: []Sink{rec}}, slog.New(slog.DiscardHandler))
			changed := l.Changed()
			l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{Type: "a"}})
			l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{Type: "b"}})
			select {
			case <-changed:
				t.Fatal("changed before anything was written")
			default:
			}
			l.Flush()
			select {
			case <-changed:
			default:
				t.Fatal("followers not woken")
			}
			if len(rec.evs) != 2 || rec.evs[0].Type != "a" || rec.evs[1].Type != "b" || rec.evs[0].ID == "" {
				t.Fatalf("sink got %+v", rec.evs)
			}
			n, _ := st.EventCount(context.Background())
			if disabled && (n != 0 || rec.evs[1].Seq != 0) || !disabled && (n != 2 || rec.evs[1].Seq != 2) {
				t.Fatalf("disabled %v: %d stored, seq %d", disabled, n, rec.evs[1].Seq)
			}
		})
	}
}

// TestRun: the writer writes within its interval and on stop.
func TestRun(t *testing.T) {
	st, _ := openStore(t)
	l := New(st, Config{FlushEvery: 10 * time.Millisecond}, slog.New(slog.DiscardHandler))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { l.Run(stop); close(done) }()
	changed := l.Changed()
	l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{Type: "a"}})
	select {
	case <-changed:
	case <-time.After(2 * time.Second):
		t.Fatal("not written within the interval")
	}
	l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{Type: "b"}})
	close(stop)
	<-done
	if n, _ := st.EventCount(context.Background()); n != 2 {
		t.Fatalf("%d stored after stop", n)
	}
}

// TestDuplicateID: an event whose ID is already in the log is written on the next try under a
// new ID, and the log does not jam.
func TestDuplicateID(t *testing.T) {
	st, _ := openStore(t)
	l := New(st, Config{}, slog.New(slog.DiscardHandler))
	l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{ID: "evt_same", Type: "a"}})
	l.Flush()
	l.Add(store.TenantEvent{Tenant: "acme", Event: api.Event{ID: "evt_same", Type: "b"}})
	l.Flush() // refused by the unique index, requeued with a new ID
	l.Flush()
	if n, _ := st.EventCount(context.Background()); n != 2 {
		t.Fatalf("%d events stored", n)
	}
	if rep := verify(t, st); rep.Problem != nil {
		t.Fatal(rep.Problem)
	}
}
