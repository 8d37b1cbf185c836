package manager

import (
	"context"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsroot"
)

// Files is a live sandbox's filesystem, opened for one request of the files API. Paths are
// sandbox paths; a relative one is taken from the sandbox's workdir. Close it when done.
type Files struct {
	driver.Files
	workdir string
	release func()
}

// Files opens the filesystem of a live sandbox (ready, running or paused) of the tenant in ctx:
// the host reaches it (driver.FileRooter), or the sandbox serves it (driver.FileServer: a VM).
func (m *Manager) Files(ctx context.Context, id string) (*Files, error) {
	b, err := m.live(ctx, id, "use files")
	if err != nil {
		return nil, err
	}
	sb, err := b.begin(ctx, "use files", false)
	if err != nil {
		return nil, err
	}
	// The scans of execs that answered come first, so that what this session changes is not
	// taken for theirs.
	b.waitScans(ctx, 5*time.Second)
	var fs driver.Files
	switch d := sb.(type) {
	case driver.FileRooter:
		dir, uid, gid, ferr := d.FileRoot()
		fs, err = rootFiles{fsroot.NewAsOwner(dir, uid, gid)}, ferr
	case driver.FileServer:
		fs, err = d.OpenFiles(ctx)
	default:
		b.done()
		return nil, fmt.Errorf("isolation level %s has no files API yet: %w", b.level(), errdefs.ErrUnavailable)
	}
	if err != nil {
		b.done()
		return nil, fmt.Errorf("open the files of sandbox %s: %w", id, err)
	}
	release := func() {
		// What the files API changed is no exec's: a scan now reports it apart (files.changed).
		m.queueScan(b, scanJob{tenant: b.owner()})
		b.done()
	}
	return &Files{Files: fs, workdir: b.specNow().Workdir, release: release}, nil
}

// rootFiles is a filesystem the host reaches, as driver.Files.
type rootFiles struct{ *fsroot.Root }

func (r rootFiles) Open(p string) (io.ReadCloser, api.FileInfo, error) {
	f, info, err := r.Root.Open(p)
	if err != nil {
		return nil, info, err
	}
	return f, info, nil
}

// Close releases the filesystem.
func (f *Files) Close() error {
	err := f.Files.Close()
	f.release()
	return err
}

// Abs resolves p against the sandbox's workdir; the result is absolute and clean.
func (f *Files) Abs(p string) (string, error) {
	if p == "" {
		return "", errdefs.Invalid("path", "is required")
	}
	if !path.IsAbs(p) {
		p = path.Join(f.workdir, p)
	}
	return path.Clean(p), nil
}
