package front

import (
	"errors"
	"net/http"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/compat"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Seed 002's /api/sandbox surface through the front (docs/api.md#http-api): the translation is
// package compat's, as on a host. A create is a front create that waits for the sandbox; a run
// and its poll are the node's own compat routes, passed to the node that runs the sandbox
// (proxy), where the async run lives on; a delete ends the sandbox on its node and keeps its Pod,
// so that the record stays and reads destroyed, as the seed says.

func (f *Front) compatCreate(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	var req api.CompatCreateRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return nil, 0, err
	}
	spec, err := compat.Spec(req)
	if err != nil {
		return nil, 0, err
	}
	pod, err := podFor(c.ns, sandbox.NewID("sbx_"), spec, f.lostNodes())
	if err != nil {
		return nil, 0, err
	}
	sb, _, err := f.place(r.Context(), c, pod, true)
	if err != nil {
		return nil, 0, err
	}
	return compat.View(sb), http.StatusCreated, nil
}

func (f *Front) compatGet(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	p, err := f.podOf(c, r.PathValue("id"))
	if err != nil {
		return nil, 0, err
	}
	return compat.View(f.viewOf(r.Context(), c, p)), http.StatusOK, nil
}

// compatDelete destroys the sandbox: 204. Its node terminates it and the Pod stays, ended, as its
// record (a tenant's terminal Pods count in no quota); one no node runs (never placed, or lost)
// has its Pod removed. A sandbox that has ended already is a 204 as well.
func (f *Front) compatDelete(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	p, err := f.podOf(c, r.PathValue("id"))
	if err != nil {
		return nil, 0, err
	}
	p, on, err := f.settle(r.Context(), c, p)
	switch sb := f.lostView(p); {
	case !sandbox.Live(sb.Status):
		return nil, http.StatusNoContent, nil
	case err != nil:
		return nil, 0, err // its node does not answer: a 503, until it is back or found lost
	case !on:
		return nil, http.StatusNoContent, f.removePod(r.Context(), p)
	}
	err = f.nodeDo(r.Context(), p.Spec.NodeName, c.tenant, http.MethodDelete, "/api/v1/sandboxes/"+p.Annotations[kubeapi.AnnotationSandbox], nil, nil)
	if _, ok := errors.AsType[*conflict](err); ok {
		err = nil // ended already
	}
	return nil, http.StatusNoContent, err
}
