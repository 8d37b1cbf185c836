package microvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// A memory snapshot of a VM is the VM saved whole, into the snapshot's memory directory:
//
//	vmstate        QEMU's migration stream of the vCPUs and devices, written to a pipe QEMU got
//	               through its monitor (getfd) with the VM stopped, the guest agent's link at rest
//	ram.extents    guest RAM: the pages of its memfd the guest ever touched (writeExtents), so
//	               a 2 GiB guest that used 140 MiB saves 140 MiB, and a restore lays them into a
//	               new memfd without reading the rest (QEMU's own migration of RAM would scan
//	               every page of it, on both sides)
//	disk.extents   the writable disk's allocated extents (the raw image is sparse), read once the
//	               migration left the disk flushed and inactive
//	etc.erofs      the generated /etc's image, when the root is the host template's
//	manifest.json  the machine's shape, the read-only images it ran on, and each file's sha256
//
// A restore lays guest RAM and the disk out again, starts QEMU on the same shape, paused and
// waiting for an incoming migration, feeds it vmstate, and lets the VM run only if every digest
// (checked as each file is read) matched: a corrupt or truncated snapshot is refused, and the VM
// is gone.

// memFormat names the layout; a snapshot of another is refused.
const memFormat = "airlock-microvm-memory-v1"

// memManifest is a memory snapshot's manifest.json.
type memManifest struct {
	Format   string `json:"format"`
	Accel    string `json:"accel"`
	Kernel   string `json:"kernelSha256"`
	VCPUs    int    `json:"vcpus"`
	MemoryMB int64  `json:"guestMemoryMb"`
	DiskMB   int64  `json:"diskMb"`
	Network  bool   `json:"network"`
	// Images are the read-only images the VM ran on, in order: a file of the snapshot (File)
	// or one of the host's image cache (Cache, by name).
	Images []memImage `json:"images"`
	// Files are the snapshot's files and their digests.
	Files map[string]memFile `json:"files"`
}

type memImage struct {
	Serial string `json:"serial"`
	File   string `json:"file,omitempty"`
	Cache  string `json:"cache,omitempty"`
}

type memFile struct {
	Size   int64  `json:"size"`
	Sha256 string `json:"sha256"`
}

// The files of a memory snapshot.
const (
	fileState    = "vmstate"
	fileRAM      = "ram.extents"
	fileDisk     = "disk.extents"
	fileEtc      = "etc.erofs"
	fileManifest = "manifest.json"
)

// migrateBandwidth lifts QEMU's default migration speed limit (32 MiB/s): a save to a local pipe
// goes as fast as QEMU can write.
const migrateBandwidth = 1 << 40

// save writes the stopped VM's state to w, through a pipe QEMU gets on its monitor.
func (v *qemuVM) save(ctx context.Context, w io.Writer) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, pr)
		copied <- err
	}()
	err = v.migrate(ctx, pw)
	pw.Close()
	if cerr := <-copied; err == nil && cerr != nil {
		err = fmt.Errorf("write the VM's state: %w", cerr)
	}
	return err
}

// migrate has QEMU migrate the VM to fd and waits until it is done.
func (v *qemuVM) migrate(ctx context.Context, fd *os.File) error {
	q := v.qmp
	if err := ignoreShared(ctx, q); err != nil {
		return err
	}
	if err := q.call(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": migrateBandwidth}, nil); err != nil {
		return err
	}
	if err := q.call(ctx, "getfd", map[string]any{"fdname": "save"}, nil, int(fd.Fd())); err != nil {
		return err
	}
	if err := q.call(ctx, "migrate", map[string]any{"uri": "fd:save"}, nil); err != nil {
		return err
	}
	return v.awaitMigration(ctx)
}

// ignoreShared has QEMU leave guest RAM (shared: the level's memfd) out of a migration: the
// level saves and restores it itself, its pages the guest never touched left out.
func ignoreShared(ctx context.Context, q *qmp) error {
	return q.call(ctx, "migrate-set-capabilities", map[string]any{"capabilities": []map[string]any{{"capability": "x-ignore-shared", "state": true}}}, nil)
}

