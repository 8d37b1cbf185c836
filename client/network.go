package client

import (
	"context"
	"net/http"

	"github.com/airlockrun/airlock/api"
)

// UpdateNetwork changes a live sandbox's network policy (PUT .../network). Credentials sent
// without Value or Secret keep the value they had; responses never carry credential values.
func (c *Client) UpdateNetwork(ctx context.Context, id string, n api.Network) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, request{method: http.MethodPut, path: sandboxPath(id, "/network"), json: n}, &sb)
	return sb, err
}
