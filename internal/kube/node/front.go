package node

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/tenant"
)

// frontPath is what the front API may call on a node: one sandbox's routes, and the list.
// Creates go through Pods (and the scheduler), never straight to a node.
var frontPath = regexp.MustCompile(`^/api/v1/sandboxes(/sbx_[0-9a-f]{20}(/.*)?)?$`)

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
		case !frontPath.MatchString(p) || (p == "/api/v1/sandboxes" && r.Method != http.MethodGet):
			http.Error(w, fmt.Sprintf("%s %s is not a route of the front API on a node", r.Method, p), http.StatusNotFound)
			return
		}
		r2 := r.Clone(tenant.WithVouched(r.Context(), tenant.Vouched{Tenant: ten, By: "kubernetes-front"}))
		r2.URL.Path, r2.URL.RawPath = p, ""
		r2.Header.Del(kubeapi.HeaderTenant)
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
