package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockrun/airlock/api"
)

// EventOptions filters events.
type EventOptions struct {
	Type        string // a type prefix, e.g. "network." or api.EventNetworkConnect
	ExecutionID string
	SandboxID   string    // TenantEvents and FollowEvents with no sandbox: keep this sandbox's
	After       int64     // the previous page's Next, or the last Seq seen
	Since       time.Time // events at or after this time
	Until       time.Time // events before this time
	Limit       int
}

func (o EventOptions) query(follow bool) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("type", o.Type)
	set("executionId", o.ExecutionID)
	set("sandboxId", o.SandboxID)
	if o.After > 0 {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.Format(time.RFC3339Nano))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if follow {
		q.Set("follow", "true")
	}
	return q
}

// eventsPath is a sandbox's events, or the tenant's when id is "".
func eventsPath(id string) string {
	if id == "" {
		return "/api/v1/events"
	}
	return sandboxPath(id, "/events")
}

// Events returns one page of a sandbox's audit events, oldest first.
func (c *Client) Events(ctx context.Context, id string, o EventOptions) (api.EventPage, error) {
	var p api.EventPage
	err := c.call(ctx, request{method: http.MethodGet, path: eventsPath(id), query: o.query(false)}, &p)
	return p, err
}

// TenantEvents returns one page of the tenant's audit events (every sandbox's, and its API
// calls), oldest first.
func (c *Client) TenantEvents(ctx context.Context, o EventOptions) (api.EventPage, error) {
	return c.Events(ctx, "", o)
}

// FollowEvents delivers the events o selects to fn as they are written, oldest first, starting
// after o.After: a sandbox's (id), or the tenant's (id ""). A dropped stream is resumed after the
// last event delivered. It returns nil when the daemon ends the stream (a followed sandbox was
// terminated), fn's error, or ctx's.
func (c *Client) FollowEvents(ctx context.Context, id string, o EventOptions, fn func(api.Event) error) error {
	what := "events"
	if id != "" {
		what = "events of " + id
	}
	f := &follower[api.Event]{c: c, what: what, path: eventsPath(id), event: "event", last: o.After, fn: fn,
		query: func(last int64) url.Values { o.After = last; return o.query(true) },
		seq:   func(e api.Event) int64 { return e.Seq },
		page: func(resp *http.Response) ([]api.Event, error) {
			var p api.EventPage
			err := decodeData(resp, &p)
			return p.Events, err
		}}
	return f.follow(ctx)
}

// Replay returns a sandbox's whole recorded history ordered for display.
func (c *Client) Replay(ctx context.Context, id string) (api.Replay, error) {
	var r api.Replay
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/replay")}, &r)
	return r, err
}

// VerifyAudit walks the daemon's audit log's hash chain (GET /api/v1/audit/verify) and says
// whether every event is what the daemon wrote. A tenant key's answer may be up to a minute old
// and names none of another tenant's events; an admin key's is fresh.
func (c *Client) VerifyAudit(ctx context.Context) (api.AuditVerification, error) {
	var v api.AuditVerification
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/audit/verify"}, &v)
	return v, err
}
