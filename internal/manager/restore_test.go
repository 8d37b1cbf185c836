package manager

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenant"
)

// restoreFixture is a sandbox with a snapshot taken when its file "a" said "before", and "a"
// saying "after" since.
type restoreFixture struct {
	m    *Manager
	f    *drivertest.Fake
	ctx  context.Context
	id   string
	snap string
}

func newRestoreFixture(t *testing.T) restoreFixture {
	t.Helper()
	st, f := openStore(t), drivertest.NewFake()
	x := restoreFixture{m: testManager(t, st, f), f: f, ctx: tenant.With(context.Background(), "t1")}
	sb, err := x.m.Create(x.ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	x.id = sb.ID
	x.exec(t, "put a before")
	sn, err := x.m.Snapshot(x.ctx, x.id, api.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	x.snap = sn.ID
	x.exec(t, "put a after")
	return x
}

func (x restoreFixture) exec(t *testing.T, script string) string {
	t.Helper()
	res, err := x.m.Exec(x.ctx, x.id, api.ExecRequest{Command: api.Shell(script)}, Stream{})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res.Stdout
}

func (x restoreFixture) restore() (api.Sandbox, error) {
	return x.m.Restore(x.ctx, x.id, api.RestoreRequest{SnapshotID: x.snap})
}

// TestRestoreSwap: a restore replaces the level's sandbox with one made from the snapshot, under
// the same id, ready; the replaced one is destroyed.
func TestRestoreSwap(t *testing.T) {
	x := newRestoreFixture(t)
	got, err := x.restore()
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.StatusReady || got.Reason != sandbox.ReasonRestored {
		t.Errorf("restored sandbox is %s (%s), want ready (restored)", got.Status, got.Reason)
	}
	if out := x.exec(t, "files"); out != "a=before\n" {
		t.Errorf("files after the restore: %q", out)
	}
	instance := x.id + "-r1"
	eventually(t, "the replaced instance destroyed", func() bool { return slices.Equal(x.f.Live(), []string{instance}) })
	rec, err := x.m.store.Sandbox(x.ctx, "t1", x.id)
	if err != nil || rec.LevelID() != instance {
		t.Errorf("the record's instance is %q (%v), want %s", rec.LevelID(), err, instance)
	}
	// A second restore replaces the first's instance.
	if _, err := x.restore(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second restore's swap", func() bool { return slices.Equal(x.f.Live(), []string{x.id + "-r2"}) })
}

// TestRestoreFailureKeepsSandbox: a restore the level fails leaves the sandbox as it was (its
// instance, files and status), leaves nothing of the new instance, and refuses nothing after.
func TestRestoreFailureKeepsSandbox(t *testing.T) {
	x := newRestoreFixture(t)
	x.f.OnRestore(func(string) error { return errors.New("the fake host refuses") })
	if _, err := x.restore(); err == nil || !strings.Contains(err.Error(), "refuses") {
		t.Fatalf("restore: %v, want the level's error", err)
	}
	if live := x.f.Live(); !slices.Equal(live, []string{x.id}) {
		t.Errorf("on the host after a failed restore: %q, want only %s", live, x.id)
	}
	if r := x.f.Reclaimed(); !slices.Equal(r, []string{x.id + "-r1"}) {
		t.Errorf("reclaimed %q, want the failed instance", r)
	}
	if retired, err := x.m.store.Retired(x.ctx); err != nil || len(retired) != 0 {
		t.Errorf("instances left to reclaim: %+v %v", retired, err)
	}
	if got, err := x.m.Get(x.ctx, x.id); err != nil || got.Status != api.StatusRunning {
		t.Errorf("after a failed restore: %s %v, want running", got.Status, err)
	}
	if out := x.exec(t, "files"); out != "a=after\n" {
		t.Errorf("files after a failed restore: %q", out)
	}
	x.f.OnRestore(nil)
	if _, err := x.restore(); err != nil {
		t.Fatalf("restore after a failed one: %v", err)
	}
	if out := x.exec(t, "files"); out != "a=before\n" {
		t.Errorf("files after the restore: %q", out)
	}
}

// TestRestoreRefusesOperations: while a restore runs, execs and file sessions are refused with a
// conflict (they would run in the instance being replaced); a restore is refused while an exec
// runs; a terminate meanwhile wins, and the restore's instance is not left behind.
func TestRestoreRefusesOperations(t *testing.T) {
	x := newRestoreFixture(t)
	entered, hold := make(chan struct{}), make(chan struct{})
	x.f.OnRestore(func(string) error {
		close(entered)
		<-hold
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := x.restore()
		done <- err
	}()
	<-entered
	if _, err := x.m.Exec(x.ctx, x.id, api.ExecRequest{Command: api.Shell("files")}, Stream{}); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "restored") {
		t.Errorf("exec during a restore: %v, want a conflict", err)
	}
	if fs, err := x.m.Files(x.ctx, x.id); !errors.Is(err, errdefs.ErrConflict) {
		if fs != nil {
			fs.Close()
		}
		t.Errorf("files during a restore: %v, want a conflict", err)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := x.exec(t, "files"); out != "a=before\n" {
		t.Errorf("files after the restore: %q", out)
	}

	// A restore while an exec runs is refused.
	x.f.OnRestore(nil)
	execDone := make(chan error, 1)
	go func() {
		_, err := x.m.Exec(x.ctx, x.id, api.ExecRequest{Command: api.Shell("sleep 300ms")}, Stream{})
		execDone <- err
	}()
	b := x.box(t)
	eventually(t, "the exec under way", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.busy > 0
	})
	if _, err := x.restore(); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "in flight") {
		t.Errorf("restore during an exec: %v, want a conflict", err)
	}
	if err := <-execDone; err != nil {
		t.Fatal(err)
	}

	// A terminate during a restore: the sandbox ends, the restore fails, nothing is left.
	entered, hold = make(chan struct{}), make(chan struct{})
	x.f.OnRestore(func(string) error {
		close(entered)
		<-hold
		return nil
	})
	go func() {
		_, err := x.restore()
		done <- err
	}()
	<-entered
	if sb, err := x.m.Terminate(x.ctx, x.id); err != nil || sb.Status != api.StatusTerminated {
		t.Fatalf("terminate during a restore: %s %v", sb.Status, err)
	}
	close(hold)
	if err := <-done; !errors.As(err, new(*sandbox.StateError)) {
		t.Errorf("restore of a sandbox terminated meanwhile: %v, want a state error", err)
	}
	eventually(t, "nothing left on the host", func() bool { return len(x.f.Live()) == 0 })
	if retired, err := x.m.store.Retired(x.ctx); err != nil || len(retired) != 0 {
		t.Errorf("instances left to reclaim: %+v %v", retired, err)
	}
}

// box is the fixture's sandbox in memory.
func (x restoreFixture) box(t *testing.T) *box {
	t.Helper()
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	b, ok := x.m.boxes[x.id]
	if !ok {
		t.Fatalf("sandbox %s is not live", x.id)
	}
	return b
}
