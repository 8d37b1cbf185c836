package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockrun/airlock/api"
)

// Webhooks deliver the tenant's events to a URL, signed (see VerifyWebhook), retried with
// backoff; each keeps a log of its deliveries.

func webhookPath(id, rest string) string { return "/api/v1/webhooks/" + url.PathEscape(id) + rest }

// CreateWebhook registers a webhook and returns it with its secret, the only time the secret is
// returned (the daemon generates one when req has none). An invalid field is ErrInvalidArgument
// naming it; a tenant at its webhook quota gets ErrQuotaExceeded.
func (c *Client) CreateWebhook(ctx context.Context, req api.WebhookRequest) (api.Webhook, error) {
	var w api.Webhook
	err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/webhooks", json: req}, &w)
	return w, err
}

// Webhooks lists the tenant's webhooks with their counters, oldest first.
func (c *Client) Webhooks(ctx context.Context) ([]api.Webhook, error) {
	var ws []api.Webhook
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/webhooks"}, &ws)
	return ws, err
}

// Webhook returns one webhook with its counters; an unknown one is ErrNotFound.
func (c *Client) Webhook(ctx context.Context, id string) (api.Webhook, error) {
	var w api.Webhook
	err := c.call(ctx, request{method: http.MethodGet, path: webhookPath(id, "")}, &w)
	return w, err
}

// DeleteWebhook removes a webhook and its delivery log, and returns it as it was. Deliveries
// still pending are not sent.
func (c *Client) DeleteWebhook(ctx context.Context, id string) (api.Webhook, error) {
	var w api.Webhook
	err := c.call(ctx, request{method: http.MethodDelete, path: webhookPath(id, "")}, &w)
	return w, err
}

// WebhookDeliveries returns a webhook's most recent deliveries, newest first: at most limit
// (0: the daemon's default, 100; at most 1000).
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) ([]api.WebhookDelivery, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var ds []api.WebhookDelivery
	err := c.call(ctx, request{method: http.MethodGet, path: webhookPath(id, "/deliveries"), query: q}, &ds)
	return ds, err
}

// TestWebhook sends a webhook.test event to the webhook now, once, and returns the delivery
// (also in its log): its Status is delivered, or failed with the receiver's answer or the error.
func (c *Client) TestWebhook(ctx context.Context, id string) (api.WebhookDelivery, error) {
	var d api.WebhookDelivery
	err := c.call(ctx, request{method: http.MethodPost, path: webhookPath(id, "/test")}, &d)
	return d, err
}
