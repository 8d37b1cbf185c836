package node

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/tenant"
)

func TestFrontRoute(t *testing.T) {
	var got struct {
		path, tenant, auth, header string
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := tenant.VouchedFrom(r.Context())
		got.path, got.tenant, got.auth, got.header = r.URL.Path, v.Tenant, r.Header.Get("Authorization"), r.Header.Get(kubeapi.HeaderTenant)+r.Header.Get(kubeapi.HeaderFrontScheme)
		w.WriteHeader(http.StatusTeapot)
	})
	h := frontRoute(api)
	const id = "sbx_0123456789abcdef0123"
	tests := []struct {
		name, method, path, tenant string
		want                       int
	}{
		{"exec", "POST", "/airlock/api/v1/sandboxes/" + id + "/exec", "a", http.StatusTeapot},
		{"get", "GET", "/airlock/api/v1/sandboxes/" + id, "a", http.StatusTeapot},
		{"list", "GET", "/airlock/api/v1/sandboxes", "a", http.StatusTeapot},
		{"no tenant", "GET", "/airlock/api/v1/sandboxes/" + id, "", http.StatusBadRequest},
		{"a create", "POST", "/airlock/api/v1/sandboxes", "a", http.StatusNotFound},
		{"another route", "GET", "/airlock/api/v1/keys", "a", http.StatusNotFound},
		{"a fork (sandboxes without Pods)", "POST", "/airlock/api/v1/sandboxes/" + id + "/fork", "a", http.StatusNotFound},
		{"snapshots", "GET", "/airlock/api/v1/snapshots", "a", http.StatusTeapot},
		{"a snapshot", "GET", "/airlock/api/v1/snapshots/snap_0123456789abcdef0123", "a", http.StatusTeapot},
		{"a snapshot's delete", "DELETE", "/airlock/api/v1/snapshots/snap_0123456789abcdef0123", "a", http.StatusTeapot},
		{"a snapshot's restore elsewhere", "POST", "/airlock/api/v1/snapshots/snap_0123456789abcdef0123", "a", http.StatusNotFound},
		{"events", "GET", "/airlock/api/v1/events", "a", http.StatusTeapot},
		{"capabilities", "GET", "/airlock/api/v1/capabilities", "a", http.StatusTeapot},
		{"templates", "GET", "/airlock/api/v1/templates", "a", http.StatusTeapot},
		{"pools", "GET", "/airlock/api/v1/pools", "a", http.StatusNotFound},
		{"seed 002 run", "POST", "/airlock/api/sandbox/" + id + "/run", "a", http.StatusTeapot},
		{"seed 002 run poll", "GET", "/airlock/api/sandbox/" + id + "/run/exec_0123456789abcdef0123", "a", http.StatusTeapot},
		{"seed 002 create", "POST", "/airlock/api/sandbox/create", "a", http.StatusNotFound},
		{"not an ID", "GET", "/airlock/api/v1/sandboxes/sbx_x/../../keys", "a", http.StatusNotFound},
	}
	for _, tc := range tests {
		got.path, got.tenant = "", ""
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Header.Set("Authorization", "Bearer front-token")
		if tc.tenant != "" {
			r.Header.Set(kubeapi.HeaderTenant, tc.tenant)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: %d, want %d (%s)", tc.name, w.Code, tc.want, w.Body)
			continue
		}
		if tc.want == http.StatusTeapot {
			if got.tenant != tc.tenant || got.path != tc.path[len(kubeapi.FrontPrefix):] || got.auth != "" || got.header != "" {
				t.Errorf("%s: the API saw %+v", tc.name, got)
			}
		}
	}
}

// TestFrontRouteScheme: the node answers as the front's client sees the front: without TLS
// when the front was reached by plain HTTP (the endpoints it makes are http and ws).
func TestFrontRouteScheme(t *testing.T) {
	for _, scheme := range []string{"http", "https", ""} {
		var sawTLS bool
		h := frontRoute(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sawTLS = r.TLS != nil }))
		r := httptest.NewRequest("GET", "https://node:10250/airlock/api/v1/sandboxes", nil)
		r.Header.Set(kubeapi.HeaderTenant, "a")
		if scheme != "" {
			r.Header.Set(kubeapi.HeaderFrontScheme, scheme)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if want := scheme != "http"; sawTLS != want {
			t.Errorf("front scheme %q: the API saw TLS %v, want %v", scheme, sawTLS, want)
		}
	}
}

func TestTenantsOfLabelled(t *testing.T) {
	ts := Tenants{Default: "d", ByNamespace: map[string]string{"mapped": "m"},
		Labelled: func(ns string) (string, bool) {
			return map[string]string{"labelled": "l", "mapped": "x"}[ns], ns == "labelled" || ns == "mapped"
		}}
	for ns, want := range map[string]string{"mapped": "m", "labelled": "l", "other": "d"} {
		if got, ok := ts.Of(ns); !ok || got != want {
			t.Errorf("Of(%q) = %q, %v; want %q", ns, got, ok, want)
		}
	}
}
