package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

func TestExecs(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	seedSandboxes(t, s)

	start := func(id, sandbox string, at time.Time) error {
		return s.StartExec(ctx, api.Execution{ID: id, SandboxID: sandbox, Command: []string{"/bin/sh", "-c", id}, StartedAt: at})
	}
	for i, id := range []string{"e1", "e2", "e3"} {
		if err := start(id, "a1", t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := start("e1", "a1", t0); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate StartExec = %v; want ErrConflict", err)
	}
	if err := start("e9", "nope", t0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("StartExec on unknown sandbox = %v; want ErrNotFound", err)
	}

	res := api.ExecResult{
		ExecutionID: "e1", ExitCode: 3, Stdout: "out\x00\n", Stderr: "err", DurationMs: 12, Truncated: true,
		LimitEvents:   []api.LimitEvent{{Type: "memory", Message: "m", Count: 2, Time: t0.UTC()}},
		ResourceUsage: api.ResourceUsage{PeakMemoryMB: 1.5, CPUTimeMs: 7},
	}
	ended := t0.Add(time.Hour)
	if err := s.FinishExec(ctx, "e1", res, ended); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishExec(ctx, "e1", res, ended); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("second FinishExec = %v; want ErrConflict", err)
	}
	if err := s.FinishExec(ctx, "nope", res, ended); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("FinishExec(unknown) = %v; want ErrNotFound", err)
	}

	got, err := s.Exec(ctx, "a1", "e1")
	if err != nil {
		t.Fatal(err)
	}
	endedUTC := ended.UTC()
	want := api.Execution{
		ID: "e1", SandboxID: "a1", Command: []string{"/bin/sh", "-c", "e1"}, Status: api.ExecDone,
		StartedAt: t0.UTC(), EndedAt: &endedUTC, Result: &res,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Exec =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := s.Exec(ctx, "a2", "e1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Exec from another sandbox = %v; want ErrNotFound", err)
	}

	lists := []struct {
		limit int
		want  []string
	}{{0, []string{"e3", "e2", "e1"}}, {2, []string{"e3", "e2"}}, {-1, []string{"e3", "e2", "e1"}}}
	for _, l := range lists {
		execs, err := s.Execs(ctx, "a1", l.limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range execs {
			got = append(got, e.ID)
		}
		if !reflect.DeepEqual(got, l.want) {
			t.Errorf("Execs(limit %d) = %v; want %v", l.limit, got, l.want)
		}
	}

	// The daemon restarts: the two running execs are lost, the finished one is kept.
	if n, err := s.MarkLost(ctx); err != nil || n != 2 {
		t.Errorf("MarkLost = %d, %v; want 2", n, err)
	}
	if n, err := s.MarkLost(ctx); err != nil || n != 0 {
		t.Errorf("second MarkLost = %d, %v; want 0", n, err)
	}
	for id, status := range map[string]string{"e1": api.ExecDone, "e2": api.ExecLost, "e3": api.ExecLost} {
		if e, err := s.Exec(ctx, "a1", id); err != nil || e.Status != status {
			t.Errorf("exec %s: status %q, %v; want %q", id, e.Status, err, status)
		}
	}
	if err := s.FinishExec(ctx, "e2", res, ended); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("FinishExec of a lost exec = %v; want ErrConflict", err)
	}
}

