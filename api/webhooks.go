package api

import "time"

// WebhookRequest registers a webhook: the body of POST /api/v1/webhooks.
type WebhookRequest struct {
	// URL receives the deliveries: an absolute http or https URL with a host and no user
	// information. Loopback, private and link-local addresses are refused unless the daemon's
	// webhooks.allowPrivateNetworks is set; cloud metadata addresses always.
	URL string `json:"url" openapi:"required"`
	// Events selects the events delivered: exact types ("exec.exited"), prefixes ending in "."
	// ("limit.") or "*" for every event of the tenant. Empty means lifecycle and limit events:
	// ["sandbox.", "limit."].
	Events []string `json:"events,omitempty"`
	// Secret is the HMAC-SHA256 key deliveries are signed with (at least 16 characters). Empty
	// means the daemon generates one, returned once in the answer.
	Secret string `json:"secret,omitempty"`
	// Description is free text for people (at most 256 characters).
	Description string `json:"description,omitempty"`
}

// Webhook is a registered webhook with its counters.
type Webhook struct {
	ID          string    `json:"id"` // whk_…
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	// Secret is set only in the answer to the create; it is never returned again.
	Secret string `json:"secret,omitempty"`
	// Delivered, Failed and Dropped count deliveries since the webhook was made (test deliveries
	// included); Pending is how many wait for a first attempt or a retry.
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Dropped   int64 `json:"dropped"`
	Pending   int64 `json:"pending"`
}

// WebhookDelivery is one event sent (or to be sent) to a webhook, as its delivery log shows it.
type WebhookDelivery struct {
	ID        string `json:"id"` // dlv_…, also the Airlock-Delivery header
	WebhookID string `json:"webhookId"`
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	// Status is pending (waiting for its first attempt or a retry), delivered (a 2xx answer),
	// failed (a refusal that is not retried, or the last attempt failed) or dropped (never sent:
	// the daemon's queue or the webhook's backlog was full).
	Status   string `json:"status" enum:"pending,delivered,failed,dropped"`
	Attempts int    `json:"attempts"`
	// ResponseStatus is the receiver's HTTP status at the last attempt (0: no answer).
	ResponseStatus int        `json:"responseStatus,omitempty"`
	Error          string     `json:"error,omitempty"` // why the last attempt failed
	DurationMs     int64      `json:"durationMs"`      // of the last attempt
	CreatedAt      time.Time  `json:"createdAt"`
	LastAttemptAt  *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt,omitempty"` // of a pending delivery
	DeliveredAt    *time.Time `json:"deliveredAt,omitempty"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliveryDropped   = "dropped"
)

// WebhookPayload is the body of every delivery, signed as it is sent.
type WebhookPayload struct {
	DeliveryID string `json:"deliveryId"`
	WebhookID  string `json:"webhookId"`
	Event      Event  `json:"event"`
}

// EventWebhookTest is the event of a test delivery (POST /api/v1/webhooks/{webhookId}/test);
// it belongs to no sandbox.
const EventWebhookTest = "webhook.test"

// Headers of a delivery. The signature is "v1=" and the hex HMAC-SHA256, keyed with the webhook's
// secret, of the timestamp header's value, ".", and the body; a receiver checks it and that the
// timestamp is recent (client.VerifyWebhook does both).
const (
	WebhookIDHeader        = "Airlock-Webhook-Id"
	WebhookDeliveryHeader  = "Airlock-Delivery"
	WebhookEventHeader     = "Airlock-Event"
	WebhookTimestampHeader = "Airlock-Timestamp" // Unix seconds of the attempt
	WebhookSignatureHeader = "Airlock-Signature"
)
