package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

// pullParallel is how many layers a pull downloads at once.
const pullParallel = 3

// Ensure returns the stored image for ref, pulling it when it is absent.
func (s *Store) Ensure(ctx context.Context, ref string, progress func(Progress)) (Image, error) {
	img, err := s.Get(ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return s.Pull(ctx, ref, progress)
	}
	return img, err
}

// Pull fetches ref's manifest from its registry, downloads and unpacks the layers the store
// lacks, and records the image under ref. Layers are verified while they stream (the blob's
// digest and the diff ID of the uncompressed tar) and appear in the store only whole. progress,
// if not nil, is called from one goroutine at a time.
func (s *Store) Pull(ctx context.Context, ref string, progress func(Progress)) (Image, error) {
	r, err := s.allowedRef(ref)
	if err != nil {
		return Image{}, err
	}
	ri, err := s.fetchManifest(ctx, r)
	if err != nil {
		return Image{}, err
	}
	sizes, release, err := s.fetchLayers(ctx, ri, serialized(progress))
	if err != nil {
		return Image{}, err
	}
	defer release()
	img := ri.image(sizes)
	if err := s.record(img, ri, sizes); err != nil {
		return Image{}, err
	}
	s.log.Info("image pulled", "ref", img.Ref, "digest", img.Digest, "layers", len(img.Layers), "size", img.Size)
	return img, nil
}

// allowedRef parses ref and refuses a registry the store may not pull from.
func (s *Store) allowedRef(ref string) (name.Reference, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	if reg := r.Context().RegistryStr(); s.allowRegistry != nil && !s.allowRegistry(reg) {
		return nil, errdefs.Denied("ref", api.CodeImageNotAllowed, "pulling %s: registry %s is not allowed (images.registries)", r.Name(), reg)
	}
	return r, nil
}

// serialized is progress called from one goroutine at a time, or a no-op for nil.
func serialized(progress func(Progress)) func(Progress) {
	if progress == nil {
		return func(Progress) {}
	}
	var mu sync.Mutex
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		progress(p)
	}
}

// remoteImage is an image as its registry serves it: what Pull downloads and records.
type remoteImage struct {
	ref                    name.Reference
	img                    v1.Image
	digest                 v1.Hash // the manifest's
	manifest               *v1.Manifest
	config                 *v1.ConfigFile
	rawManifest, rawConfig []byte
}

