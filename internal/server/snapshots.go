package server

// The snapshot API (docs/api.md#http-api). A snapshot belongs to its sandbox's tenant and outlives the sandbox,
// so it has paths of its own beside the sandbox's: those under /sandboxes/{id} act on a sandbox,
// those under /snapshots on snapshots, whatever became of the sandbox they were taken of.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

func snapshotSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.SnapshotRequest
	if err := decodeOptional(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	return s.m.Snapshot(syncCtx(r), r.PathValue("id"), req)
}

// listSandboxSnapshots lists one sandbox's snapshots. The mux never matches {id} to an empty
// segment, so this never asks the manager for all the tenant's.
func listSandboxSnapshots(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Snapshots(r.Context(), r.PathValue("id"))
}

func restoreSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.RestoreRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	sb, err := s.m.Restore(syncCtx(r), r.PathValue("id"), req)
	if err != nil {
		return nil, err
	}
	// Seed 000's answer: {id, state, restoredFrom, restoredAt}, the sandbox's fields beside.
	return api.Restore{State: sb.Status, RestoredFrom: req.SnapshotID, RestoredAt: time.Now().UTC(), Sandbox: sb}, nil
}

func forkSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ForkRequest
	if err := decodeOptional(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	return s.m.Fork(syncCtx(r), r.PathValue("id"), req)
}

func listSnapshots(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Snapshots(r.Context(), "")
}

func getSnapshot(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.GetSnapshot(r.Context(), r.PathValue("snapshotId"))
}

func deleteSnapshot(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.DeleteSnapshot(syncCtx(r), r.PathValue("snapshotId"))
}

// decodeOptional is decode for a body that may be left out because every field of v has a
// default: an empty body, or one of only white space, leaves v as it is; any other is decoded as
// strictly as decode does it.
func decodeOptional(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return fmt.Errorf("request body is larger than %d bytes: %w", limit, errdefs.ErrTooLarge)
		}
		return errdefs.Invalid("body", "cannot read the body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeJSON(body, v)
}
