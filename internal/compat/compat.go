// Package compat is the translation of seed 002's /api/sandbox surface (docs/api.md#http-api)
// to and from the /api/v1 types: a create request to a spec, a run to an exec, a sandbox and a
// run to the bare snake_case objects the surface answers, field paths to its spelling. It holds
// no mechanism: the daemon (internal/server) and the cluster's front API (internal/kube/front)
// each carry the requests out, and answer through it the same objects.
package compat

import (
	"errors"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Prefix starts every route of the surface; an unknown one answers its error shape too.
const Prefix = "/api/sandbox/"

// Spec translates a create request. An empty mode leaves the level to the daemon's default
// (container unless the operator configured another).
func Spec(req api.CompatCreateRequest) (api.Spec, error) {
	spec := api.Spec{AgentID: req.AgentID, Image: req.Config.Image}
	switch req.Mode {
	case "":
	case sandbox.LevelContainer, sandbox.LevelWasm, sandbox.LevelProcess:
		spec.Isolation = req.Mode
	default:
		return spec, errdefs.Invalid("mode", "must be container or wasm (got %q)", req.Mode)
	}
	fs := req.Config.Filesystem
	spec.Filesystem = api.Filesystem{ReadOnly: fs.ReadOnly, ReadWrite: fs.ReadWrite, Blocked: fs.Blocked}
	n := req.Config.Network
	spec.Network.AllowedDomains = n.Allow
	switch {
	case n.BlockOutbound != nil && *n.BlockOutbound && len(n.Allow) == 0:
		spec.Network.EgressPolicy = sandbox.EgressNone
	case len(n.Allow) > 0:
		spec.Network.EgressPolicy = sandbox.EgressRestricted
	case n.BlockOutbound != nil && !*n.BlockOutbound:
		spec.Network.EgressPolicy = sandbox.EgressOpen
	}
	res := req.Config.Resources
	spec.Resources.CPU = res.CPU
	if res.Memory != "" {
		mib, err := sandbox.ParseMiB(res.Memory)
		if err != nil {
			return spec, errdefs.Invalid("config.resources.memory", "%v", err)
		}
		spec.Resources.MemoryMB = mib
	}
	if res.Timeout < 0 || res.Timeout > api.CompatMaxTimeout {
		return spec, errdefs.Invalid("config.resources.timeout", "must be between 1 and %d seconds (got %d)", api.CompatMaxTimeout, res.Timeout)
	}
	spec.Timeout.MaxDurationSeconds = res.Timeout
	return spec, nil
}

// fields are the API's field paths as this surface names them, longest first.
var fields = []struct{ from, to string }{
	{"filesystem.readOnly", "config.filesystem.read_only"},
	{"filesystem.readWrite", "config.filesystem.read_write"},
	{"filesystem.blocked", "config.filesystem.blocked"},
	{"network.allowedDomains", "config.network.allow"},
	{"network.egressPolicy", "config.network"},
	{"resources.cpu", "config.resources.cpu"},
	{"resources.memoryMb", "config.resources.memory"},
	{"timeout.maxDurationSeconds", "config.resources.timeout"},
	{"image", "config.image"},
	{"isolation", "mode"},
	{"agentId", "agent_id"},
}

// Error renames the field of a field error to this surface's spelling.
func Error(err error) error {
	fe, ok := errors.AsType[*errdefs.FieldError](err)
	if !ok {
		return err
	}
	for _, f := range fields {
		if rest, ok := strings.CutPrefix(fe.Field, f.from); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			c := *fe
			c.Field = f.to + rest
			return &c
		}
	}
	return err
}

// Status maps docs/daemon.md#lifecycle's seven statuses to seed 002's five.
func Status(status string) string {
	switch status {
	case api.StatusTerminated, api.StatusCompleted:
		return api.CompatStatusDestroyed
	case api.StatusFailed:
		return api.CompatStatusError
	case api.StatusPaused:
		return api.StatusRunning
	}
	return status
}

// Time is a time as seed 002 writes it: RFC 3339, UTC, to the second.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// View is sandbox sb as the surface answers it.
func View(sb api.Sandbox) api.CompatSandbox {
	v := api.CompatSandbox{ID: sb.ID, Status: Status(sb.Status), Mode: sb.Isolation,
		CreatedAt: Time(sb.CreatedAt), ExpiresAt: Time(sb.ExpiresAt)}
	if v.Status == api.CompatStatusDestroyed || v.Status == api.CompatStatusError {
		v.Reason = sb.Reason
	}
	return v
}

// RunRequest checks a run request and turns it into an exec of python3 -c CODE.
func RunRequest(req api.CompatRunRequest) (api.ExecRequest, error) {
	if req.Code == "" {
		return api.ExecRequest{}, errdefs.Invalid("code", "is required")
	}
	if req.Timeout < 0 || req.Timeout > api.CompatRunTimeoutMax {
		return api.ExecRequest{}, errdefs.Invalid("timeout", "must be between 1 and %d seconds (got %d)", api.CompatRunTimeoutMax, req.Timeout)
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = api.CompatRunTimeoutDefault
	}
	return api.ExecRequest{Command: api.Command{"python3", "-c", req.Code}, Timeout: float64(timeout)}, nil
}

// Result is an exec's result as a run's.
func Result(res *api.ExecResult) *api.CompatResult {
	if res == nil {
		return nil
	}
	return &api.CompatResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, DurationMs: res.DurationMs,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, Truncated: res.Truncated}
}

// Run is a recorded exec as a polled run.
func Run(e api.Execution) api.CompatRun {
	run := api.CompatRun{RunID: e.ID, Status: e.Status, Result: Result(e.Result)}
	if e.Status == api.ExecLost {
		run.Status, run.Error = "failed", "the daemon stopped while the code ran"
	}
	return run
}