// fetchManifest fetches r's manifest and config, and refuses an image of another platform, one
// whose manifest and config disagree, and one past the store's size cap compressed.
func (s *Store) fetchManifest(ctx context.Context, r name.Reference) (remoteImage, error) {
	ri := remoteImage{ref: r}
	var err error
	if ri.img, ri.digest, err = s.resolve(ctx, s.source(r)); err != nil {
		return ri, err
	}
	if ri.manifest, err = ri.img.Manifest(); err != nil {
		return ri, registryError(r, err)
	}
	if ri.rawConfig, err = ri.img.RawConfigFile(); err != nil {
		return ri, registryError(r, err)
	}
	if ri.config, err = ri.img.ConfigFile(); err != nil {
		return ri, fmt.Errorf("image %s: config: %w", r.Name(), err)
	}
	cf, m := ri.config, ri.manifest
	if (cf.OS != "" && cf.OS != s.platform.OS) || (cf.Architecture != "" && cf.Architecture != s.platform.Architecture) {
		return ri, errdefs.New(errdefs.ErrUnavailable, "image %s is for %s/%s, not %s", r.Name(), cf.OS, cf.Architecture, s.platform.String())
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return ri, fmt.Errorf("image %s: the manifest has %d layers, the config %d diff IDs", r.Name(), len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	compressed := m.Config.Size
	for _, l := range m.Layers {
		compressed += l.Size
	}
	if compressed > s.max {
		return ri, errdefs.Invalid("image", "%s is %d bytes compressed, over the cap of %d bytes (MaxImageBytes)", r.Name(), compressed, s.max)
	}
	if ri.rawManifest, err = ri.img.RawManifest(); err != nil {
		return ri, registryError(r, err)
	}
	return ri, nil
}

// fetchLayers leases the layers of ri the store has (so that no GC takes them while the rest
// download), and downloads and unpacks the rest, pullParallel at a time, within the store's size
// cap unpacked. It returns each layer's unpacked size, and release, which ends the leases: call
// it once the index refers to the layers. On an error nothing stays leased.
func (s *Store) fetchLayers(ctx context.Context, ri remoteImage, report func(Progress)) (sizes []int64, release func(), err error) {
	layers, diffIDs := ri.manifest.Layers, ri.config.RootFS.DiffIDs
	leases := make([]*os.File, len(layers))
	closeLeases := func() {
		for _, f := range leases {
			if f != nil {
				f.Close()
			}
		}
	}
	defer func() {
		if err != nil {
			closeLeases()
		}
	}()
	sizes = make([]int64, len(layers))
	if err := s.leaseExisting(diffIDs, leases, sizes); err != nil {
		return nil, nil, err
	}
	var unpacked atomic.Int64
	for i, f := range leases {
		if f != nil {
			unpacked.Add(sizes[i])
			report(Progress{Layer: layers[i].Digest.String(), Done: layers[i].Size, Total: layers[i].Size, Status: StatusExists})
		}
	}
	if unpacked.Load() > s.max {
		return nil, nil, errdefs.Invalid("image", "%s unpacks to more than the cap of %d bytes (MaxImageBytes)", ri.ref.Name(), s.max)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pullParallel)
	for i, desc := range layers {
		if leases[i] != nil {
			continue
		}
		g.Go(func() error {
			l, err := ri.img.LayerByDigest(desc.Digest)
			if err != nil {
				return registryError(ri.ref, err)
			}
			f, n, err := s.fetchLayer(gctx, ri.ref, l, desc, diffIDs[i], &unpacked, report)
			leases[i], sizes[i] = f, n
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return sizes, closeLeases, nil
}

// image is ri as the store records it, its layers of the given unpacked sizes.
func (ri remoteImage) image(sizes []int64) Image {
	cf := ri.config
	img := Image{
		Ref:    ri.ref.Name(),
		Digest: ri.digest.String(),
		Config: Config{
			Env:        cf.Config.Env,
			Entrypoint: cf.Config.Entrypoint,
			Cmd:        cf.Config.Cmd,
			WorkingDir: cf.Config.WorkingDir,
			User:       cf.Config.User,
		},
		Pulled: time.Now().UTC(),
	}
	for i, id := range cf.RootFS.DiffIDs {
		img.Layers = append(img.Layers, id.String())
		img.Size += sizes[i]
	}
	return img
}

// record keeps ri's manifest and config and records img, whose layers have the given sizes, in
// the index under its ref.
func (s *Store) record(img Image, ri remoteImage, sizes []int64) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	// Under the lock, so that no GC takes the manifest before the index refers to it.
	if err := s.saveManifest(img.Digest, ri.rawManifest, ri.rawConfig); err != nil {
		return err
	}
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	idx.Images[img.Ref] = img
	for i, id := range img.Layers {
		idx.Layers[id] = sizes[i]
	}
	return s.writeIndex(idx)
}

// resolve fetches r's manifest; for a multi-platform index, the manifest of the store's
// platform. It returns the image and its manifest's digest.
func (s *Store) resolve(ctx context.Context, r name.Reference) (v1.Image, v1.Hash, error) {
	opts := append([]remote.Option{remote.WithContext(ctx)}, s.remote...)
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, v1.Hash{}, registryError(r, err)
	}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return nil, v1.Hash{}, registryError(r, err)
		}
		return img, desc.Digest, nil
	}
	ii, err := desc.ImageIndex()
	if err != nil {
		return nil, v1.Hash{}, registryError(r, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, registryError(r, err)
	}
	var have []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			continue
		}
		if m.Platform.Satisfies(s.platform) && m.MediaType.IsImage() {
			img, err := ii.Image(m.Digest)
			if err != nil {
				return nil, v1.Hash{}, registryError(r, err)
			}
			return img, m.Digest, nil
		}
		have = append(have, m.Platform.String())
	}
	return nil, v1.Hash{}, errdefs.New(errdefs.ErrUnavailable, "image %s has no variant for platform %s (it has: %s)", r.Name(), s.platform.String(), strings.Join(have, ", "))
}

