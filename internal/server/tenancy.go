package server

import (
	"net/http"

	"github.com/airlockrun/airlock/internal/tenant"
)

// listVolumes lists the operator's volumes the tenant may mount (an admin key: all, with their
// host paths and grants).
func listVolumes(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	ctx := r.Context()
	return s.m.Grants().VolumesFor(tenant.From(ctx), tenant.IsAdmin(ctx)), nil
}

// listTemplates lists the root filesystem templates the tenant may use.
func listTemplates(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	ctx := r.Context()
	return s.m.Grants().TemplatesFor(tenant.From(ctx), tenant.IsAdmin(ctx)), nil
}

// listTenants answers the tenant's own quota and usage; an admin key gets every tenant's.
func listTenants(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	ctx := r.Context()
	var names []string
	if tenant.IsAdmin(ctx) {
		var err error
		if names, err = s.store.Tenants(ctx); err != nil {
			return nil, err
		}
	}
	return s.m.Tenants(ctx, names), nil
}
