package server

import (
	"net/http"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The compatibility surface of SPEC §6 maps the older /api/sandbox routes onto the same manager:
// same validation, quota (the per-key concurrency limit is the tenant's sandbox quota) and
// records. An async run is an exec whose record is polled.

// compatSpec translates a compatibility create request.
func compatSpec(req api.CompatCreateRequest) (api.Spec, error) {
	spec := api.Spec{AgentID: req.AgentID, Image: req.Config.Image}
	switch req.Mode {
	case "", sandbox.LevelProcess:
		spec.Isolation = sandbox.LevelProcess
	case sandbox.LevelContainer, sandbox.LevelWasm:
		spec.Isolation = req.Mode
	default:
		return spec, errdefs.Invalid("mode", "must be process, container or wasm (got %q)", req.Mode)
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
	spec.Timeout.MaxDurationSeconds = res.Timeout
	return spec, nil
}

func compatView(sb api.Sandbox) api.CompatSandbox {
	return api.CompatSandbox{ID: sb.ID, AgentID: sb.AgentID, Mode: sb.Isolation, Status: sb.Status, CreatedAt: sb.CreatedAt.Format(time.RFC3339Nano)}
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
		return nil, err
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

func compatDelete(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.m.Terminate(syncCtx(r), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return compatView(sb), nil
}

// compatRun runs Python code: python3 -c CODE. With async the answer is the run's ID at once and
// the result is polled.
func compatRun(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CompatRunRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	if req.Code == "" {
		return nil, errdefs.Invalid("code", "is required")
	}
	id := r.PathValue("id")
	ereq := api.ExecRequest{Command: api.Command{"python3", "-c", req.Code}, Timeout: req.Timeout}
	if !req.Async {
		res, err := s.m.Exec(syncCtx(r), id, ereq, manager.Stream{})
		if err != nil {
			return nil, err
		}
		return api.CompatRun{RunID: res.ExecutionID, Status: api.ExecDone, Result: &res}, nil
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
		writeJSON(w, http.StatusAccepted, api.CompatRun{RunID: execID, Status: api.ExecRunning})
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
	run := api.CompatRun{RunID: e.ID, Status: e.Status, Result: e.Result}
	if e.Status == api.ExecLost {
		run.Status, run.Error = "failed", "the daemon stopped while the code ran"
	}
	return run, nil
}
