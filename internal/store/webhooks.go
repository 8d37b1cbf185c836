package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Webhook is a webhook's stored record.
type Webhook struct {
	ID, Tenant, URL string
	Events          []string // selectors, as internal/webhook normalized them
	Secret          string
	Description     string
	CreatedAt       time.Time
	// Delivered, Failed and Dropped count deliveries since the webhook was made; Pending is
	// counted from its log when it is read.
	Delivered, Failed, Dropped, Pending int64
}

// WebhookDelivery is one row of a webhook's delivery log. Zero times are absent.
type WebhookDelivery struct {
	ID, WebhookID, Tenant string
	EventID, EventType    string
	Payload               []byte // the exact body that is signed and sent
	Status                string // api.DeliveryPending, ...
	Attempts              int
	ResponseStatus        int
	Error                 string
	DurationMs            int64
	CreatedAt             time.Time
	LastAttemptAt         time.Time
	NextAttemptAt         time.Time
	DeliveredAt           time.Time
}

const webhookColumns = `id, tenant, url, events, secret, description, created_at, delivered, failed, dropped,
	(SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = webhooks.id AND d.status = 'pending')`

// PutWebhook stores a new webhook unless its tenant already has max of them (ErrQuota); a
// duplicate ID is ErrConflict.
func (s *Store) PutWebhook(ctx context.Context, w Webhook, max int) error {
	events, err := json.Marshal(w.Events)
	if err != nil {
		return fmt.Errorf("webhook %s: encode events: %w", w.ID, err)
	}
	secret, err := s.seal(w.ID, w.Secret)
	if err != nil {
		return fmt.Errorf("webhook %s: seal its secret: %w", w.ID, err)
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhooks WHERE tenant = ?`, w.Tenant).Scan(&n); err != nil {
			return fmt.Errorf("count webhooks: %w", err)
		}
		if n >= max {
			return errdefs.New(errdefs.ErrQuota, "tenant %s has %d webhooks, the most allowed: delete one first", w.Tenant, n)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, tenant, url, events, secret, description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.Tenant, w.URL, string(events), secret, w.Description, toNanos(orNow(w.CreatedAt)))
		return inserted("webhook", w.ID, err)
	})
}

// Webhook returns webhook id of tenant ("" = any tenant); another tenant's is ErrNotFound.
func (s *Store) Webhook(ctx context.Context, tenant, id string) (Webhook, error) {
	w, err := s.scanWebhook(s.read.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE id = ? AND (? = '' OR tenant = ?)`, id, tenant, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Webhook{}, fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("webhook %s: %w", id, err)
	}
	return w, nil
}

// Webhooks returns tenant's webhooks ("" = every tenant's), oldest first.
func (s *Store) Webhooks(ctx context.Context, tenant string) ([]Webhook, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE ? = '' OR tenant = ? ORDER BY created_at, id`, tenant, tenant)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return collect(rows, "list webhooks", s.scanWebhook)
}

func (s *Store) scanWebhook(row interface{ Scan(...any) error }) (Webhook, error) {
	var w Webhook
	var events string
	var created int64
	if err := row.Scan(&w.ID, &w.Tenant, &w.URL, &events, &w.Secret, &w.Description, &created,
		&w.Delivered, &w.Failed, &w.Dropped, &w.Pending); err != nil {
		return w, err
	}
	w.CreatedAt = fromNanos(created)
	var err error
	if w.Secret, err = s.unseal(w.ID, w.Secret); err != nil {
		return w, fmt.Errorf("webhook %s: %w", w.ID, err)
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return w, fmt.Errorf("webhook %s: events: %w", w.ID, err)
	}
	return w, nil
}

// DeleteWebhook removes webhook id of tenant and its delivery log; a missing one (or another
// tenant's) is ErrNotFound.
func (s *Store) DeleteWebhook(ctx context.Context, tenant, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND tenant = ?`, id, tenant)
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

const deliveryColumns = `id, webhook_id, tenant, event_id, event_type, status, attempts, response_status, error, duration_ms,
	created_at, last_attempt_at, next_attempt_at, delivered_at`

