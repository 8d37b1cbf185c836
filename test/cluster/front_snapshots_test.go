package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/testutil"
)

// frontRaw calls the front API with key and answers the status and the decoded body (nil when
// it has none).
func frontRaw(t *testing.T, key, method, path, body string) (int, map[string]any, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, front.API+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, v, raw
}

// at is the value at a dotted path of v.
func at(v map[string]any, path string) any {
	var cur any = v
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// offersGVisor says whether a node of the cluster offers the container level under gVisor.
func offersGVisor(t *testing.T, ctx context.Context) bool {
	t.Helper()
	ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kubeapi.RuntimeLabelPrefix + "airlock-gvisor=true"})
	return err == nil && len(ns.Items) > 0
}

// TestFrontSeed002 sends seed 002's create (as written, but for the image: the cluster has no
// registry) through the front: it answers the seed's bare object, ready; a run prints 42; an
// async run is polled to its end on the node; another tenant gets the surface's 404; delete is
// 204 and the sandbox reads destroyed.
func TestFrontSeed002(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 5*time.Minute)
	mode := "container"
	if !offersGVisor(t, ctx) {
		mode = "process"
		t.Logf("no node offers airlock-gvisor: the seed's create with mode process")
	}
	create := `{
"agent_id": "data-processor",
"mode": "` + mode + `",
"config": {
"filesystem": {
"read_only": ["/workspace/data"],
"read_write": ["/workspace/output"],
"blocked": ["/etc", "/root"]
},
"network": {
"allow": ["api.company.com"],
"block_outbound": true
},
"resources": {
"cpu": "0.5",
"memory": "512m",
"timeout": 30
}
}
}`
	status, sb, raw := frontRaw(t, keyA, "POST", "/api/sandbox/create", create)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, raw)
	}
	id, _ := sb["sandbox_id"].(string)
	t.Cleanup(func() { _, _ = tenantA.Terminate(context.Background(), id) })
	keys := make([]string, 0, len(sb))
	for k := range sb {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	created, err1 := time.Parse(time.RFC3339, sb["created_at"].(string))
	expires, err2 := time.Parse(time.RFC3339, sb["expires_at"].(string))
	if strings.Join(keys, ",") != "created_at,expires_at,mode,sandbox_id,status" || sb["status"] != "ready" || sb["mode"] != mode ||
		!kubeapi.ValidSandboxID(id) || err1 != nil || err2 != nil || expires.Sub(created) != 30*time.Second {
		t.Fatalf("create: %s, want the seed's object, ready, expiring 30 s after", raw)
	}
	if status, got, raw := frontRaw(t, keyA, "GET", "/api/sandbox/"+id, ""); status != http.StatusOK || got["status"] != "ready" || got["sandbox_id"] != id {
		t.Errorf("get: %d %s", status, raw)
	}
	status, run, raw := frontRaw(t, keyA, "POST", "/api/sandbox/"+id+"/run", `{"code": "print(6*7)", "timeout": 30}`)
	if status != http.StatusOK || run["status"] != api.ExecDone || at(run, "result.stdout") != "42\n" || at(run, "result.exit_code") != 0.0 {
		t.Errorf("run print(6*7): %d %s", status, raw)
	}
	// The seed's filesystem: data read-only, output writable, /etc out of reach.
	pb, _ := json.Marshal(map[string]string{"code": testutil.Seed002FilesystemProbe})
	if status, r, raw := frontRaw(t, keyA, "POST", "/api/sandbox/"+id+"/run", string(pb)); status != http.StatusOK || at(r, "result.stdout") != "rw ro False\n" {
		t.Errorf("the seed's filesystem: %d %s", status, raw)
	}
	status, run, raw = frontRaw(t, keyA, "POST", "/api/sandbox/"+id+"/run", `{"code": "import time; time.sleep(1); print('late')", "async": true}`)
	runID, _ := run["run_id"].(string)
	if status != http.StatusAccepted || run["status"] != api.ExecRunning || !strings.HasPrefix(runID, "exec_") {
		t.Fatalf("async run: %d %s", status, raw)
	}
	for deadline := time.Now().Add(20 * time.Second); run["status"] == api.ExecRunning; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("async run still running after 20 s: %v", run)
		}
		_, run, _ = frontRaw(t, keyA, "GET", "/api/sandbox/"+id+"/run/"+runID, "")
	}
	if run["status"] != api.ExecDone || at(run, "result.stdout") != "late\n" {
		t.Errorf("async result: %v", run)
	}

	// Another tenant: the surface's own 404 (bare, no envelope), for every route.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/sandbox/" + id, ""}, {"POST", "/api/sandbox/" + id + "/run", `{"code":"print(1)"}`},
		{"GET", "/api/sandbox/" + id + "/run/" + runID, ""}, {"DELETE", "/api/sandbox/" + id, ""},
	} {
		if status, e, raw := frontRaw(t, keyB, c.method, c.path, c.body); status != http.StatusNotFound || at(e, "error.code") != api.CodeNotFound || e["ok"] != nil {
			t.Errorf("tenant b %s %s: %d %s, want the bare 404", c.method, c.path, status, raw)
		}
	}
	if status, e, raw := frontRaw(t, keyA, "POST", "/api/sandbox/create", `{"mode":"vm"}`); status != http.StatusBadRequest || at(e, "error.field") != "mode" || e["ok"] != nil {
		t.Errorf("an unknown mode: %d %s, want the bare 400 naming mode", status, raw)
	}

	if status, _, raw := frontRaw(t, keyA, "DELETE", "/api/sandbox/"+id, ""); status != http.StatusNoContent || len(raw) != 0 {
		t.Errorf("delete: %d %q, want 204 and no body", status, raw)
	}
	if status, got, raw := frontRaw(t, keyA, "GET", "/api/sandbox/"+id, ""); status != http.StatusOK || got["status"] != api.CompatStatusDestroyed {
		t.Errorf("get after delete: %d %s, want destroyed (the record stays)", status, raw)
	}
	if status, _, raw := frontRaw(t, keyA, "DELETE", "/api/sandbox/"+id, ""); status != http.StatusNoContent {
		t.Errorf("a second delete: %d %s, want 204", status, raw)
	}
}

