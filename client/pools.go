package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/airlockrun/airlock/api"
)

// Warm pools are the daemon's, shared by every tenant. A Create whose spec has a pool's shape
// gets one of its ready sandboxes; nothing else changes for the caller.

func poolPath(name string) string { return "/api/v1/pools/" + url.PathEscape(name) }

// Pools lists the daemon's warm pools with their counters, sorted by name.
func (c *Client) Pools(ctx context.Context) ([]api.PoolStatus, error) {
	var ps []api.PoolStatus
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/pools"}, &ps)
	return ps, err
}

// Pool returns one warm pool with its counters; an unknown one is ErrNotFound.
func (c *Client) Pool(ctx context.Context, name string) (api.PoolStatus, error) {
	var p api.PoolStatus
	err := c.call(ctx, request{method: http.MethodGet, path: poolPath(name)}, &p)
	return p, err
}

// PutPool makes the warm pool p.Name, or replaces it (its unclaimed sandboxes end), and returns
// it with its defaults filled in. An invalid field is ErrInvalidArgument naming it (a field that
// belongs to the claiming create, such as spec.environment, included); a pool of the daemon's
// configuration file is ErrConflict.
func (c *Client) PutPool(ctx context.Context, p api.Pool) (api.PoolStatus, error) {
	var st api.PoolStatus
	err := c.call(ctx, request{method: http.MethodPut, path: poolPath(p.Name), json: p}, &st)
	return st, err
}

// DeletePool removes a warm pool made through the API, ends its unclaimed sandboxes and returns
// the pool's last status. An unknown pool is ErrNotFound; one of the daemon's configuration file
// is ErrConflict.
func (c *Client) DeletePool(ctx context.Context, name string) (api.PoolStatus, error) {
	var st api.PoolStatus
	err := c.call(ctx, request{method: http.MethodDelete, path: poolPath(name)}, &st)
	return st, err
}
