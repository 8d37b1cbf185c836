package sandbox

import (
	"errors"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

func TestCanTransition(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{api.StatusProvisioning, api.StatusReady, true},
		{api.StatusProvisioning, api.StatusFailed, true},
		{api.StatusProvisioning, api.StatusRunning, false},
		{api.StatusReady, api.StatusRunning, true},
		{api.StatusReady, api.StatusTerminated, true},
		{api.StatusReady, api.StatusCompleted, false},
		{api.StatusRunning, api.StatusPaused, true},
		{api.StatusPaused, api.StatusRunning, true},
		{api.StatusPaused, api.StatusPaused, false},
		{api.StatusRunning, api.StatusReady, true}, // restored from a snapshot
		{api.StatusPaused, api.StatusReady, true},
		{api.StatusCompleted, api.StatusReady, false},
		{api.StatusRunning, api.StatusTerminated, false}, // through completed
		{api.StatusCompleted, api.StatusTerminated, true},
		{api.StatusFailed, api.StatusTerminated, true},
		{api.StatusTerminated, api.StatusReady, false},
		{api.StatusTerminated, api.StatusFailed, false},
	} {
		if got := CanTransition(c.from, c.to); got != c.ok {
			t.Errorf("%s → %s: %v, want %v", c.from, c.to, got, c.ok)
		}
	}
	// Every non-terminal status can fail; only terminated is final.
	for s := range next {
		if s != api.StatusTerminated && s != api.StatusFailed && s != api.StatusCompleted && !CanTransition(s, api.StatusFailed) {
			t.Errorf("%s cannot fail", s)
		}
	}
}

func TestStateError(t *testing.T) {
	err := error(&StateError{ID: "sbx_1", Status: api.StatusPaused, Op: "exec"})
	if !errors.Is(err, errdefs.ErrConflict) || err.Error() != "sandbox sbx_1 is paused: cannot exec" {
		t.Fatal(err)
	}
}
