package front

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Snapshots through the front (docs/kubernetes.md#snapshots-restore-and-fork). A snapshot is
// kept on the node that took it, so a sandbox made from one is a Pod placed on that node (node
// affinity: the scheduler still counts its capacity), annotated with the snapshot for the node
// to restore instead of create. The front finds a snapshot by asking the live nodes, as the
// tenant: a node answers only for the tenant's own, so another tenant's snapshot is not found.

// snapshotOpFor bounds a snapshot taken on a node (a fork's), and a snapshot's lookup.
const snapshotOpFor = 2 * time.Minute

// findSnapshot is the node holding the caller's snapshot snapID, and the snapshot. field names
// the request's field in the 404 of one no live node has (another tenant's included).
func (f *Front) findSnapshot(ctx context.Context, c caller, snapID, field string) (string, api.Snapshot, error) {
	got, missing, err := fromNodes[api.Snapshot](ctx, f, c, "/api/v1/snapshots/"+snapID)
	if err != nil {
		return "", api.Snapshot{}, err
	}
	for _, n := range slices.Sorted(maps.Keys(got)) {
		return n, got[n], nil
	}
	msg := fmt.Sprintf("no snapshot %s", snapID)
	for _, n := range slices.Sorted(maps.Keys(missing)) {
		if why := missing[n]; !errors.Is(why, errdefs.ErrNotFound) {
			msg += fmt.Sprintf("; node %s could not be asked (%v)", n, why)
		}
	}
	return "", api.Snapshot{}, &errdefs.FieldError{Field: field, Message: msg, Kind: errdefs.ErrNotFound}
}

// restorePod is the Pod of sandbox id made of spec, whose fromSnapshot names a snapshot of the
// caller's: on the snapshot's node.
func (f *Front) restorePod(ctx context.Context, c caller, id string, spec api.Spec) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotOpFor)
	defer cancel()
	node, sn, err := f.findSnapshot(ctx, c, spec.FromSnapshot, "fromSnapshot")
	if err != nil {
		return nil, err
	}
	var src api.Sandbox
	if err := f.nodeDo(ctx, node, c.tenant, http.MethodGet, "/api/v1/sandboxes/"+sn.SandboxID, nil, &src); err != nil {
		return nil, fmt.Errorf("the sandbox snapshot %s was taken of: %w", sn.ID, err)
	}
	return snapshotPod(c.ns, id, spec, node, sn, src, "")
}

// snapshot serves GET and DELETE /api/v1/snapshots/{snapshotId}: passed to the node holding it.
func (f *Front) snapshot(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	snapID := r.PathValue("snapshotId")
	node, sn, err := f.findSnapshot(r.Context(), c, snapID, "")
	if err != nil || r.Method == http.MethodGet {
		return sn, http.StatusOK, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), snapshotOpFor)
	defer cancel()
	var out api.Snapshot
	if err := f.nodeDo(ctx, node, c.tenant, http.MethodDelete, "/api/v1/snapshots/"+snapID, nil, &out); err != nil {
		return nil, 0, err
	}
	return out, http.StatusOK, nil
}

// restore serves an in-place restore: the node's own, as the tenant (the snapshot must be one
// that node keeps). One kept on another node is a 409 naming snapshotId that says where, and that
// a sandbox made from it (fromSnapshot) is placed there.
func (f *Front) restore(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	var req api.RestoreRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return nil, 0, err
	}
	id, p, err := f.sandboxOnNode(r, c)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), snapshotOpFor)
	defer cancel()
	var out api.Restore
	err = f.nodeDo(ctx, p.Spec.NodeName, c.tenant, http.MethodPost, "/api/v1/sandboxes/"+id+"/restore", req, &out)
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok && errors.Is(err, errdefs.ErrNotFound) && fe.Field == "snapshotId" && req.SnapshotID != "" {
		if other, _, ferr := f.findSnapshot(ctx, c, req.SnapshotID, "snapshotId"); ferr == nil && other != p.Spec.NodeName {
			return nil, 0, &errdefs.FieldError{Field: "snapshotId", Kind: errdefs.ErrConflict, Message: fmt.Sprintf(
				"snapshot %s is kept on node %s and sandbox %s runs on node %s: a snapshot restores in place only on its own node; "+
					"make a new sandbox of it (POST /api/v1/sandboxes with fromSnapshot), which the front places on %s",
				req.SnapshotID, other, id, p.Spec.NodeName, other)}
		}
	}
	if err != nil {
		return nil, 0, err
	}
	out.Sandbox = f.withEndpoints(r, out.Sandbox)
	return out, http.StatusOK, nil
}

// maxForks is a fork's most sandboxes, as on a host.
const maxForks = 64

// fork snapshots sandbox id on its node and makes count sandboxes of the snapshot there, each a
// Pod pinned to the node with the snapshot's and the sandbox's IDs (the node gives a fork the
// sandbox's network policy, credentials included, as a host's fork does). It answers once they
// are ready; if one cannot be made, the others are removed and the error returned; the snapshot
// stays.
func (f *Front) fork(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	var req api.ForkRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return nil, 0, err
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 1 || req.Count > maxForks {
		return nil, 0, errdefs.Invalid("count", "between 1 and %d (got %d)", maxForks, req.Count)
	}
	id, p, err := f.sandboxOnNode(r, c)
	if err != nil {
		return nil, 0, err
	}
	node := p.Spec.NodeName
	ctx, cancel := context.WithTimeout(r.Context(), snapshotOpFor)
	defer cancel()
	var src api.Sandbox
	if err := f.nodeDo(ctx, node, c.tenant, http.MethodGet, "/api/v1/sandboxes/"+id, nil, &src); err != nil {
		return nil, 0, err
	}
	var sn api.Snapshot
	sreq := api.SnapshotRequest{Name: "fork of " + id, Description: fmt.Sprintf("taken to fork %d sandbox(es)", req.Count), Memory: req.Memory}
	if err := f.nodeDo(ctx, node, c.tenant, http.MethodPost, "/api/v1/sandboxes/"+id+"/snapshots", sreq, &sn); err != nil {
		return nil, 0, fmt.Errorf("fork sandbox %s: %w", id, err)
	}
	out := api.Fork{Snapshot: sn, Sandboxes: make([]api.Sandbox, req.Count)}
	pods := make([]*corev1.Pod, req.Count)
	for i := range req.Count {
		spec := api.Spec{FromSnapshot: sn.ID}
		if req.Name != "" {
			spec.Name = fmt.Sprintf("%s-%d", req.Name, i+1)
		}
		if pods[i], err = snapshotPod(c.ns, sandbox.NewID("sbx_"), spec, node, sn, src, id); err != nil {
			return nil, 0, err
		}
	}
	errs := make([]error, req.Count)
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			sb, _, err := f.place(r.Context(), c, pod, true)
			out.Sandboxes[i], errs[i] = f.withEndpoints(r, sb), err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, pod := range pods {
			if q, gerr := f.pods.Pods(c.ns).Get(pod.Name); gerr == nil {
				if rerr := f.removePod(context.WithoutCancel(r.Context()), q); rerr != nil {
					f.log.Warn("remove a fork of a failed fork", "pod", pod.Name, "err", rerr)
				}
			}
		}
		return nil, 0, fmt.Errorf("fork sandbox %s: %w", id, err)
	}
	return out, http.StatusCreated, nil
}
