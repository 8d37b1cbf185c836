package front

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/kube/node"
)

func TestSnapshotPod(t *testing.T) {
	sn := api.Snapshot{ID: "snap_0123456789abcdef0123", SandboxID: "sbx_aaaaaaaaaaaaaaaaaaaa", Isolation: "process"}
	src := api.Sandbox{ID: sn.SandboxID, Spec: api.Spec{Isolation: "process", Template: "host", Resources: api.Resources{CPU: 0.1, MemoryMB: 256, DiskMB: 1024}}}
	tests := []struct {
		name   string
		spec   api.Spec
		forkOf string
		mem    int64
	}{
		{name: "restore", spec: api.Spec{FromSnapshot: sn.ID, Name: "again"}, mem: 256},
		{name: "fork", spec: api.Spec{FromSnapshot: sn.ID}, forkOf: sn.SandboxID, mem: 256},
		{name: "memory given (the node checks it)", spec: api.Spec{FromSnapshot: sn.ID, Resources: api.Resources{MemoryMB: 512}}, mem: 512},
	}
	for _, tc := range tests {
		p, err := snapshotPod("tenant-a", testID, tc.spec, "airlock-2", sn, src, tc.forkOf)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if p.Spec.NodeName != "" || len(terms) != 1 || terms[0].MatchFields[0].Operator != "In" || terms[0].MatchFields[0].Values[0] != "airlock-2" {
			t.Errorf("%s: not pinned to its node by affinity: nodeName %q, %+v", tc.name, p.Spec.NodeName, terms)
		}
		if startsAgent(p) {
			t.Errorf("%s: the node would start an agent", tc.name)
		}
		var req api.Spec
		if err := json.Unmarshal([]byte(p.Annotations[kubeapi.AnnotationRequest]), &req); err != nil || req.FromSnapshot != sn.ID {
			t.Errorf("%s: the request annotation %s", tc.name, p.Annotations[kubeapi.AnnotationRequest])
		}
		// What the node makes of it: a restore of the snapshot, with its shape.
		ns, err := node.SpecOf(p, "airlock-2")
		if err != nil || ns.FromSnapshot != sn.ID || ns.ID != testID || ns.Isolation != "process" || ns.Template != "host" ||
			ns.Resources.MemoryMB != tc.mem || ns.Resources.CPU != 0.1 || ns.Resources.DiskMB != 0 || ns.Name != tc.spec.Name && tc.spec.Name != "" {
			t.Errorf("%s: the node's spec %+v, %v", tc.name, ns, err)
		}
		if got := p.Annotations[kubeapi.AnnotationForkOf]; got != tc.forkOf {
			t.Errorf("%s: fork-of %q, want %q", tc.name, got, tc.forkOf)
		}
	}
}

func TestMergeEvents(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1700000000+int64(s), 0).UTC() }
	ev := func(id string, s int) api.Event { return api.Event{ID: id, Time: at(s)} }
	a := api.EventPage{Events: []api.Event{ev("a1", 1), ev("a2", 3), ev("a3", 5)}}
	b := api.EventPage{Events: []api.Event{ev("b1", 2), ev("b2", 3), ev("b3", 4)}}
	ids := func(p api.EventPage) (out []string) {
		for _, e := range p.Events {
			out = append(out, e.ID)
		}
		return out
	}
	tests := []struct {
		name  string
		limit int
		want  []string
		next  int64
	}{
		{"all, in time order", 10, []string{"a1", "b1", "a2", "b2", "b3", "a3"}, at(5).UnixNano()},
		{"cut between distinct times", 2, []string{"a1", "b1"}, at(2).UnixNano()},
		{"never inside one nanosecond", 3, []string{"a1", "b1"}, at(2).UnixNano()},
		{"the same nanosecond at once: the limit", 1, []string{"a1"}, at(1).UnixNano()},
	}
	for _, tc := range tests {
		got := mergeEvents([]api.EventPage{a, b}, tc.limit, 7)
		if g := ids(got); len(g) != len(tc.want) || got.Next != tc.next {
			t.Errorf("%s: %v next %d, want %v next %d", tc.name, g, got.Next, tc.want, tc.next)
		} else {
			for i := range g {
				if g[i] != tc.want[i] {
					t.Errorf("%s: %v, want %v", tc.name, g, tc.want)
					break
				}
			}
		}
	}
	if empty := mergeEvents(nil, 10, 7); empty.Next != 7 || empty.Events == nil {
		t.Errorf("no events: %+v, want next = after and an empty list", empty)
	}
}

func TestMergeCapabilities(t *testing.T) {
	n1 := api.Capabilities{Version: "v", Levels: []api.LevelCapability{{Level: "process", Available: true}, {Level: "microvm", Reason: "no kvm"}},
		Features: map[string]bool{"exec": true, "snapshots": true, "webhooks": true}}
	n2 := api.Capabilities{Version: "v", Levels: []api.LevelCapability{{Level: "process", Available: true}, {Level: "microvm", Available: true, Detail: "tcg"}},
		Features: map[string]bool{"exec": true, "snapshots": false}, Reasons: map[string]string{"snapshots": "no store"}}
	got := mergeCapabilities([]api.Capabilities{n1, n2})
	if len(got.Levels) != 2 || !got.Levels[1].Available || got.Levels[1].Detail != "tcg" {
		t.Errorf("levels %+v: microvm is available on one node", got.Levels)
	}
	if !got.Features["exec"] || got.Features["snapshots"] || got.Reasons["snapshots"] != "no store" || got.Features["webhooks"] || got.Reasons["webhooks"] == "" {
		t.Errorf("features %v reasons %v", got.Features, got.Reasons)
	}
}

