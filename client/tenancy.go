package client

import (
	"context"
	"net/http"

	"github.com/airlockrun/airlock/api"
)

// What the operator lends tenants (docs/security.md#who-is-trusted-with-what): volumes and templates are named in the daemon's
// configuration, and a tenant key lists those it may use; an admin key lists them all, with
// their host paths. A create naming one not granted is ErrForbidden (Code volume_not_granted,
// template_not_granted).

// Volumes lists the operator's volumes the caller may mount (api.Spec.Volumes).
func (c *Client) Volumes(ctx context.Context) ([]api.VolumeInfo, error) {
	var vs []api.VolumeInfo
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/volumes"}, &vs)
	return vs, err
}

// Templates lists the root filesystem templates the caller may name (api.Spec.Template).
func (c *Client) Templates(ctx context.Context) ([]api.TemplateInfo, error) {
	var ts []api.TemplateInfo
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/templates"}, &ts)
	return ts, err
}

// Tenants returns the caller's quota and what it uses of it; for an admin key, every tenant's.
func (c *Client) Tenants(ctx context.Context) ([]api.Tenant, error) {
	var ts []api.Tenant
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/tenants"}, &ts)
	return ts, err
}
