package server

// The webhook API: a tenant's webhooks and their delivery logs. Deliveries are the dispatcher's
// (internal/webhook); without one (a daemon built without it, or a test) every route answers 503.

import (
	"net/http"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/query"
	"github.com/airlockrun/airlock/internal/tenant"
	"github.com/airlockrun/airlock/internal/webhook"
)

// webhooks returns the dispatcher, or ErrServiceUnavailable.
func (s *Server) webhooks() (*webhook.Dispatcher, error) {
	if s.cfg.Webhooks == nil {
		return nil, errdefs.New(errdefs.ErrServiceUnavailable, "webhooks are unavailable: this daemon has no dispatcher")
	}
	return s.cfg.Webhooks, nil
}

func createWebhook(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.WebhookRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	d, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	return d.Create(syncCtx(r), tenant.From(r.Context()), req)
}

func listWebhooks(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	d, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	return d.List(r.Context(), tenant.From(r.Context()))
}

func getWebhook(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	d, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	return d.Get(r.Context(), tenant.From(r.Context()), r.PathValue("webhookId"))
}

func deleteWebhook(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	d, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	return d.Delete(syncCtx(r), tenant.From(r.Context()), r.PathValue("webhookId"))
}

func webhookDeliveries(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	d, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	limit, err := query.Int(r.URL.Query(), "limit")
	if err != nil {
		return nil, err
	}
	return d.Deliveries(r.Context(), tenant.From(r.Context()), r.PathValue("webhookId"), int(limit))
}

// testWebhook delivers a webhook.test event now and answers with the delivery, whatever its
// outcome: a receiver that refuses it is a delivery with status failed, not an error of the call.
func testWebhook(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	d, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	return d.Test(syncCtx(r), tenant.From(r.Context()), r.PathValue("webhookId"))
}