func TestNodeErrorAndBare(t *testing.T) {
	tests := []struct {
		err    error
		bare   bool
		status int
		code   string
		field  string
	}{
		{nodeError("n", http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "snapshotId", Message: "no snapshot"}), false, 404, api.CodeNotFound, "snapshotId"},
		{nodeError("n", http.StatusConflict, &api.Error{Code: api.CodeConflict, Status: "terminated", Message: "ended"}), false, 409, api.CodeConflict, ""},
		{nodeError("n", http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: "disk"}), false, 503, api.CodeUnavailable, ""},
		{nodeError("n", http.StatusUnprocessableEntity, &api.Error{Code: api.CodeIsolationUnavailable, Field: "isolation"}), false, 422, api.CodeIsolationUnavailable, "isolation"},
		{errdefs.New(errdefs.ErrNotImplemented, "pools"), false, 501, api.CodeNotImplemented, ""},
		{errdefs.New(errdefs.ErrNotFound, "no sandbox"), true, 404, api.CodeNotFound, ""},
	}
	for _, tc := range tests {
		w := httptest.NewRecorder()
		writeErrorAs(w, tc.err, tc.bare)
		var body struct {
			OK    *bool     `json:"ok"`
			Error api.Error `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tc.status || body.Error.Code != tc.code || body.Error.Field != tc.field || (body.OK == nil) != tc.bare {
			t.Errorf("%v (bare %v): %d %s, want %d %s field %q", tc.err, tc.bare, w.Code, w.Body, tc.status, tc.code, tc.field)
		}
	}
	if !errors.Is(nodeError("n", 404, &api.Error{Code: api.CodeNotFound}), errdefs.ErrNotFound) {
		t.Error("a node's 404 is not a not-found")
	}
}

// TestNotServed: the host's routes the front does not serve answer 501 in the API's shape once
// the key is checked; an unknown route is a 404, in seed 002's shape under /api/sandbox/.
func TestNotServed(t *testing.T) {
	keys := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byHash: func(obj any) ([]string, error) {
		return []string{string(obj.(*corev1.Secret).Data[kubeapi.KeyHash])}, nil
	}})
	if err := keys.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: DefaultNamespace},
		Data: map[string][]byte{kubeapi.KeyHash: []byte(kubeapi.HashKey("key-a")), kubeapi.KeyTenant: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	nss := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := nss.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{kubeapi.LabelTenant: "a"}}}); err != nil {
		t.Fatal(err)
	}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	f := &Front{keys: keys, nsL: corev1listers.NewNamespaceLister(nss), pods: corev1listers.NewPodLister(pods)}
	h := f.Handler()
	tests := []struct {
		method, path, key string
		status            int
		code              string
		bare              bool
	}{
		{"GET", "/api/v1/pools", "key-a", 501, api.CodeNotImplemented, false},
		{"PUT", "/api/v1/pools/py", "key-a", 501, api.CodeNotImplemented, false},
		{"POST", "/api/v1/webhooks", "key-a", 501, api.CodeNotImplemented, false},
		{"GET", "/api/v1/tools/echo", "key-a", 501, api.CodeNotImplemented, false},
		{"POST", "/mcp", "key-a", 501, api.CodeNotImplemented, false},
		{"GET", "/api/v1/images/python:3.12", "key-a", 501, api.CodeNotImplemented, false},
		{"GET", "/api/v1/tenants", "key-a", 501, api.CodeNotImplemented, false},
		{"GET", "/api/v1/audit/verify", "key-a", 501, api.CodeNotImplemented, false},
		{"GET", "/api/v1/events?follow=true", "key-a", 501, api.CodeNotImplemented, false},
		{"GET", "/api/v1/pools", "not-a-key", 401, api.CodeUnauthorized, false},
		{"GET", "/api/v1/nothing", "key-a", 404, api.CodeNotFound, false},
		{"GET", "/api/sandbox/sbx_x/nothing", "key-a", 404, api.CodeNotFound, true},
		{"GET", "/api/sandbox/sbx_0123456789abcdef0123", "key-a", 404, api.CodeNotFound, true},
		{"POST", "/api/sandbox/create", "not-a-key", 401, api.CodeUnauthorized, true},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Header.Set("Authorization", "Bearer "+tc.key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var body struct {
			OK    *bool     `json:"ok"`
			Error api.Error `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tc.status || body.Error.Code != tc.code || (body.OK == nil) != tc.bare {
			t.Errorf("%s %s: %d %s, want %d %s (bare %v)", tc.method, tc.path, w.Code, w.Body, tc.status, tc.code, tc.bare)
		}
	}
}