// registryError says what a registry's refusal means for the user: a missing image is
// ErrNotFound; a refused login is ErrUnavailable with how to log in (the host lacks the
// credentials — not the API caller's authentication); an unreachable registry is
// ErrUnavailable.
func registryError(r name.Reference, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pulling %s: %w", r.Name(), err)
	}
	reg := r.Context().RegistryStr()
	if errors.Is(err, netpolicy.ErrRefused) {
		// Said without the address, so that a refusal tells nothing of what is there.
		return errdefs.Denied("ref", api.CodeImageNotAllowed, "pulling %s: registry %s is not allowed", r.Name(), reg)
	}
	if te, ok := errors.AsType[*transport.Error](err); ok {
		codes := map[transport.ErrorCode]bool{}
		for _, d := range te.Errors {
			codes[d.Code] = true
		}
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden ||
			codes[transport.UnauthorizedErrorCode] || codes[transport.DeniedErrorCode]:
			return errdefs.New(errdefs.ErrUnavailable,
				"pulling %s: registry %s refused access (HTTP %d): authentication failed, or the repository does not exist; "+
					"log in with `docker login %s` (credentials are read from $DOCKER_CONFIG/config.json or ~/.docker/config.json)",
				r.Name(), reg, te.StatusCode, reg)
		case te.StatusCode == http.StatusNotFound || codes[transport.ManifestUnknownErrorCode] || codes[transport.NameUnknownErrorCode]:
			return errdefs.New(errdefs.ErrNotFound, "image %s not found in registry %s", r.Name(), reg)
		case te.StatusCode == http.StatusTooManyRequests || codes[transport.TooManyRequestsErrorCode]:
			return errdefs.New(errdefs.ErrUnavailable, "pulling %s: registry %s is rate limiting pulls (HTTP 429); try later or log in", r.Name(), reg)
		}
		return fmt.Errorf("pulling %s from %s: %w", r.Name(), reg, err)
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return errdefs.New(errdefs.ErrUnavailable, "pulling %s: registry %s is unreachable: %v", r.Name(), reg, err)
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return errdefs.New(errdefs.ErrUnavailable, "pulling %s: registry %s is unreachable: %v", r.Name(), reg, err)
	}
	return fmt.Errorf("pulling %s: %w", r.Name(), err)
}

// saveManifest keeps the manifest and config as the registry served them.
func (s *Store) saveManifest(digest string, manifest, config []byte) error {
	d, err := s.manifestDir(digest)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(d, "manifest.json"), manifest); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(d, "config.json"), config)
}

// leaseExisting takes a shared lock on each layer already in the store, and its size.
func (s *Store) leaseExisting(ids []v1.Hash, leases []*os.File, sizes []int64) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	for i, id := range ids {
		d, err := s.layerDir(id.String())
		if err != nil {
			return err
		}
		f, err := tryLock(d, unix.LOCK_SH)
		if err != nil {
			continue // absent (or being unpacked, which cannot be: renames happen under the lock)
		}
		n, ok := idx.Layers[id.String()]
		if !ok {
			n = duSize(d) // unpacked by a pull that died before it wrote the index
		}
		leases[i], sizes[i] = f, n
	}
	return nil
}

