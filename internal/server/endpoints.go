package server

import (
	"net/http"
	"strings"

	"github.com/airlockrun/airlock/api"
)

// A sandbox's endpoints are absolute URLs (seed 000: "wss://…/exec", "https://…/metrics"). The
// manager knows their paths; the server, which knows how the client reached it, puts the
// daemon's address in front: the operator's publicUrl, or else the request's Host and scheme.

// bases returns the HTTP and WebSocket URLs of the daemon as the client of r reaches it, without
// a trailing slash.
func (s *Server) bases(r *http.Request) (httpBase, wsBase string) {
	httpBase = strings.TrimSuffix(s.cfg.PublicURL, "/")
	if httpBase == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		httpBase = scheme + "://" + r.Host
	}
	if rest, ok := strings.CutPrefix(httpBase, "https://"); ok {
		return httpBase, "wss://" + rest
	}
	return httpBase, "ws://" + strings.TrimPrefix(httpBase, "http://")
}

// absolute makes the endpoints of every sandbox in an answer absolute for the client of r.
func (s *Server) absolute(r *http.Request, data any) any {
	switch v := data.(type) {
	case api.Sandbox:
		s.absoluteOne(r, &v.Endpoints)
		return v
	case []api.Sandbox:
		for i := range v {
			s.absoluteOne(r, &v[i].Endpoints)
		}
		return v
	case api.Restore:
		s.absoluteOne(r, &v.Endpoints)
		return v
	case api.Fork:
		for i := range v.Sandboxes {
			s.absoluteOne(r, &v.Sandboxes[i].Endpoints)
		}
		return v
	}
	return data
}

func (s *Server) absoluteOne(r *http.Request, e *api.Endpoints) {
	h, ws := s.bases(r)
	for _, f := range []struct {
		p    *string
		base string
	}{{&e.Exec, ws}, {&e.Logs, ws}, {&e.Files, h}, {&e.Metrics, h}} {
		if strings.HasPrefix(*f.p, "/") {
			*f.p = f.base + *f.p
		}
	}
}
