package microvm

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
)

// OpenFiles implements driver.FileServer: the guest agent serves the files API from inside the
// VM (guest/vm/files.go), its paths resolved beneath the sandbox's root with the sandbox user's
// ids; the host never reads the VM's disk. A paused VM cannot answer.
func (s *Sandbox) OpenFiles(ctx context.Context) (driver.Files, error) {
	if s.in.ks.paused.Load() {
		return nil, fmt.Errorf("sandbox %s is paused, and its VM serves its files: resume it first: %w", s.ID(), errdefs.ErrConflict)
	}
	return &vmFiles{ctx: ctx, link: s.in.link}, nil
}

// vmFiles is one files-API session of a VM.
type vmFiles struct {
	ctx  context.Context
	link *vmlink.Host
}

func (f *vmFiles) call(kind string, c vmlink.FileCall) (vmlink.FileReply, error) {
	var r vmlink.FileReply
	if err := f.link.Call(f.ctx, kind, c, &r); err != nil {
		return r, fmt.Errorf("the VM's files: %w", err)
	}
	return r, r.Err.Err()
}

func info(r vmlink.FileReply, err error) (api.FileInfo, error) {
	if err != nil || r.Info == nil {
		return api.FileInfo{}, err
	}
	return *r.Info, nil
}

func (f *vmFiles) Open(p string) (io.ReadCloser, api.FileInfo, error) {
	var r vmlink.FileReply
	rc, err := f.link.CallReader(f.ctx, vmlink.FilesOpen, vmlink.FileCall{Path: p}, &r)
	if err != nil {
		return nil, api.FileInfo{}, fmt.Errorf("the VM's files: %w", err)
	}
	if err := r.Err.Err(); err != nil || r.Info == nil {
		rc.Close()
		return nil, api.FileInfo{}, err
	}
	return rc, *r.Info, nil
}

func (f *vmFiles) Stat(p string) (api.FileInfo, error) {
	return info(f.call(vmlink.FilesStat, vmlink.FileCall{Path: p}))
}

func (f *vmFiles) List(p string) ([]api.FileInfo, error) {
	r, err := f.call(vmlink.FilesList, vmlink.FileCall{Path: p})
	return r.List, err
}

func (f *vmFiles) Write(p string, src io.Reader, mode os.FileMode, limit int64, parents bool) (api.FileInfo, error) {
	var r vmlink.FileReply
	if err := f.link.CallUpload(f.ctx, vmlink.FilesWrite, vmlink.FileCall{Path: p, Mode: mode, Limit: limit, Parents: parents}, src, &r); err != nil {
		if r.Err != nil {
			return api.FileInfo{}, r.Err.Err() // the VM's own answer says more
		}
		return api.FileInfo{}, err
	}
	return info(r, r.Err.Err())
}

func (f *vmFiles) Mkdir(p string, parents bool) (api.FileInfo, error) {
	return info(f.call(vmlink.FilesMkdir, vmlink.FileCall{Path: p, Parents: parents}))
}

func (f *vmFiles) Remove(p string, recursive bool) error {
	_, err := f.call(vmlink.FilesRemove, vmlink.FileCall{Path: p, Recursive: recursive})
	return err
}

func (f *vmFiles) Close() error { return nil }