// AddWebhookDeliveries records deliveries in one transaction, counting those already final
// (a test delivery, a dropped one) in their webhook's counters. A delivery whose webhook no
// longer exists is skipped: added[i] says whether dls[i] was recorded. Then each webhook written
// to keeps at most keep deliveries that are not pending (0: no pruning), the newest.
func (s *Store) AddWebhookDeliveries(ctx context.Context, dls []WebhookDelivery, keep int) (added []bool, err error) {
	added = make([]bool, len(dls))
	if len(dls) == 0 {
		return added, nil
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO webhook_deliveries (`+deliveryColumns+`, payload)
			SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		hooks := map[string]bool{}
		for i, d := range dls {
			res, err := ins.ExecContext(ctx, d.ID, d.WebhookID, d.Tenant, d.EventID, d.EventType, d.Status, d.Attempts,
				d.ResponseStatus, d.Error, d.DurationMs, toNanos(orNow(d.CreatedAt)), nullNanos(d.LastAttemptAt),
				nullNanos(d.NextAttemptAt), nullNanos(d.DeliveredAt), d.Payload, d.WebhookID)
			if err != nil {
				return fmt.Errorf("delivery %s: %w", d.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("delivery %s: %w", d.ID, err)
			} else if n == 0 {
				continue // its webhook was deleted meanwhile
			}
			added[i] = true
			hooks[d.WebhookID] = true
			if err := countDelivery(ctx, tx, d.WebhookID, d.Status); err != nil {
				return err
			}
		}
		if keep <= 0 {
			return nil
		}
		for id := range hooks {
			if err := pruneDeliveries(ctx, tx, id, keep); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return make([]bool, len(dls)), err
	}
	return added, nil
}

// countDelivery adds a delivery that reached final status to its webhook's counters.
func countDelivery(ctx context.Context, tx *sql.Tx, webhookID, status string) error {
	var col string
	switch status {
	case api.DeliveryDelivered:
		col = "delivered"
	case api.DeliveryFailed:
		col = "failed"
	case api.DeliveryDropped:
		col = "dropped"
	default:
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET `+col+` = `+col+` + 1 WHERE id = ?`, webhookID); err != nil {
		return fmt.Errorf("webhook %s: count: %w", webhookID, err)
	}
	return nil
}

// pruneDeliveries removes webhook id's finished deliveries older than its keep newest ones.
func pruneDeliveries(ctx context.Context, tx *sql.Tx, id string, keep int) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = ? AND status != 'pending' AND created_at <
		(SELECT created_at FROM webhook_deliveries WHERE webhook_id = ? ORDER BY created_at DESC LIMIT 1 OFFSET ?)`, id, id, keep-1)
	if err != nil {
		return fmt.Errorf("webhook %s: prune deliveries: %w", id, err)
	}
	return nil
}

// UpdateWebhookDelivery records an attempt of pending delivery d: its new status, attempts and
// times, and its webhook's counter when the status is final. A delivery that is gone (its
// webhook deleted) or no longer pending is left alone.
func (s *Store) UpdateWebhookDelivery(ctx context.Context, d WebhookDelivery) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = ?, response_status = ?, error = ?,
			duration_ms = ?, last_attempt_at = ?, next_attempt_at = ?, delivered_at = ? WHERE id = ? AND status = 'pending'`,
			d.Status, d.Attempts, d.ResponseStatus, d.Error, d.DurationMs, nullNanos(d.LastAttemptAt), nullNanos(d.NextAttemptAt),
			nullNanos(d.DeliveredAt), d.ID)
		if err != nil {
			return fmt.Errorf("delivery %s: %w", d.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("delivery %s: %w", d.ID, err)
		} else if n == 0 {
			return nil
		}
		return countDelivery(ctx, tx, d.WebhookID, d.Status)
	})
}

// PendingWebhookDeliveries returns up to limit of webhook id's pending deliveries, payloads
// included, in the order they were recorded.
func (s *Store) PendingWebhookDeliveries(ctx context.Context, id string, limit int) ([]WebhookDelivery, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+deliveryColumns+`, payload FROM webhook_deliveries
		WHERE webhook_id = ? AND status = 'pending' ORDER BY created_at, rowid LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("pending deliveries of %s: %w", id, err)
	}
	return collect(rows, "pending deliveries of "+id, func(row interface{ Scan(...any) error }) (WebhookDelivery, error) {
		return scanDelivery(row, true)
	})
}

// WebhookDeliveries returns up to limit of webhook id's deliveries, newest first, without their
// payloads.
func (s *Store) WebhookDeliveries(ctx context.Context, id string, limit int) ([]WebhookDelivery, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE webhook_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("deliveries of %s: %w", id, err)
	}
	return collect(rows, "deliveries of "+id, func(row interface{ Scan(...any) error }) (WebhookDelivery, error) {
		return scanDelivery(row, false)
	})
}

func scanDelivery(row interface{ Scan(...any) error }, payload bool) (WebhookDelivery, error) {
	var d WebhookDelivery
	var created int64
	var last, next, delivered sql.NullInt64
	dest := []any{&d.ID, &d.WebhookID, &d.Tenant, &d.EventID, &d.EventType, &d.Status, &d.Attempts, &d.ResponseStatus,
		&d.Error, &d.DurationMs, &created, &last, &next, &delivered}
	if payload {
		dest = append(dest, &d.Payload)
	}
	if err := row.Scan(dest...); err != nil {
		return d, err
	}
	d.CreatedAt = fromNanos(created)
	d.LastAttemptAt, d.NextAttemptAt, d.DeliveredAt = fromNull(last), fromNull(next), fromNull(delivered)
	return d, nil
}

// nullNanos is t as stored, or NULL for the zero time.
func nullNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return toNanos(t)
}

func fromNull(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}
