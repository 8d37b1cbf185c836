package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Lease keeps an image's layers in the store while a sandbox uses them: it holds a shared
// flock on each layer directory, which GC (in any process) will not delete. The locks go with
// the process, so a crashed daemon leaks nothing.
type Lease struct {
	once  sync.Once
	files []*os.File
}

// Release lets GC delete the layers again. It is idempotent.
func (l *Lease) Release() {
	l.once.Do(func() {
		for _, f := range l.files {
			f.Close()
		}
		l.files = nil
	})
}

// Acquire leases img's layers. Taken under the store's lock, so no GC can delete a layer
// between the image's lookup and the lease.
func (s *Store) Acquire(img Image) (*Lease, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	l := &Lease{}
	for _, id := range img.Layers {
		d, err := s.layerDir(id)
		if err != nil {
			l.Release()
			return nil, err
		}
		f, err := tryLock(d, unix.LOCK_SH)
		if err != nil {
			l.Release()
			if errors.Is(err, os.ErrNotExist) {
				return nil, errdefs.New(errdefs.ErrNotFound, "image %q: layer %s is not in the store; run `airlock pull %s`", img.Ref, id, img.Ref)
			}
			return nil, fmt.Errorf("image %q: lease layer %s: %w", img.Ref, id, err)
		}
		l.files = append(l.files, f)
	}
	return l, nil
}

// Collected is what Remove or GC did.
type Collected struct {
	Refs   []string // the references Remove untagged, sorted
	Layers int      // layers deleted
	Bytes  int64    // bytes freed (layers and manifests)
	// InUse counts the layers no image refers to that were kept because a lease (a live
	// sandbox) or a pull holds them; a later GC collects them once they are let go.
	InUse int
}

// API returns c as the HTTP API shows it.
func (c Collected) API() api.ImageRemoval {
	refs := c.Refs
	if refs == nil {
		refs = []string{}
	}
	return api.ImageRemoval{Refs: refs, LayersRemoved: c.Layers, BytesFreed: c.Bytes, LayersInUse: c.InUse}
}

// Remove untags ref (normalized first; a digest "sha256:..." removes every ref of that
// image), then collects what no image refers to. Layers a sandbox uses stay (Collected.InUse):
// its lease keeps them until it ends.
func (s *Store) Remove(ref string) (Collected, error) {
	unlock, err := s.lock()
	if err != nil {
		return Collected{}, err
	}
	var refs []string
	idx, err := s.readIndex()
	if err == nil {
		var img Image
		if img, err = idx.find(ref); err == nil {
			if isDigest(ref) {
				for k, v := range idx.Images {
					if v.Digest == img.Digest {
						delete(idx.Images, k)
						refs = append(refs, k)
					}
				}
			} else {
				delete(idx.Images, img.Ref)
				refs = append(refs, img.Ref)
			}
			err = s.writeIndex(idx)
		}
	}
	unlock()
	if err != nil {
		return Collected{}, err
	}
	slices.Sort(refs)
	c, err := s.GC()
	c.Refs = refs
	return c, err
}

// GC deletes the unpacked layers and the manifests no image refers to, except layers a lease
// or a pull holds (counted in InUse).
func (s *Store) GC() (c Collected, err error) {
	unlock, err := s.lock()
	if err != nil {
		return c, err
	}
	// Layers to delete: locked, renamed into tmp/, deleted once the store's lock is let go.
	type doomedLayer struct {
		lock *os.File
		path string
	}
	var doomed []doomedLayer
	defer func() {
		for _, d := range doomed {
			os.RemoveAll(d.path)
			d.lock.Close()
		}
	}()
	defer unlock()

	idx, err := s.readIndex()
	if err != nil {
		return c, err
	}
	layers, manifests := map[string]bool{}, map[string]bool{}
	for _, img := range idx.Images {
		manifests[img.Digest] = true
		for _, l := range img.Layers {
			layers[l] = true
		}
	}
	changed := false
	entries, err := os.ReadDir(filepath.Join(s.dir, "layers", "sha256"))
	if err != nil {
		return c, fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		id := "sha256:" + e.Name()
		if layers[id] {
			continue
		}
		d := filepath.Join(s.dir, "layers", "sha256", e.Name())
		f, err := tryLock(d, unix.LOCK_EX)
		if err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				c.InUse++ // leased
			}
			continue // or not ours to understand
		}
		n, ok := idx.Layers[id]
		if !ok {
			n = duSize(d)
		}
		tmp := filepath.Join(s.dir, "tmp", "gc-"+e.Name())
		if err := os.Rename(d, tmp); err != nil {
			f.Close()
			s.log.Warn("image store: cannot collect layer", "layer", id, "err", err)
			continue
		}
		// The lock stays with the directory, so no sweep in another process takes it meanwhile.
		doomed = append(doomed, doomedLayer{f, tmp})
		delete(idx.Layers, id)
		changed = true
		c.Layers++
		c.Bytes += n
	}
	for id := range idx.Layers {
		if !layers[id] {
			if d, _ := s.layerDir(id); d != "" {
				if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
					delete(idx.Layers, id)
					changed = true
				}
			}
		}
	}
	entries, err = os.ReadDir(filepath.Join(s.dir, "manifests", "sha256"))
	if err != nil {
		return c, fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		if manifests["sha256:"+e.Name()] {
			continue
		}
		d := filepath.Join(s.dir, "manifests", "sha256", e.Name())
		c.Bytes += duSize(d)
		os.RemoveAll(d)
	}
	if changed {
		if err := s.writeIndex(idx); err != nil {
			return c, err
		}
	}
	if c.Layers > 0 {
		s.log.Info("image store: collected", "layers", c.Layers, "bytes", c.Bytes, "inUse", c.InUse)
	}
	return c, nil
}

// Layers gives a sandbox the unpacked layers of ref (bottom first) and the image's environment,
// pulling it first when it is not in the store; release lets the layers be collected again once
// the sandbox is gone.
func (s *Store) Layers(ctx context.Context, ref string) (dirs, env []string, release func(), err error) {
	img, err := s.Ensure(ctx, ref, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	lease, err := s.Acquire(img)
	if err != nil {
		return nil, nil, nil, err
	}
	if dirs, err = s.LayerDirs(img); err != nil {
		lease.Release()
		return nil, nil, nil, err
	}
	return dirs, img.Config.Env, lease.Release, nil
}