// TestConcurrentWriters is 100 goroutines creating sandboxes, moving them and running execs at
// once, with readers alongside: no write may fail (SQLITE_BUSY in particular).
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	const workers, execsPerWorker = 100, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			errs <- func() error {
				id := fmt.Sprintf("sb%d", w)
				tenant := fmt.Sprintf("t%d", w%5)
				if err := s.InsertSandbox(ctx, Sandbox{ID: id, Tenant: tenant, Status: api.StatusProvisioning}); err != nil {
					return err
				}
				if err := s.Transition(ctx, id, api.StatusProvisioning, api.Transition{To: api.StatusRunning}); err != nil {
					return err
				}
				for i := range execsPerWorker {
					eid := fmt.Sprintf("%s-ex%d", id, i)
					if err := s.StartExec(ctx, api.Execution{ID: eid, SandboxID: id, Command: []string{"echo"}}); err != nil {
						return err
					}
					if err := s.FinishExec(ctx, eid, api.ExecResult{ExecutionID: eid}, time.Now()); err != nil {
						return err
					}
					if _, err := s.Sandboxes(ctx, Filter{Tenant: tenant, Limit: 10}); err != nil {
						return err
					}
				}
				if w%10 == 0 {
					if _, _, err := s.CreateKey(ctx, tenant); err != nil {
						return err
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	live, err := s.Sandboxes(ctx, Filter{Status: []string{api.StatusProvisioning, api.StatusReady, api.StatusRunning, api.StatusPaused}})
	if err != nil || len(live) != workers {
		t.Errorf("%d live sandboxes, %v; want %d", len(live), err, workers)
	}
	var execs int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM execs WHERE status = 'done'`).Scan(&execs); err != nil ||
		execs != workers*execsPerWorker {
		t.Errorf("%d done execs, %v; want %d", execs, err, workers*execsPerWorker)
	}
}

// BenchmarkExecRecord is the exec hot path: one StartExec and one FinishExec.
func BenchmarkExecRecord(b *testing.B) {
	for _, sync := range []string{SyncNormal, SyncFull} {
		b.Run(sync, func(b *testing.B) {
			ctx := context.Background()
			s, _ := openTest(b, Options{Sync: sync})
			if err := s.InsertSandbox(ctx, Sandbox{ID: "sb", Tenant: "a", Status: api.StatusRunning}); err != nil {
				b.Fatal(err)
			}
			res := api.ExecResult{Stdout: "hello\n", DurationMs: 3, LimitEvents: []api.LimitEvent{}}
			cmd := []string{"/bin/sh", "-c", "echo hello"}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("ex%d", i)
				i++
				if err := s.StartExec(ctx, api.Execution{ID: id, SandboxID: "sb", Command: cmd}); err != nil {
					b.Fatal(err)
				}
				res.ExecutionID = id
				if err := s.FinishExec(ctx, id, res, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDropOutput fills a tenant's exec records and drops their output oldest first: the
// records stay, marked, and another tenant's are untouched.
func TestDropOutput(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	for _, tn := range []string{"a", "b"} {
		if _, _, err := s.CreateKey(ctx, tn); err != nil {
			t.Fatal(err)
		}
		if err := s.InsertSandbox(ctx, Sandbox{ID: "sbx_" + tn, Tenant: tn, Status: api.StatusReady, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	out := strings.Repeat("x", 10000)
	t0 := time.Now()
	for i := range 6 {
		for _, tn := range []string{"a", "b"} {
			id := fmt.Sprintf("exec_%s%d", tn, i)
			if err := s.StartExec(ctx, api.Execution{ID: id, SandboxID: "sbx_" + tn, Command: []string{"x"}, StartedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
			if err := s.FinishExec(ctx, id, api.ExecResult{ExecutionID: id, Stdout: out, Stderr: "e"}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, err := s.OutputBytes(ctx)
	if err != nil || before["a"] < 60000 || before["a"] != before["b"] {
		t.Fatalf("OutputBytes = %v, %v", before, err)
	}
	freed, err := s.DropOutput(ctx, "a", 25000) // three execs' worth
	if err != nil || freed < 25000 || freed > 35000 {
		t.Fatalf("DropOutput = %d, %v", freed, err)
	}
	after, _ := s.OutputBytes(ctx)
	if after["a"] != before["a"]-freed || after["b"] != before["b"] {
		t.Errorf("after: %v (freed %d of %v)", after, freed, before)
	}
	for i := range 6 {
		e, err := s.Exec(ctx, "sbx_a", fmt.Sprintf("exec_a%d", i))
		if err != nil {
			t.Fatal(err)
		}
		dropped := i < 3
		if e.Result.OutputDropped != dropped || (e.Result.Stdout == "") != dropped {
			t.Errorf("exec %d: dropped %v, stdout %d bytes (want dropped %v, oldest first)", i, e.Result.OutputDropped, len(e.Result.Stdout), dropped)
		}
	}
	if freed, err := s.DropOutput(ctx, "a", 1<<30); err != nil || freed < 20000 {
		t.Errorf("drop everything: %d %v", freed, err)
	}
	if freed, err := s.DropOutput(ctx, "a", 1); err != nil || freed != 0 {
		t.Errorf("nothing left to drop: %d %v", freed, err)
	}
}
