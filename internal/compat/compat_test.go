package compat

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// TestStatus: docs/daemon.md#lifecycle's seven statuses as seed 002's five.
func TestStatus(t *testing.T) {
	for from, to := range map[string]string{
		api.StatusProvisioning: "provisioning", api.StatusReady: "ready", api.StatusRunning: "running", api.StatusPaused: "running",
		api.StatusCompleted: "destroyed", api.StatusFailed: "error", api.StatusTerminated: "destroyed",
	} {
		if got := Status(from); got != to {
			t.Errorf("%s: %s, want %s", from, got, to)
		}
	}
}

// TestRunRequest: the run timeout defaults to 30 s and may be at most 600.
func TestRunRequest(t *testing.T) {
	for _, c := range []struct {
		timeout int64
		want    float64
		field   string
	}{{0, 30, ""}, {1, 1, ""}, {600, 600, ""}, {601, 0, "timeout"}, {-1, 0, "timeout"}} {
		req, err := RunRequest(api.CompatRunRequest{Code: "print(1)", Timeout: c.timeout})
		if c.field != "" {
			if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != c.field {
				t.Errorf("timeout %d: %v, want a field error naming %s", c.timeout, err, c.field)
			}
			continue
		}
		if err != nil || req.Timeout != c.want || strings.Join(req.Command, " ") != "python3 -c print(1)" {
			t.Errorf("timeout %d: %+v %v", c.timeout, req, err)
		}
	}
}

// TestError: the API's field paths in this surface's spelling.
func TestError(t *testing.T) {
	for from, to := range map[string]string{
		"filesystem.readOnly[0]": "config.filesystem.read_only[0]", "resources.memoryMb": "config.resources.memory",
		"isolation": "mode", "name": "name",
	} {
		fe, _ := errors.AsType[*errdefs.FieldError](Error(errdefs.Invalid(from, "bad")))
		if fe == nil || fe.Field != to {
			t.Errorf("%s: %+v, want %s", from, fe, to)
		}
	}
}
