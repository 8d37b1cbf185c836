package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
)

// withFiles opens the sandbox's filesystem and the request's path for one files-API call.
func (s *Server) withFiles(r *http.Request, fn func(f *manager.Files, p string) (any, error)) (any, error) {
	f, err := s.m.Files(syncCtx(r), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := f.Abs(r.URL.Query().Get("path"))
	if err != nil {
		return nil, err
	}
	return fn(f, p)
}

func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.Invalid(name, "must be true or false (got %q)", v)
	}
	return b, nil
}

func downloadFile(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.withFiles(r, func(f *manager.Files, p string) (any, error) {
		file, info, err := f.Open(p)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
		w.Header().Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
		w.Header().Set("X-Airlock-File-Mode", info.Mode)
		_ = s.copyOut(w, file) // an error is the client's going away or stalling: nothing to answer
		return nil, written
	})
}

func uploadFile(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	parents, err := boolQuery(r, "parents")
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(0o644)
	if v := r.URL.Query().Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			return nil, errdefs.Invalid("mode", "must be octal permission bits such as 0644 (got %q)", v)
		}
		mode = os.FileMode(m)
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		return nil, fmt.Errorf("upload of %d bytes is larger than the %d allowed: %w", r.ContentLength, s.cfg.MaxUploadBytes, errdefs.ErrTooLarge)
	}
	return s.withFiles(r, func(f *manager.Files, p string) (any, error) {
		info, err := f.Write(p, r.Body, mode, s.cfg.MaxUploadBytes, parents)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = errdefs.New(errdefs.ErrTooLarge, "%v", err)
		}
		return info, err
	})
}

func removeFile(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	recursive, err := boolQuery(r, "recursive")
	if err != nil {
		return nil, err
	}
	return s.withFiles(r, func(f *manager.Files, p string) (any, error) {
		info, err := f.Stat(p)
		if err != nil {
			return nil, err
		}
		return info, f.Remove(p, recursive)
	})
}

func listFiles(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.withFiles(r, func(f *manager.Files, p string) (any, error) {
		list, err := f.List(p)
		if list == nil {
			list = []api.FileInfo{}
		}
		return list, err
	})
}

func statFile(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.withFiles(r, func(f *manager.Files, p string) (any, error) { return f.Stat(p) })
}

func mkdir(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	parents, err := boolQuery(r, "parents")
	if err != nil {
		return nil, err
	}
	return s.withFiles(r, func(f *manager.Files, p string) (any, error) { return f.Mkdir(p, parents) })
}