// fetchLayer downloads, verifies and unpacks one layer into tmp/, then renames it into
// layers/. It returns the layer directory locked shared, and the unpacked bytes.
func (s *Store) fetchLayer(ctx context.Context, r name.Reference, l v1.Layer, desc v1.Descriptor, diffID v1.Hash, unpacked *atomic.Int64, report func(Progress)) (*os.File, int64, error) {
	dst, err := s.layerDir(diffID.String())
	if err != nil {
		return nil, 0, err
	}
	tmp, lease, err := s.tmpDir()
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*os.File, int64, error) {
		os.RemoveAll(tmp)
		lease.Close()
		return nil, 0, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return fail(registryError(r, err))
	}
	defer rc.Close()

	layer := desc.Digest.String()
	blob := &verifier{r: rc, h: sha256.New(), limit: desc.Size, ctx: ctx}
	blob.progress = func(done int64) {
		report(Progress{Layer: layer, Done: done, Total: desc.Size, Status: StatusDownloading})
	}
	u := &unpacker{layer: layer, log: s.log, budget: unpacked, max: s.max}
	n, uerr := u.unpack(blob, tmp)
	// Read to the end even after a failure, so that a corrupted blob is reported as that
	// rather than as whatever the decompressor or tar reader made of it.
	_, derr := io.Copy(io.Discard, blob)
	if got := blob.digest(); got != desc.Digest.String() && (derr == nil || blob.n >= desc.Size) {
		return fail(fmt.Errorf("layer %s: digest mismatch: expected %s, got %s", layer, desc.Digest, got))
	}
	if uerr != nil {
		return fail(fmt.Errorf("layer %s: %w", layer, uerr))
	}
	if derr != nil {
		return fail(registryError(r, derr))
	}
	if blob.n != desc.Size {
		return fail(fmt.Errorf("layer %s: size mismatch: expected %d bytes, got %d", layer, desc.Size, blob.n))
	}
	if got := u.diffID(); got != diffID.String() {
		return fail(fmt.Errorf("layer %s: diff ID mismatch: expected %s, got %s", layer, diffID, got))
	}
	report(Progress{Layer: layer, Done: desc.Size, Total: desc.Size, Status: StatusUnpacking})
	// On disk before it is in place: the index will say it is whole.
	if err := unix.Syncfs(int(lease.Fd())); err != nil {
		return fail(fmt.Errorf("image store: syncfs: %w", err))
	}

	unlock, err := s.lock()
	if err != nil {
		return fail(err)
	}
	defer unlock()
	if f, err := tryLock(dst, unix.LOCK_SH); err == nil {
		// Another pull placed it meanwhile.
		os.RemoveAll(tmp)
		lease.Close()
		report(Progress{Layer: layer, Done: desc.Size, Total: desc.Size, Status: StatusExists})
		return f, n, nil
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fail(fmt.Errorf("image store: %w", err))
	}
	report(Progress{Layer: layer, Done: desc.Size, Total: desc.Size, Status: StatusDone})
	return lease, n, nil
}

// tmpDir creates a directory in tmp/ and locks it, under the store's lock so that the sweep
// of another process's Open cannot take it in between.
func (s *Store) tmpDir() (string, *os.File, error) {
	unlock, err := s.lock()
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "layer-")
	if err != nil {
		return "", nil, fmt.Errorf("image store: %w", err)
	}
	f, err := tryLock(tmp, unix.LOCK_SH)
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("image store: %w", err)
	}
	return tmp, f, nil
}

// verifier hashes and counts the compressed stream as it is read, refuses more than limit
// bytes, stops when ctx ends, and reports progress at most every 100 ms.
type verifier struct {
	r        io.Reader
	h        hash.Hash
	n, limit int64
	ctx      context.Context
	progress func(done int64)
	last     time.Time
}

func (v *verifier) Read(p []byte) (int, error) {
	if err := v.ctx.Err(); err != nil {
		return 0, err
	}
	if v.n >= v.limit {
		// One more byte tells whether the blob is longer than the manifest says.
		var b [1]byte
		if n, _ := v.r.Read(b[:]); n > 0 {
			v.h.Write(b[:n])
			v.n += int64(n)
			return 0, fmt.Errorf("blob is larger than the %d bytes the manifest says", v.limit)
		}
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if now := time.Now(); now.Sub(v.last) > 100*time.Millisecond || err == io.EOF {
		v.last = now
		v.progress(v.n)
	}
	return n, err
}

func (v *verifier) digest() string { return "sha256:" + hex.EncodeToString(v.h.Sum(nil)) }

// source is where r is pulled from: r itself, or the same repository and tag or digest on its
// registry's mirror (Options.Mirrors).
func (s *Store) source(r name.Reference) name.Reference {
	m, ok := s.mirrors[r.Context().RegistryStr()]
	if !ok {
		return r
	}
	sep := ":"
	if _, ok := r.(name.Digest); ok {
		sep = "@"
	}
	src, err := name.ParseReference(m + "/" + r.Context().RepositoryStr() + sep + r.Identifier())
	if err != nil {
		return r // Settings.Validate checked the host; a reference it cannot make is pulled as it is
	}
	return src
}
