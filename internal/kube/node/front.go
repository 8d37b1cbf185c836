package node

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/tenant"
)

// frontRoutes are what the front API may call on a node: one sandbox's routes (but its fork,
// which would make sandboxes without Pods: the front forks through Pods), the tenant's lists
// and reads (sandboxes, snapshots, events, capabilities, templates), one snapshot, and seed
// 002's run of a sandbox. Creates go through Pods (and the scheduler), never straight to a node.
var frontRoutes = []struct {
	methods string // the methods allowed, space-separated; "" any
	path    *regexp.Regexp
}{
	{"", regexp.MustCompile(`^/api/v1/sandboxes/` + idRE + `(/.*)?$`)},
	{"GET", regexp.MustCompile(`^/api/v1/(sandboxes|snapshots|events|capabilities|templates)$`)},
	{"GET DELETE", regexp.MustCompile(`^/api/v1/snapshots/snap_[0-9a-f]{20}$`)},
	{"POST", regexp.MustCompile(`^/api/sandbox/` + idRE + `/run$`)},
	{"GET", regexp.MustCompile(`^/api/sandbox/` + idRE + `/run/exec_[0-9a-f]{20}$`)},
}

const idRE = `sbx_[0-9a-f]{20}`

var forkPath = regexp.MustCompile(`^/api/v1/sandboxes/` + idRE + `/fork$`)

// frontAllows says whether the front may call method path on a node.
func frontAllows(method, path string) bool {
	if forkPath.MatchString(path) {
		return false
	}
	for _, r := range frontRoutes {
		if r.path.MatchString(path) && (r.methods == "" || slices.Contains(strings.Fields(r.methods), method)) {
			return true
		}
	}
	return false
}

// frontRoute serves the daemon's API (api) to the front API under kubeapi.FrontPrefix on the
// kubelet port, where the virtual kubelet's authentication (a client certificate of the
// cluster's CA, or a token) and authorization (nodes/proxy on this node, by
// SubjectAccessReview) have already let the caller in: it acts as the tenant the
// Airlock-Tenant header names, and so sees that tenant's sandboxes only
// (docs/kubernetes.md#the-front-api).
func frontRoute(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, kubeapi.FrontPrefix)
		ten := r.Header.Get(kubeapi.HeaderTenant)
		switch {
		case ten == "":
			http.Error(w, "the front API names the tenant it acts for in "+kubeapi.HeaderTenant, http.StatusBadRequest)
			return
		case !frontAllows(r.Method, p):
			http.Error(w, fmt.Sprintf("%s %s is not a route of the front API on a node", r.Method, p), http.StatusNotFound)
			return
		}
		r2 := r.Clone(tenant.WithVouched(r.Context(), tenant.Vouched{Tenant: ten, By: "kubernetes-front"}))
		r2.URL.Path, r2.URL.RawPath = p, ""
		if r.Header.Get(kubeapi.HeaderFrontScheme) == "http" {
			r2.TLS = nil // the client reached the front without TLS: its endpoints are http and ws
		}
		r2.Header.Del(kubeapi.HeaderTenant)
		r2.Header.Del(kubeapi.HeaderFrontScheme)
		r2.Header.Del("Authorization")
		api.ServeHTTP(w, r2)
	})
}

// labelledTenants watches the cluster's namespaces and returns the tenant a namespace's
// airlock.dev/tenant label names.
func labelledTenants(ctx context.Context, client kubernetes.Interface) (func(string) (string, bool), error) {
	f := informers.NewSharedInformerFactory(client, 10*time.Minute)
	lister := f.Core().V1().Namespaces().Lister()
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range f.WaitForCacheSync(sctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("--tenant-label: the namespaces (%v) could not be read: the node's identity needs namespaces get/list/watch", typ)
		}
	}
	return func(ns string) (string, bool) {
		n, err := lister.Get(ns)
		if err != nil {
			return "", false
		}
		t := n.Labels[kubeapi.LabelTenant]
		return t, t != ""
	}, nil
}
