package clienttest

import (
	"fmt"
	"io"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
)

// maxUpload bounds one upload to the fake daemon, which keeps files in memory.
const maxUpload = 64 << 20

// fileOp finds the sandbox and the cleaned path of a files request, or answers the error;
// it returns with d.mu held when ok.
func (d *Daemon) fileOp(w http.ResponseWriter, r *http.Request) (sb *sandbox, p string, ok bool) {
	p = r.URL.Query().Get("path")
	if p == "" {
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "path", Message: "is required"})
		return nil, "", false
	}
	d.mu.Lock()
	if sb = d.lookup(w, r); sb == nil || !live(w, sb) {
		d.mu.Unlock()
		return nil, "", false
	}
	if !strings.HasPrefix(p, "/") {
		p = path.Join(sb.Workdir, p) // relative paths start at the workdir
	}
	return sb, path.Clean(p), true
}

func notFound(w http.ResponseWriter, p string) {
	fail(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: p + ": no such file or directory"})
}

func info(p string, f *file) api.FileInfo {
	fi := api.FileInfo{Name: path.Base(p), Path: p, Type: api.FileRegular, Size: int64(len(f.data)),
		Mode: fmt.Sprintf("%04o", f.mode), ModTime: f.modTime}
	if f.dir {
		fi.Type, fi.Size = api.FileDir, 0
	}
	return fi
}

func (d *Daemon) download(w http.ResponseWriter, r *http.Request) {
	sb, p, ok := d.fileOp(w, r)
	if !ok {
		return
	}
	f := sb.files[p]
	d.mu.Unlock()
	switch {
	case f == nil:
		notFound(w, p)
	case f.dir:
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "path", Message: p + " is a directory"})
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
		_, _ = w.Write(f.data) // a failure is the client's to see
	}
}

// mkdirs creates p's missing parents; d.mu must be held.
func mkdirs(sb *sandbox, p string) {
	for dir := path.Dir(p); sb.files[dir] == nil; dir = path.Dir(dir) {
		sb.files[dir] = &file{dir: true, mode: 0o755, modTime: time.Now().UTC()}
	}
}

func (d *Daemon) upload(w http.ResponseWriter, r *http.Request) {
	mode := uint64(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		var err error
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o7777 {
			fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "mode", Message: "must be octal permission bits such as 0644"})
			return
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUpload))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, api.Error{Code: api.CodePayloadTooLarge, Message: err.Error()})
		return
	}
	sb, p, ok := d.fileOp(w, r)
	if !ok {
		return
	}
	defer d.mu.Unlock()
	if f := sb.files[p]; f != nil && f.dir {
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "path", Message: p + " is a directory"})
		return
	}
	if parent := sb.files[path.Dir(p)]; parent == nil || !parent.dir {
		if r.URL.Query().Get("parents") != "true" {
			notFound(w, path.Dir(p))
			return
		}
		mkdirs(sb, p)
	}
	f := &file{data: data, mode: uint32(mode), modTime: time.Now().UTC()}
	sb.files[p] = f
	reply(w, http.StatusOK, info(p, f))
}

// children lists the entries directly in dir; d.mu must be held.
func children(sb *sandbox, dir string) []string {
	var out []string
	for p := range sb.files {
		if p != dir && path.Dir(p) == dir {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (d *Daemon) remove(w http.ResponseWriter, r *http.Request) {
	sb, p, ok := d.fileOp(w, r)
	if !ok {
		return
	}
	defer d.mu.Unlock()
	f := sb.files[p]
	switch {
	case f == nil:
		notFound(w, p)
		return
	case p == "/":
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "path", Message: "cannot remove /"})
		return
	case f.dir && len(children(sb, p)) > 0 && r.URL.Query().Get("recursive") != "true":
		fail(w, http.StatusConflict, api.Error{Code: api.CodeConflict, Message: p + " is not empty"})
		return
	}
	for q := range sb.files {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(sb.files, q)
		}
	}
	reply(w, http.StatusOK, info(p, f))
}

func (d *Daemon) listFiles(w http.ResponseWriter, r *http.Request) {
	sb, p, ok := d.fileOp(w, r)
	if !ok {
		return
	}
	defer d.mu.Unlock()
	f := sb.files[p]
	if f == nil {
		notFound(w, p)
		return
	}
	if !f.dir {
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: "path", Message: p + " is not a directory"})
		return
	}
	out := []api.FileInfo{}
	for _, c := range children(sb, p) {
		out = append(out, info(c, sb.files[c]))
	}
	reply(w, http.StatusOK, out)
}

func (d *Daemon) stat(w http.ResponseWriter, r *http.Request) {
	sb, p, ok := d.fileOp(w, r)
	if !ok {
		return
	}
	defer d.mu.Unlock()
	if f := sb.files[p]; f != nil {
		reply(w, http.StatusOK, info(p, f))
		return
	}
	notFound(w, p)
}

func (d *Daemon) mkdir(w http.ResponseWriter, r *http.Request) {
	sb, p, ok := d.fileOp(w, r)
	if !ok {
		return
	}
	defer d.mu.Unlock()
	if sb.files[p] != nil {
		fail(w, http.StatusConflict, api.Error{Code: api.CodeConflict, Message: p + " exists"})
		return
	}
	if parent := sb.files[path.Dir(p)]; parent == nil || !parent.dir {
		if r.URL.Query().Get("parents") != "true" {
			notFound(w, path.Dir(p))
			return
		}
		mkdirs(sb, p)
	}
	f := &file{dir: true, mode: 0o755, modTime: time.Now().UTC()}
	sb.files[p] = f
	reply(w, http.StatusCreated, info(p, f))
}
