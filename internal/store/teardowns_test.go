package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// TestTeardowns: an intent is recorded durably (it survives a reopen, as after a kill), listed
// oldest first, replaced by a later one of the same sandbox, and gone once TornDown.
func TestTeardowns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range []Teardown{
		{SandboxID: "a", LevelID: "a", Isolation: api.LevelProcess, End: api.StatusTerminated, Reason: "terminated", At: t0},
		{SandboxID: "b", LevelID: "b-r2", Isolation: api.LevelContainer, End: api.StatusFailed, Reason: "init_exited", At: t0.Add(1)},
		{SandboxID: "a", LevelID: "a", Isolation: api.LevelProcess, End: api.StatusTerminated, Reason: "idle", At: t0.Add(2)},
	} {
		if err := s.BeginTeardown(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []Teardown{{LevelID: "x", End: api.StatusFailed}, {SandboxID: "x", LevelID: "x", End: api.StatusRunning}} {
		if err := s.BeginTeardown(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("BeginTeardown(%+v) = %v, want invalid", bad, err)
		}
	}
	s.Close()

	s, err = Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Teardowns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SandboxID != "b" || got[0].LevelID != "b-r2" || got[0].Isolation != api.LevelContainer ||
		got[0].End != api.StatusFailed || got[0].Reason != "init_exited" || !got[0].At.Equal(t0.Add(1)) ||
		got[1].SandboxID != "a" || got[1].Reason != "idle" {
		t.Fatalf("teardowns after reopen: %+v", got)
	}
	if td, err := s.TeardownOf(ctx, "a"); err != nil || td.Reason != "idle" {
		t.Errorf("TeardownOf(a) = %+v, %v", td, err)
	}
	if err := s.TornDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.TornDown(ctx, "never"); err != nil {
		t.Errorf("TornDown of no teardown: %v", err)
	}
	if _, err := s.TeardownOf(ctx, "a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("TeardownOf after TornDown: %v", err)
	}
	if got, err := s.Teardowns(ctx); err != nil || len(got) != 1 || got[0].SandboxID != "b" {
		t.Errorf("teardowns after TornDown(a): %+v %v", got, err)
	}
}
