package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/airlockrun/airlock/api"
)

// A snapshot is its tenant's and outlives the sandbox it was taken of: it is listed, read and
// deleted by its own ID (snap_...), and goes only when it is deleted.

func snapshotPath(id string) string { return "/api/v1/snapshots/" + url.PathEscape(id) }

// Snapshot saves sandbox id's state and returns the snapshot. The zero request is valid: the
// snapshot is then named by its ID, with no description.
func (c *Client) Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error) {
	var s api.Snapshot
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/snapshots"), json: req}, &s)
	return s, err
}

// Snapshots lists the snapshots of sandbox sandboxID, newest first; with sandboxID "", every
// snapshot of the caller's tenant, those of ended sandboxes included.
func (c *Client) Snapshots(ctx context.Context, sandboxID string) ([]api.Snapshot, error) {
	path := "/api/v1/snapshots"
	if sandboxID != "" {
		path = sandboxPath(sandboxID, "/snapshots")
	}
	var ss []api.Snapshot
	err := c.call(ctx, request{method: http.MethodGet, path: path}, &ss)
	return ss, err
}

// GetSnapshot returns one snapshot; an unknown one, or another tenant's, is ErrNotFound.
func (c *Client) GetSnapshot(ctx context.Context, snapshotID string) (api.Snapshot, error) {
	var s api.Snapshot
	err := c.call(ctx, request{method: http.MethodGet, path: snapshotPath(snapshotID)}, &s)
	return s, err
}

// DeleteSnapshot deletes a snapshot and returns it as it was.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) (api.Snapshot, error) {
	var s api.Snapshot
	err := c.call(ctx, request{method: http.MethodDelete, path: snapshotPath(snapshotID)}, &s)
	return s, err
}

// Restore puts sandbox id back in the state of snapshot snapshotID and returns seed 000's
// answer: State "ready", RestoredFrom, RestoredAt, and the sandbox as it now is (embedded). The
// snapshot must be of the sandbox's level, runtime, image, rootfs, template and user.
func (c *Client) Restore(ctx context.Context, id, snapshotID string) (api.Restore, error) {
	var res api.Restore
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/restore"), json: api.RestoreRequest{SnapshotID: snapshotID}}, &res)
	return res, err
}

// Fork snapshots sandbox id and starts req.Count new sandboxes (one for the zero request) from
// that snapshot, which is kept until it is deleted. It returns the snapshot and the sandboxes.
func (c *Client) Fork(ctx context.Context, id string, req api.ForkRequest) (api.Fork, error) {
	var f api.Fork
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/fork"), json: req}, &f)
	return f, err
}
