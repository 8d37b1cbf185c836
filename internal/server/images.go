package server

// The image API: the host's image store, shared by every tenant (sandboxes of any tenant share
// its layers). Any valid key may list, pull, remove and prune; airlock has no administrator
// role. Removal never touches a live sandbox: its lease keeps its layers until it ends.

import (
	"errors"
	"net/http"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/tenant"
)

// imageStore returns the daemon's image store, or ErrServiceUnavailable saying why it has none.
func (s *Server) imageStore() (*image.Store, error) {
	if s.images.Store != nil {
		return s.images.Store, nil
	}
	reason := "this daemon has none"
	if s.images.Err != nil {
		reason = s.images.Err.Error()
	}
	return nil, errdefs.New(errdefs.ErrServiceUnavailable, "the image store is unavailable: %s", reason)
}

func listImages(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	st, err := s.imageStore()
	if err != nil {
		return nil, err
	}
	imgs, err := st.List()
	if err != nil {
		return nil, err
	}
	return image.APIs(imgs), nil
}

func getImage(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	st, err := s.imageStore()
	if err != nil {
		return nil, err
	}
	img, err := st.Get(r.PathValue("ref"))
	if err != nil {
		return nil, refField(err)
	}
	return img.API(), nil
}

// pullImage pulls synchronously: the answer comes when the image is unpacked. A client that
// hangs up cancels the pull (what was unpacked stays, for the next pull to reuse).
func pullImage(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.PullRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	st, err := s.imageStore()
	if err != nil {
		return nil, err
	}
	img, err := st.Pull(r.Context(), req.Ref, nil)
	if err != nil {
		return nil, refField(err)
	}
	s.log.Info("image pulled", "tenant", tenant.From(r.Context()), "ref", img.Ref, "digest", img.Digest)
	return img.API(), nil
}

func removeImage(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	st, err := s.imageStore()
	if err != nil {
		return nil, err
	}
	c, err := st.Remove(r.PathValue("ref"))
	if err != nil {
		return nil, refField(err)
	}
	s.log.Info("image removed", "tenant", tenant.From(r.Context()), "refs", c.Refs, "layers", c.Layers, "inUse", c.InUse)
	return c.API(), nil
}

func pruneImages(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	st, err := s.imageStore()
	if err != nil {
		return nil, err
	}
	c, err := st.GC()
	if err != nil {
		return nil, err
	}
	s.log.Info("images pruned", "tenant", tenant.From(r.Context()), "layers", c.Layers, "bytes", c.Bytes, "inUse", c.InUse)
	return c.API(), nil
}

// refField names the request's ref where the image store blames "image", the field's name in
// a sandbox's spec.
func refField(err error) error {
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok && fe.Field == "image" {
		return &errdefs.FieldError{Field: "ref", Message: fe.Message, Kind: fe.Kind}
	}
	return err
}
