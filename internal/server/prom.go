package server

import (
	"net/http"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// promMetrics serves the daemon's Prometheus metrics as they are, outside the JSON envelope: a
// scraper wants the exposition format.
func promMetrics(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	if s.cfg.Metrics == nil {
		return nil, errdefs.New(errdefs.ErrServiceUnavailable, "this daemon exports no metrics")
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil, written
}