// load has the VM (started Incoming) read its state from r and waits until it is loaded; the VM
// stays paused. Guest RAM was laid out by the jail first (VMConfig.RAMFill).
func (v *qemuVM) load(ctx context.Context, r io.Reader) error {
	if v.filled != nil {
		if err := <-v.filled; err != nil {
			if errors.Is(err, snapshot.ErrCorrupt) {
				return err
			}
			return fmt.Errorf("lay out guest RAM: %w", err)
		}
	}
	if err := ignoreShared(ctx, v.qmp); err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	fed := make(chan error, 1)
	go func() {
		_, err := io.Copy(pw, r)
		pw.Close()
		fed <- err
	}()
	q := v.qmp
	err = q.call(ctx, "getfd", map[string]any{"fdname": "load"}, nil, int(pr.Fd()))
	pr.Close() // QEMU's now
	if err == nil {
		err = q.call(ctx, "migrate-incoming", map[string]any{"uri": "fd:load"}, nil)
	}
	if err == nil {
		err = v.awaitMigration(ctx)
	}
	ferr := <-fed // QEMU read it all, or is gone and the pipe broke
	if errors.Is(ferr, snapshot.ErrCorrupt) {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("load the VM's state: %w", err)
	}
	return ferr
}

// awaitMigration polls the migration's status until it completed or failed.
func (v *qemuVM) awaitMigration(ctx context.Context) error {
	for {
		var st struct {
			Status string `json:"status"`
			Error  string `json:"error-desc"`
		}
		if err := v.qmp.call(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("QEMU migration %s: %s", st.Status, st.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// digestOf copies r to dst (when dst is not nil) and returns its digest and size.
func digestOf(r io.Reader, dst io.Writer) (memFile, error) {
	h := sha256.New()
	w := io.Writer(h)
	if dst != nil {
		w = io.MultiWriter(h, dst)
	}
	n, err := io.Copy(w, r)
	return memFile{Size: n, Sha256: hex.EncodeToString(h.Sum(nil))}, err
}

// checked reads r, which must be want (its size and digest); a mismatch at the end is an error
// of the read, snapshot.ErrCorrupt.
type checked struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	want memFile
	name string
}

func newChecked(r io.Reader, want memFile, name string) *checked {
	return &checked{r: r, h: sha256.New(), want: want, name: name}
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if c.n > c.want.Size {
		return n, fmt.Errorf("memory snapshot: %s is longer than its manifest says: %w", c.name, snapshot.ErrCorrupt)
	}
	if err == io.EOF {
		if c.n != c.want.Size {
			return n, fmt.Errorf("memory snapshot: %s is truncated (%d of %d bytes): %w", c.name, c.n, c.want.Size, snapshot.ErrCorrupt)
		}
		if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want.Sha256 {
			return n, fmt.Errorf("memory snapshot: %s does not match its digest: %w", c.name, snapshot.ErrCorrupt)
		}
	}
	return n, err
}

// newRAM makes a VM's guest RAM: a memfd of mb MiB.
func newRAM(mb int64) (*os.File, error) {
	fd, err := unix.MemfdCreate("airlock-vm-ram", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("guest RAM: %w", err)
	}
	f := os.NewFile(uintptr(fd), "airlock-vm-ram")
	if err := f.Truncate(mb << 20); err != nil {
		f.Close()
		return nil, fmt.Errorf("guest RAM: %w", err)
	}
	return f, nil
}

// readManifest reads and checks a memory snapshot's manifest.
func readManifest(mem string) (*memManifest, error) {
	b, err := os.ReadFile(filepath.Join(mem, fileManifest))
	if err != nil {
		return nil, fmt.Errorf("memory snapshot: not one of the microvm level (%w): %w", err, snapshot.ErrCorrupt)
	}
	var m memManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("memory snapshot: manifest: %w: %w", err, snapshot.ErrCorrupt)
	}
	if m.Format != memFormat {
		return nil, fmt.Errorf("memory snapshot: format %q, this airlock reads %q: %w", m.Format, memFormat, errdefs.ErrInvalidArgument)
	}
	for _, name := range []string{fileState, fileRAM, fileDisk} {
		if _, ok := m.Files[name]; !ok {
			return nil, fmt.Errorf("memory snapshot: the manifest names no %s: %w", name, snapshot.ErrCorrupt)
		}
	}
	return &m, nil
}

// open opens file name of a memory snapshot, to be read through its digest check.
func (m *memManifest) open(mem, name string) (io.ReadCloser, error) {
	want, ok := m.Files[name]
	if !ok {
		return nil, fmt.Errorf("memory snapshot: the manifest names no %s: %w", name, snapshot.ErrCorrupt)
	}
	f, err := os.Open(filepath.Join(mem, filepath.Base(name)))
	if err != nil {
		return nil, fmt.Errorf("memory snapshot: %w: %w", err, snapshot.ErrCorrupt)
	}
	return struct {
		io.Reader
		io.Closer
	}{newChecked(f, want, name), f}, nil
}

// saveMachine saves the VM v into mem (its layer was written already): the link brought to
// rest, the VM stopped, its state and disk written, then both going on. shape is the VM's
// manifest without its files.
func saveMachine(ctx context.Context, log *slog.Logger, v *qemuVM, link *vmlink.Host, ram *os.File, disk string, images []Image, shape memManifest, mem string) (err error) {
	t0 := time.Now()
	var tQuiet, tStopped, tState time.Duration
	defer func() {
		log.Debug("VM saved", "quiesced", tQuiet, "stopped", tStopped, "state", tState, "took", time.Since(t0), "files", shape.Files, "err", err)
	}()
	if err := link.Quiesce(ctx); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer func() {
		if rerr := link.Resume(); err == nil && rerr != nil {
			err = fmt.Errorf("snapshot: %w", rerr)
		}
	}()
	tQuiet = time.Since(t0)
	if err := v.Pause(ctx); err != nil {
		return fmt.Errorf("snapshot: stop the VM: %w", err)
	}
	tStopped = time.Since(t0)
	defer func() {
		if cerr := v.Resume(context.WithoutCancel(ctx)); err == nil && cerr != nil {
			err = fmt.Errorf("snapshot: run the VM again: %w", cerr)
		}
	}()
	shape.Files = map[string]memFile{}
	write := func(name string, fill func(io.Writer) error) error {
		f, err := os.OpenFile(filepath.Join(mem, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		pr, pw := io.Pipe()
		digested := make(chan memFile, 1)
		go func() {
			d, err := digestOf(pr, f)
			pr.CloseWithError(err)
			digested <- d
		}()
		err = fill(pw)
		pw.CloseWithError(err)
		d := <-digested
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("snapshot: %s: %w", name, err)
		}
		shape.Files[name] = d
		return nil
	}
	if err := write(fileState, func(w io.Writer) error { return v.save(ctx, w) }); err != nil {
		return err
	}
	tState = time.Since(t0)
	if err := write(fileRAM, func(w io.Writer) error { return writeExtents(w, ram) }); err != nil {
		return err
	}
	// The migration left the disk flushed, and QEMU writes no more of it until the VM runs.
	if err := write(fileDisk, func(w io.Writer) error {
		f, err := os.Open(disk)
		if err != nil {
			return err
		}
		defer f.Close()
		return writeExtents(w, f)
	}); err != nil {
		return err
	}
	for _, img := range images {
		if img.Serial != vm.SerialEtc {
			continue
		}
		if err := write(fileEtc, func(w io.Writer) error {
			f, err := os.Open(img.Path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		}); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(shape, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(mem, fileManifest), b, 0o600)
}

// memRestore is a memory snapshot a VM is restored from.
type memRestore struct {
	dir string
	m   *memManifest
	// Durations of the restore's steps, for the log.
	tDisk, tStarted, tLoaded time.Duration
}

// dirOrNone is the snapshot's directory, or "" for none (host.Launcher.Restore).
func (r *memRestore) dirOrNone() string {
	if r == nil {
		return ""
	}
	return r.dir
}

// fits checks that the VM about to be made has the saved one's shape: its devices and RAM are
// what the saved state describes.
func (r *memRestore) fits(now *memManifest) error {
	m := r.m
	switch {
	case m.Accel != now.Accel:
		return fmt.Errorf("memory snapshot: saved under %s, and this host runs VMs under %s: %w", m.Accel, now.Accel, errdefs.ErrInvalidArgument)
	case m.Kernel != now.Kernel:
		return fmt.Errorf("memory snapshot: saved with another guest kernel (sha256 %.12s, installed %.12s); restore it without memory: %w", m.Kernel, now.Kernel, errdefs.ErrInvalidArgument)
	case m.VCPUs != now.VCPUs || m.MemoryMB != now.MemoryMB:
		return errdefs.Invalid("resources", "the snapshot's VM had %d vCPUs and %d MiB of RAM; the sandbox's resources make %d and %d", m.VCPUs, m.MemoryMB, now.VCPUs, now.MemoryMB)
	case m.DiskMB != now.DiskMB:
		return errdefs.Invalid("resources.diskMb", "the snapshot's disk is %d MiB, not %d", m.DiskMB, now.DiskMB)
	case m.Network != now.Network:
		return errdefs.Invalid("network.egressPolicy", "the snapshot's VM had a network card exactly when its egress policy was not none: restore it with the same kind of policy")
	case len(m.Images) != len(now.Images):
		return fmt.Errorf("memory snapshot: the VM ran on %d read-only images, this one %d: %w", len(m.Images), len(now.Images), errdefs.ErrInvalidArgument)
	}
	return nil
}

// disk lays the saved disk out at path, owned by uid.
func (r *memRestore) disk(path string, uid int) error {
	src, err := r.m.open(r.dir, fileDisk)
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	size := r.m.DiskMB << 20
	if err := f.Truncate(size); err != nil {
		return err
	}
	if err := layExtents(src, f, size); err != nil {
		return err
	}
	// The digest is checked at the end of the stream: read it, should the extents stop short.
	if _, err := io.Copy(io.Discard, src); err != nil {
		return err
	}
	if err := f.Chown(uid, uid); err != nil {
		return err
	}
	return f.Close()
}

// ram opens the saved guest RAM, checked as it is read (VMConfig.RAMFill).
func (r *memRestore) ram() (io.ReadCloser, error) { return r.m.open(r.dir, fileRAM) }

// load feeds the saved state to v, checked against its digest as it goes.
func (r *memRestore) load(ctx context.Context, v *qemuVM) error {
	f, err := r.m.open(r.dir, fileState)
	if err != nil {
		return err
	}
	defer f.Close()
	return v.load(ctx, f)
}

// restoredImages are the read-only images of a VM restored from r: the host's cached images it
// ran on (remade from vp, the plan of the restored spec, when gone from the cache: the same tree
// makes the same image), and the snapshot's own copy of its /etc, copied into dir.
func (d *Driver) restoredImages(ctx context.Context, r *memRestore, vp *vmPlan, dir string) ([]Image, error) {
	var out []Image
	var remade []Image
	for _, img := range r.m.Images {
		switch {
		case img.File != "":
			src, err := r.m.open(r.dir, img.File)
			if err != nil {
				return nil, err
			}
			p := filepath.Join(dir, filepath.Base(img.File))
			err = copyTo(src, p)
			src.Close()
			if err != nil {
				return nil, err
			}
			out = append(out, Image{Path: p, Serial: img.Serial})
		default:
			p := filepath.Join(d.cfg.ImageDir, filepath.Base(img.Cache))
			if _, err := os.Stat(p); err != nil {
				if remade == nil {
					if remade, err = d.images(ctx, vp); err != nil {
						return nil, err
					}
				}
				found := false
				for _, m := range remade {
					found = found || m.Path == p
				}
				if !found {
					return nil, fmt.Errorf("memory snapshot: the read-only image %s the VM ran on is gone, and its tree changed since (the host template, or the image): restore it without memory: %w", img.Cache, errdefs.ErrInvalidArgument)
				}
			}
			touch(p)
			out = append(out, Image{Path: p, Serial: img.Serial})
		}
	}
	return out, nil
}

// copyTo copies r into a new file at path, root's alone (the VMM gets it as a descriptor).
func copyTo(r io.Reader, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
