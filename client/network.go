package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockrun/airlock/api"
)

// UpdateNetwork changes a live sandbox's network policy (PUT .../network). Credentials sent
// without Value or Secret keep the value they had; responses never carry credential values.
func (c *Client) UpdateNetwork(ctx context.Context, id string, n api.Network) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, request{method: http.MethodPut, path: sandboxPath(id, "/network"), json: n}, &sb)
	return sb, err
}

// EventOptions select a sandbox's recorded events.
type EventOptions struct {
	Type        string // a type prefix, e.g. "network." or api.EventNetworkConnect
	ExecutionID string
	After       int64 // the previous page's Next
	Limit       int
}

// Events returns one page of a sandbox's recorded events, oldest first.
func (c *Client) Events(ctx context.Context, id string, o EventOptions) (api.EventPage, error) {
	q := url.Values{}
	if o.Type != "" {
		q.Set("type", o.Type)
	}
	if o.ExecutionID != "" {
		q.Set("executionId", o.ExecutionID)
	}
	if o.After > 0 {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var p api.EventPage
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/events"), query: q}, &p)
	return p, err
}
