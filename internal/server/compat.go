package server

import (
	"errors"
	"net/http"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/compat"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The compatibility surface of docs/api.md#http-api (seed 002) maps the /api/sandbox routes onto the same
// manager: same validation, grants (config.image must be an approved image), quota (a tenant's
// plan bounds its concurrent sandboxes: free, 3) and records. It answers bare snake_case objects
// (routes' bare flag), errors as {"error": {code, message, field}} with fields named as this
// surface spells them (the translation is package compat's, shared with the cluster's front API).
// An async run is an exec whose record is polled.

func compatCreate(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CompatCreateRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	spec, err := compat.Spec(req)
	if err != nil {
		return nil, err
	}
	sb, err := s.m.Create(syncCtx(r), spec)
	if err != nil {
		return nil, compat.Error(err)
	}
	return compat.View(sb), nil
}

func compatGet(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.m.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return compat.View(sb), nil
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

// compatRun runs Python code: python3 -c CODE. With async the answer is the run's ID at once
// (202) and the result is polled.
func compatRun(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CompatRunRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	ereq, err := compat.RunRequest(req)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if !req.Async {
		res, err := s.m.Exec(syncCtx(r), id, ereq, manager.Stream{})
		if err != nil {
			return nil, err
		}
		return api.CompatRun{RunID: res.ExecutionID, Status: api.ExecDone, Result: compat.Result(&res)}, nil
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
	return compat.Run(e), nil
}