// TestFrontSnapshots: a snapshot taken through the front is listed, read and restored only by
// its tenant (another's is a 404 everywhere); a create from it and a fork land on its node and
// carry its files; an in-place restore puts them back; the tenant-wide reads (snapshots,
// events, capabilities, templates) are merged over the nodes and the tenant's own; a route the
// front does not serve is a 501.
func TestFrontSnapshots(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 8*time.Minute)
	var made []string
	t.Cleanup(func() {
		for _, id := range made {
			_, _ = tenantA.Terminate(context.Background(), id)
		}
	})
	create := func(c *client.Client, spec api.Spec) api.Sandbox {
		t.Helper()
		sb, err := c.Create(ctx, spec)
		if err != nil {
			t.Fatalf("create %+v: %v", spec, err)
		}
		made = append(made, sb.ID)
		return sb
	}
	cat := func(id string) string {
		t.Helper()
		res, err := tenantA.Exec(ctx, id, api.ExecRequest{Command: api.Command{"cat", "/tmp/state"}})
		if err != nil {
			t.Fatalf("cat in %s: %v", id, err)
		}
		return res.Stdout
	}
	write := func(id, v string) {
		t.Helper()
		if _, err := tenantA.WriteFile(ctx, id, "/tmp/state", strings.NewReader(v), 0o644); err != nil {
			t.Fatalf("write in %s: %v", id, err)
		}
	}

	src := create(tenantA, frontSpec())
	home := nodeOf(t, src).Name
	write(src.ID, "v1")
	snap, err := tenantA.Snapshot(ctx, src.ID, api.SnapshotRequest{Name: "s1"})
	if err != nil {
		t.Fatalf("snapshot through the front: %v", err)
	}
	t.Cleanup(func() { _, _ = tenantA.DeleteSnapshot(context.Background(), snap.ID) })

	// Another tenant: not found, wherever it names the snapshot.
	if _, err := tenantB.GetSnapshot(ctx, snap.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b gets a's snapshot: %v, want not found", err)
	}
	if _, err := tenantB.Create(ctx, api.Spec{FromSnapshot: snap.ID}); !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), "fromSnapshot") {
		t.Errorf("tenant b creates from a's snapshot: %v, want not found naming fromSnapshot", err)
	}
	bsb, err := tenantB.Create(ctx, frontSpec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = tenantB.Terminate(context.Background(), bsb.ID) })
	if _, err := tenantB.Restore(ctx, bsb.ID, snap.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b restores its sandbox from a's snapshot: %v, want not found", err)
	}
	if _, err := tenantB.DeleteSnapshot(ctx, snap.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b deletes a's snapshot: %v, want not found", err)
	}
	if ss, err := tenantB.Snapshots(ctx, ""); err != nil || len(ss) != 0 {
		t.Errorf("tenant b lists %d snapshots (%v), want none", len(ss), err)
	}
	t0 := time.Now()
	ss, err := tenantA.Snapshots(ctx, "")
	t.Logf("the tenant's snapshots merged over %d nodes: %s", len(nodes), time.Since(t0).Round(time.Millisecond))
	if err != nil || !slices.ContainsFunc(ss, func(s api.Snapshot) bool { return s.ID == snap.ID }) {
		t.Errorf("tenant a's snapshots %+v (%v) lack %s", ss, err, snap.ID)
	}
	if got, err := tenantA.GetSnapshot(ctx, snap.ID); err != nil || got.SandboxID != src.ID {
		t.Errorf("tenant a gets its snapshot: %+v, %v", got, err)
	}

	// A create from the snapshot lands on its node, with its files.
	t0 = time.Now()
	restored := create(tenantA, api.Spec{FromSnapshot: snap.ID, Name: "restored"})
	t.Logf("a create from the snapshot through the front, ready: %s", time.Since(t0).Round(time.Millisecond))
	if n := nodeOf(t, restored).Name; n != home || restored.Status != api.StatusReady || restored.FromSnapshot != snap.ID {
		t.Errorf("the sandbox made from the snapshot: node %s (the snapshot's: %s), %s, fromSnapshot %q", n, home, restored.Status, restored.FromSnapshot)
	}
	if got := cat(restored.ID); got != "v1" {
		t.Errorf("the restored sandbox's file: %q, want v1", got)
	}

	// A fork: two sandboxes on the node, with the files, as Pods pinned there by affinity.
	write(src.ID, "v2")
	fork, err := tenantA.Fork(ctx, src.ID, api.ForkRequest{Count: 2, Name: "f"})
	if err != nil {
		t.Fatalf("fork through the front: %v", err)
	}
	t.Cleanup(func() { _, _ = tenantA.DeleteSnapshot(context.Background(), fork.Snapshot.ID) })
	if len(fork.Sandboxes) != 2 || fork.Snapshot.SandboxID != src.ID {
		t.Fatalf("fork: %+v", fork)
	}
	for i, sb := range fork.Sandboxes {
		made = append(made, sb.ID)
		if n := nodeOf(t, sb).Name; n != home || sb.Name != []string{"f-1", "f-2"}[i] {
			t.Errorf("fork %d: node %s (its parent's: %s), name %q", i, n, home, sb.Name)
		}
		if got := cat(sb.ID); got != "v2" {
			t.Errorf("fork %d's file: %q, want v2", i, got)
		}
		p, err := cs.CoreV1().Pods("tenant-a").Get(ctx, "sbx-"+strings.TrimPrefix(sb.ID, "sbx_"), metav1.GetOptions{})
		if err != nil || p.Annotations[kubeapi.AnnotationFromSnapshot] != fork.Snapshot.ID || p.Annotations[kubeapi.AnnotationForkOf] != src.ID ||
			p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != home {
			t.Errorf("fork %d's Pod: %v, %v", i, err, p)
		}
	}

	// The annotations the front sets act for the Pod's tenant: a Pod made by hand in tenant b's
	// namespace, naming a's snapshot (and a's sandbox as its fork source), is refused by the node
	// and gets nothing of a's.
	model, err := cs.CoreV1().Pods("tenant-a").Get(ctx, "sbx-"+strings.TrimPrefix(fork.Sandboxes[0].ID, "sbx_"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ann := range []map[string]string{
		{kubeapi.AnnotationFromSnapshot: snap.ID},
		{kubeapi.AnnotationFromSnapshot: fork.Snapshot.ID, kubeapi.AnnotationForkOf: src.ID},
	} {
		hostile := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%d", i), Namespace: "tenant-b", Annotations: ann}, Spec: *model.Spec.DeepCopy()}
		hostile.Spec.NodeName = ""
		if _, err := cs.CoreV1().Pods("tenant-b").Create(ctx, hostile, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a hand-made Pod in tenant b: %v", err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = cs.CoreV1().Pods("tenant-b").Delete(context.Background(), hostile.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		p := waitPod(t, "tenant-b", hostile.Name, time.Minute, "Failed", phaseIs(corev1.PodFailed, corev1.PodRunning, corev1.PodSucceeded))
		if p.Status.Phase != corev1.PodFailed || !strings.Contains(p.Status.Message, "not found") {
			t.Errorf("tenant b's Pod naming a's snapshot %v: %s, want refused as not found", ann, podText(p))
		}
		t.Logf("tenant b's Pod naming a's %v: %s", ann, podText(p))
	}
	if list, err := tenantB.List(ctx, client.ListOptions{}); err == nil {
		for _, sb := range list {
			if sb.FromSnapshot != "" {
				t.Errorf("tenant b has a sandbox from a snapshot: %+v", sb)
			}
		}
	}

	// A proxied answer holding a sandbox names the front in its endpoints, as the client sees it.
	if got, err := tenantA.Pause(ctx, src.ID); err != nil || !strings.HasPrefix(got.Endpoints.Files, front.API+"/api/v1/sandboxes/"+src.ID) {
		t.Errorf("pause through the front: endpoints %+v, %v; want the front's", got.Endpoints, err)
	} else if _, err := tenantA.Resume(ctx, src.ID); err != nil {
		t.Errorf("resume: %v", err)
	}

	// In place: the sandbox back to the first snapshot.
	if res, err := tenantA.Restore(ctx, src.ID, snap.ID); err != nil || res.State != api.StatusReady || res.RestoredFrom != snap.ID ||
		!strings.HasPrefix(res.Endpoints.Exec, "ws://"+strings.TrimPrefix(front.API, "http://")+"/api/v1/sandboxes/"+src.ID) {
		t.Errorf("restore in place: %+v, %v (its endpoints name the front)", res, err)
	} else if got := cat(src.ID); got != "v1" {
		t.Errorf("after restore in place: %q, want v1", got)
	}

	// The tenant-wide reads.
	caps, err := tenantA.Capabilities(ctx)
	if err != nil || caps.Features["webhooks"] || !slices.ContainsFunc(caps.Levels, func(l api.LevelCapability) bool { return l.Level == "process" && l.Available }) {
		t.Errorf("capabilities: %+v, %v", caps, err)
	}
	if ts, err := tenantA.Templates(ctx); err != nil || !slices.ContainsFunc(ts, func(x api.TemplateInfo) bool { return x.Name == "host" }) {
		t.Errorf("templates: %+v, %v", ts, err)
	}
	mine := map[string]bool{src.ID: true, restored.ID: true, fork.Sandboxes[0].ID: true, fork.Sandboxes[1].ID: true}
	// Two more, which the scheduler is free to put elsewhere: the merged reads span the nodes.
	on := map[string]bool{home: true}
	for range 2 {
		sb := create(tenantA, frontSpec())
		mine[sb.ID], on[nodeOf(t, sb).Name] = true, true
	}
	t.Logf("tenant a's sandboxes are on %d nodes", len(on))
	for _, id := range made {
		sb, err := tenantA.Get(ctx, id)
		if err != nil || nodeOf(t, sb).Name == home {
			continue
		}
		// A sandbox of another node restored in place from the snapshot: the snapshot is not
		// there; the answer says where it is.
		if _, err := tenantA.Restore(ctx, id, snap.ID); !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), home) {
			t.Errorf("restore in place on another node than the snapshot's: %v, want a conflict naming node %s", err, home)
		}
		break
	}
	page, err := tenantA.TenantEvents(ctx, client.EventOptions{Type: "sandbox.", Limit: 10000})
	if err != nil || len(page.Events) == 0 {
		t.Fatalf("tenant a's events: %d, %v", len(page.Events), err)
	}
	seen := map[string]bool{}
	for i, e := range page.Events {
		seen[e.SandboxID] = true
		if i > 0 && e.Time.Before(page.Events[i-1].Time) {
			t.Errorf("tenant events out of time order at %d: %s before %s", i, e.Time, page.Events[i-1].Time)
		}
	}
	for id := range mine {
		if !seen[id] {
			t.Errorf("tenant a's events name no event of its sandbox %s", id)
		}
	}
	// Paged: the cursor is a time; the second page starts after the first.
	first, err := tenantA.TenantEvents(ctx, client.EventOptions{Type: "sandbox.", Limit: 3})
	if err != nil || len(first.Events) == 0 || first.Next != first.Events[len(first.Events)-1].Time.UnixNano() {
		t.Errorf("a first page: %+v, %v", first, err)
	} else if second, err := tenantA.TenantEvents(ctx, client.EventOptions{Type: "sandbox.", Limit: 3, After: first.Next}); err != nil || len(second.Events) == 0 ||
		!second.Events[0].Time.After(first.Events[len(first.Events)-1].Time) {
		t.Errorf("the second page: %+v, %v", second, err)
	}
	bpage, err := tenantB.TenantEvents(ctx, client.EventOptions{Limit: 10000})
	if err != nil {
		t.Errorf("tenant b's events: %v", err)
	}
	for _, e := range bpage.Events {
		if mine[e.SandboxID] {
			t.Errorf("tenant b's events hold one of a's sandbox %s: %+v", e.SandboxID, e)
		}
	}

	// What the front does not serve: a 501 in the API's error shape.
	if status, e, raw := frontRaw(t, keyA, "GET", "/api/v1/pools", ""); status != http.StatusNotImplemented || at(e, "error.code") != api.CodeNotImplemented || e["ok"] != false {
		t.Errorf("GET /api/v1/pools: %d %s, want 501 not_implemented", status, raw)
	}
	if _, err := tenantA.Pools(ctx); !errors.Is(err, client.ErrNotImplemented) {
		t.Errorf("the SDK's Pools through the front: %v, want ErrNotImplemented", err)
	}
	if status, _, raw := frontRaw(t, keyA, "GET", "/api/v1/events?follow=true", ""); status != http.StatusNotImplemented {
		t.Errorf("following the tenant's events: %d %s, want 501", status, raw)
	}

	// Delete: the snapshot through the front, then the sandboxes; nothing is left on the node.
	if _, err := tenantA.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Errorf("delete the snapshot: %v", err)
	} else if _, err := tenantA.GetSnapshot(ctx, snap.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the deleted snapshot: %v, want not found", err)
	}
	for _, id := range made {
		if _, err := tenantA.Terminate(ctx, id); err != nil {
			t.Errorf("terminate %s: %v", id, err)
		}
	}
	for _, n := range nodes {
		for _, id := range made {
			waitNoSandbox(t, n, id)
		}
	}
	made = nil
}
