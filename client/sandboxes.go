package client

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"sort"

	"github.com/airlockrun/airlock/api"
)

// Health asks GET /healthz, which needs no key.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.call(ctx, request{method: http.MethodGet, path: "/healthz"}, &h)
	return h, err
}

// Capabilities returns the isolation levels and features this daemon's host offers, and why not.
func (c *Client) Capabilities(ctx context.Context) (api.Capabilities, error) {
	var caps api.Capabilities
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/capabilities"}, &caps)
	return caps, err
}

// Create creates a sandbox and waits until it is ready (POST /api/v1/sandboxes?wait=true): a
// provisioning failure is its error. The zero value of every field of spec means the daemon's
// default. An invalid field is an *Error with Field set (ErrInvalidArgument); a level this host
// does not have is ErrIsolationUnavailable.
func (c *Client) Create(ctx context.Context, spec api.Spec) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/sandboxes", query: url.Values{"wait": {"true"}}, json: spec}, &sb)
	return sb, err
}

// CreateAsync creates a sandbox and returns at once: api.StatusProvisioning while the daemon
// makes it in the background (poll Get, or follow Logs, until it is api.StatusReady or
// api.StatusFailed, whose Reason says why), or api.StatusReady when a warm pool served it.
// Operations on a provisioning sandbox wait for it.
func (c *Client) CreateAsync(ctx context.Context, spec api.Spec) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/sandboxes", json: spec}, &sb)
	return sb, err
}

// ListOptions filters List. The zero value lists every sandbox of the caller's tenant.
type ListOptions struct {
	Status   []string          // any of these statuses (api.StatusReady, ...)
	AgentID  string            // created with this agentId
	Metadata map[string]string // carrying every one of these metadata pairs
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	for _, s := range o.Status {
		q.Add("status", s)
	}
	if o.AgentID != "" {
		q.Set("agentId", o.AgentID)
	}
	keys := make([]string, 0, len(o.Metadata))
	for k := range o.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("metadata", k+"="+o.Metadata[k])
	}
	return q
}

// List returns the sandboxes that match opts.
func (c *Client) List(ctx context.Context, opts ListOptions) ([]api.Sandbox, error) {
	var sbs []api.Sandbox
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/sandboxes", query: opts.query()}, &sbs)
	return sbs, err
}

// Get returns one sandbox, with its recorded transitions.
func (c *Client) Get(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodGet, id, "")
}

// Terminate ends a sandbox and releases its resources; its record is kept (status
// api.StatusTerminated).
func (c *Client) Terminate(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodDelete, id, "")
}

// Pause freezes every process of a sandbox.
func (c *Client) Pause(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/pause")
}

// Resume thaws a paused sandbox.
func (c *Client) Resume(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/resume")
}

// Start starts a sandbox's agent (api.Spec.Agent, or its image's entrypoint and cmd): the sandbox
// is api.StatusRunning while it runs, then api.StatusCompleted when it exits 0 or
// api.StatusFailed (Reason "agent_exit") otherwise; its output is the sandbox's log (Logs). A
// sandbox without an agent is ErrConflict naming the field agent.
func (c *Client) Start(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/start")
}

// AgentStdin appends data to the stdin of a sandbox's running agent; eof closes it after data.
// The daemon holds at most 1 MiB the agent has not read (ErrQuotaExceeded past it: retry later).
func (c *Client) AgentStdin(ctx context.Context, id string, data []byte, eof bool) (api.AgentStdin, error) {
	var out api.AgentStdin
	q := url.Values{}
	if eof {
		q.Set("eof", "true")
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/agent/stdin"), query: q, body: bytes.NewReader(data),
		length: int64(len(data)), contentType: "application/octet-stream"}, &out)
	return out, err
}

func (c *Client) sandboxCall(ctx context.Context, method, id, rest string) (api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, request{method: method, path: sandboxPath(id, rest)}, &sb)
	return sb, err
}

// Metrics returns a sandbox's current and recent resource readings.
func (c *Client) Metrics(ctx context.Context, id string) (api.Metrics, error) {
	var m api.Metrics
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/metrics")}, &m)
	return m, err
}
