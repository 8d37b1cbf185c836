package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// TestWebhooks: the quota, tenancy, deliveries (skipped for a deleted webhook), counters,
// the pruned log that keeps pending deliveries, and the cascade of a delete.
func TestWebhooks(t *testing.T) {
	s, _ := openTest(t, Options{})
	ctx := context.Background()
	put := func(id, tenant string) error {
		return s.PutWebhook(ctx, Webhook{ID: id, Tenant: tenant, URL: "https://example.com", Events: []string{"sandbox.", "limit."}, Secret: "s"}, 2)
	}
	for _, id := range []string{"whk_a", "whk_b"} {
		if err := put(id, "t1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("whk_c", "t1"); !errors.Is(err, errdefs.ErrQuota) {
		t.Errorf("third webhook of t1: %v", err)
	}
	if err := put("whk_c", "t2"); err != nil {
		t.Errorf("t2's first: %v", err)
	}
	if err := put("whk_c", "t2"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := s.Webhook(ctx, "t2", "whk_a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("t2 reads t1's: %v", err)
	}
	if err := s.DeleteWebhook(ctx, "t2", "whk_a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("t2 deletes t1's: %v", err)
	}
	if ws, err := s.Webhooks(ctx, "t1"); err != nil || len(ws) != 2 || ws[0].ID != "whk_a" || ws[0].Events[1] != "limit." {
		t.Errorf("t1's: %+v, %v", ws, err)
	}
	if ws, err := s.Webhooks(ctx, ""); err != nil || len(ws) != 3 {
		t.Errorf("all: %d, %v", len(ws), err)
	}

	t0 := time.Now()
	var dls []WebhookDelivery
	for i := range 6 {
		st := api.DeliveryDelivered
		if i == 0 {
			st = api.DeliveryPending // the oldest: never pruned
		}
		dls = append(dls, WebhookDelivery{ID: fmt.Sprintf("dlv_%d", i), WebhookID: "whk_a", Tenant: "t1", EventID: "evt", EventType: "sandbox.status",
			Payload: []byte(`{}`), Status: st, CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), NextAttemptAt: t0})
	}
	dls = append(dls, WebhookDelivery{ID: "dlv_gone", WebhookID: "whk_nope", Status: api.DeliveryPending, Payload: []byte{}},
		WebhookDelivery{ID: "dlv_drop", WebhookID: "whk_b", Status: api.DeliveryDropped, Payload: []byte{}, CreatedAt: t0})
	added, err := s.AddWebhookDeliveries(ctx, dls, 3)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(added) != "[true true true true true true false true]" {
		t.Errorf("added %v: the unknown webhook's is skipped", added)
	}
	got, err := s.WebhookDeliveries(ctx, "whk_a", 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range got {
		ids = append(ids, d.ID)
	}
	if fmt.Sprint(ids) != "[dlv_5 dlv_4 dlv_3 dlv_0]" {
		t.Errorf("log after pruning to 3: %v (newest first, the pending one kept)", ids)
	}
	w, _ := s.Webhook(ctx, "t1", "whk_a")
	if w.Delivered != 5 || w.Pending != 1 {
		t.Errorf("counters %+v: the pruned still count", w)
	}
	if b, _ := s.Webhook(ctx, "t1", "whk_b"); b.Dropped != 1 {
		t.Errorf("whk_b %+v", b)
	}

	pending, err := s.PendingWebhookDeliveries(ctx, "whk_a", 10)
	if err != nil || len(pending) != 1 || pending[0].ID != "dlv_0" || string(pending[0].Payload) != "{}" || !pending[0].NextAttemptAt.Equal(t0) {
		t.Fatalf("pending %+v, %v", pending, err)
	}
	d := pending[0]
	d.Attempts, d.Status, d.ResponseStatus, d.Error, d.LastAttemptAt = 1, api.DeliveryFailed, 410, "HTTP 410", time.Now()
	d.NextAttemptAt = time.Time{}
	if err := s.UpdateWebhookDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateWebhookDelivery(ctx, d); err != nil { // no longer pending: left alone, not counted twice
		t.Fatal(err)
	}
	w, _ = s.Webhook(ctx, "t1", "whk_a")
	if w.Failed != 1 || w.Pending != 0 {
		t.Errorf("after the failure: %+v", w)
	}
	got, _ = s.WebhookDeliveries(ctx, "whk_a", 1)
	if g := got[0]; len(got) != 1 || g.ID != "dlv_5" {
		t.Errorf("limit 1: %+v", got)
	}

	if err := s.DeleteWebhook(ctx, "t1", "whk_a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.WebhookDeliveries(ctx, "whk_a", 100); len(got) != 0 {
		t.Errorf("the deleted webhook's log: %d rows", len(got))
	}
	if err := s.UpdateWebhookDelivery(ctx, d); err != nil { // its webhook gone: nothing to do
		t.Errorf("update of a deleted webhook's delivery: %v", err)
	}
}
