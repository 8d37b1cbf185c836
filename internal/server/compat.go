package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The compatibility surface of docs/api.md#http-api (seed 002) maps the /api/sandbox routes onto the same
// manager: same validation, grants (config.image must be an approved image), quota (a tenant's
// plan bounds its concurrent sandboxes: free, 3) and records. It answers bare snake_case objects
// (routes' bare flag), errors as {"error": {code, message, field}} with fields named as this
// surface spells them. An async run is an exec whose record is polled.

// compatPrefix starts every route of the surface; an unknown one answers its error shape too.
const compatPrefix = "/api/sandbox/"

// compatSpec translates a compatibility create request. An empty mode leaves the level to the
// daemon's default (container unless the operator configured another).
func compatSpec(req api.CompatCreateRequest) (api.Spec, error) {
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

// compatFields are the API's field paths as this surface names them, longest first.
var compatFields = []struct{ from, to string }{
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

// compatError renames the field of a field error to this surface's spelling.
func compatError(err error) error {
	fe, ok := errors.AsType[*errdefs.FieldError](err)
	if !ok {
		return err
	}
	for _, f := range compatFields {
		if rest, ok := strings.CutPrefix(fe.Field, f.from); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			c := *fe
			c.Field = f.to + rest
			return &c
		}
	}
	return err
}

// compatStatus maps docs/daemon.md#lifecycle's seven statuses to seed 002's five.
func compatStatus(status string) string {
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

// compatTime is a time as seed 002 writes it: RFC 3339, UTC, to the second.
func compatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func compatView(sb api.Sandbox) api.CompatSandbox {
	v := api.CompatSandbox{ID: sb.ID, Status: compatStatus(sb.Status), Mode: sb.Isolation,
		CreatedAt: compatTime(sb.CreatedAt), ExpiresAt: compatTime(sb.ExpiresAt)}
	if v.Status == api.CompatStatusDestroyed || v.Status == api.CompatStatusError {
		v.Reason = sb.Reason
	}
	return v
}

func compatCreate(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CompatCreateRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	spec, err := compatSpec(req)
	if err != nil {
		return nil, err
	}
	sb, err := s.m.Create(syncCtx(r), spec)
	if err != nil {
		return nil, compatError(err)
	}
	return compatView(sb), nil
}

func compatGet(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.m.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return compatView(sb), nil
}

// compatDelete destroys the sandbox: 204, and GET shows it destroyed. A sandbox that has ended
// already is a 204 as well: the seed's delete leaves it destroyed, as it is.
func compatDelete(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	_, err := s.m.Terminate(syncCtx(r), r.PathValue("id"))
	if se, ok := errors.AsType[*sandbox.StateError](err); ok && !sandbox.Live(se.Status) {
		return nil, nil
	}
	return nil, err
}

// compatRunRequest checks a run request and turns it into an exec of python3 -c CODE.
func compatRunRequest(req api.CompatRunRequest) (api.ExecRequest, error) {
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

func compatResult(res *api.ExecResult) *api.CompatResult {
	if res == nil {
		return nil
	}
	return &api.CompatResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, DurationMs: res.DurationMs,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, Truncated: res.Truncated}
}

// compatRun runs Python code: python3 -c CODE. With async the answer is the run's ID at once
// (202) and the result is polled.
func compatRun(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CompatRunRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	ereq, err := compatRunRequest(req)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if !req.Async {
		res, err := s.m.Exec(syncCtx(r), id, ereq, manager.Stream{})
		if err != nil {
			return nil, err
		}
		return api.CompatRun{RunID: res.ExecutionID, Status: api.ExecDone, Result: compatResult(&res)}, nil
	}
	started := make(chan string, 1)
	failed := make(chan error, 1)
	go func() {
		// Runs to its end whatever the client does; the result is in the exec record.
		_, err := s.m.Exec(syncCtx(r), id, ereq, manager.Stream{Started: func(execID string) { started <- execID }})
		if err != nil {
			failed <- err
		}
	}()
	select {
	case execID := <-started:
		s.writeDeadline(w)
		writeBare(w, http.StatusAccepted, api.CompatRun{RunID: execID, Status: api.ExecRunning})
		return nil, written
	case err := <-failed:
		return nil, err
	}
}

func compatGetRun(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	e, err := s.m.Execution(r.Context(), r.PathValue("id"), r.PathValue("runId"))
	if err != nil {
		return nil, err
	}
	run := api.CompatRun{RunID: e.ID, Status: e.Status, Result: compatResult(e.Result)}
	if e.Status == api.ExecLost {
		run.Status, run.Error = "failed", "the daemon stopped while the code ran"
	}
	return run, nil
}
