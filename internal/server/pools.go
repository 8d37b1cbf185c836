package server

// The warm pool API. Pools are daemon-wide, like the image store: any valid key may list, make,
// change and remove them until airlock has an administrator role. A pool's unclaimed sandboxes
// belong to no tenant; the create that claims one gets it as its own.

import (
	"net/http"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/tenant"
)

func listPools(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Pools(), nil
}

func getPool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Pool(r.PathValue("name"))
}

// putPool makes or replaces the pool named by the path. The body may leave its name out; one
// that names another pool is refused rather than guessed at.
func putPool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var p api.Pool
	if err := decode(w, r, s.cfg.MaxBodyBytes, &p); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if p.Name != "" && p.Name != name {
		return nil, errdefs.Invalid("name", "the body names pool %q, the path %q: leave it out or make them equal", p.Name, name)
	}
	p.Name = name
	st, err := s.m.PutPool(syncCtx(r), p)
	if err != nil {
		return nil, err
	}
	s.log.Info("pool put", "tenant", tenant.From(r.Context()), "pool", name, "size", st.Size)
	return st, nil
}

// deletePool removes a pool made through the API and answers with its last status, as the image
// removal answers with what it removed.
func deletePool(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	st, err := s.m.DeletePool(syncCtx(r), name)
	if err != nil {
		return nil, err
	}
	s.log.Info("pool deleted", "tenant", tenant.From(r.Context()), "pool", name)
	return st, nil
}
