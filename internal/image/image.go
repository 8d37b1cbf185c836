// Package image is the OCI image store: images pulled from registries, their layers unpacked
// once into content-addressed directories that sandboxes share read-only as overlay lower dirs.
//
// Layout under the store's directory (several airlock processes may share it):
//
//	lock                       flock: exclusive while the index or layers/ change
//	index.json                 refs → image records, layer sizes (written by rename)
//	layers/sha256/<diffID>/    one unpacked layer, overlay form (whiteouts are char 0:0,
//	                           opaque dirs carry trusted.overlay.opaque and user.overlay.opaque)
//	manifests/sha256/<digest>/ manifest.json and config.json as the registry served them
//	tmp/                       layers being unpacked or deleted; swept at Open
//
// A layer directory holds a shared flock while a lease (a live sandbox) or a pull uses it; GC
// deletes only layers it can lock exclusively.
package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/atomicfile"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

// DefaultMaxImageBytes is the size cap of an image when Options.MaxImageBytes is 0.
const DefaultMaxImageBytes int64 = 8 << 30

// Options configure a Store. The zero value is usable.
type Options struct {
	// MaxImageBytes caps an image's size: the compressed download and the unpacked bytes are
	// each checked against it. 0 means DefaultMaxImageBytes.
	MaxImageBytes int64
	// Keychain finds registry credentials; nil means authn.DefaultKeychain (the docker config:
	// $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
	Keychain authn.Keychain
	// Transport talks to registries; nil means remote.DefaultTransport, or one whose
	// connections Guard checks.
	Transport http.RoundTripper
	// Guard, when set, is the address policy of every connection to a registry (the daemon's:
	// no image reference makes it dial into its own network); refusals say "not allowed".
	Guard *netpolicy.Guard
	// AllowRegistry, when set, says which registry hosts a pull may reach.
	AllowRegistry func(host string) bool
	// Platform is chosen from multi-platform images; nil means linux/runtime.GOARCH.
	Platform *v1.Platform
	// Mirrors are registry hosts to pull a registry's images from, by the registry's name
	// ("docker.io" and "index.docker.io" alike); the image keeps its own reference.
	Mirrors map[string]string
}

// Image is a pulled image.
type Image struct {
	// Ref is the normalized reference, e.g. "index.docker.io/library/python:3.12-slim".
	Ref string `json:"ref"`
	// Digest is the manifest's digest ("sha256:..."); for a multi-platform image, the digest of
	// the chosen platform's manifest.
	Digest string `json:"digest"`
	// Layers are the diff IDs ("sha256:...") of the layers, bottom layer first.
	Layers []string  `json:"layers"`
	Config Config    `json:"config"`
	Size   int64     `json:"size"` // unpacked bytes: the uncompressed layer tars
	Pulled time.Time `json:"pulled"`
}

// APIs is API of each image.
func APIs(imgs []Image) []api.Image {
	out := make([]api.Image, len(imgs))
	for i, img := range imgs {
		out[i] = img.API()
	}
	return out
}

// API returns img as the HTTP API shows it.
func (img Image) API() api.Image {
	c, layers := img.Config, img.Layers
	if layers == nil {
		layers = []string{}
	}
	return api.Image{Ref: img.Ref, Digest: img.Digest, Layers: layers, Size: img.Size, Pulled: img.Pulled,
		Config: api.ImageConfig{Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, WorkingDir: c.WorkingDir, User: c.User}}
}

// Config is what a sandbox takes from the image's configuration.
type Config struct {
	Env        []string `json:"env,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Progress reports a layer's pull.
type Progress struct {
	Layer       string // the layer's (compressed) digest
	Done, Total int64  // compressed bytes
	Status      string // StatusDownloading, StatusUnpacking, StatusDone or StatusExists
}

// Progress statuses.
const (
	StatusDownloading = "downloading"
	StatusUnpacking   = "unpacking"
	StatusDone        = "done"
	StatusExists      = "exists"
)

// Store is an image store in a directory. Its methods are safe for concurrent use, also by
// several processes sharing the directory.
type Store struct {
	dir    string
	max    int64
	log    *slog.Logger
	remote []remote.Option // auth, transport, platform; the ctx is added per call
	// allowRegistry says which registries a pull may reach; nil allows any.
	allowRegistry func(host string) bool
	platform      v1.Platform
	mirrors       map[string]string // registry (as name.Registry.RegistryStr) → mirror host
}

// index is index.json.
type index struct {
	Images map[string]Image `json:"images"` // by normalized ref
	Layers map[string]int64 `json:"layers"` // diff ID → unpacked bytes
}

// Open opens the store in dir, creating it (0700) if needed, and sweeps what interrupted pulls
// and collections left in tmp/.
func Open(dir string, opts Options, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "layers", "sha256"), filepath.Join(dir, "manifests", "sha256"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	s := &Store{dir: dir, max: opts.MaxImageBytes, log: log}
	if s.max <= 0 {
		s.max = DefaultMaxImageBytes
	}
	s.platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if opts.Platform != nil {
		s.platform = *opts.Platform
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	s.remote = []remote.Option{remote.WithAuthFromKeychain(kc), remote.WithPlatform(s.platform)}
	s.allowRegistry = opts.AllowRegistry
	for reg, m := range opts.Mirrors {
		if r, err := name.NewRegistry(reg); err == nil {
			if s.mirrors == nil {
				s.mirrors = map[string]string{}
			}
			s.mirrors[r.RegistryStr()] = m
		}
	}
	tr := opts.Transport
	if tr == nil && opts.Guard != nil {
		t := remote.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // the proxy would be the address checked
		t.DialContext = opts.Guard.Dialer(30 * time.Second).DialContext
		tr = t
	}
	if tr != nil {
		s.remote = append(s.remote, remote.WithTransport(tr))
	}
	s.sweepTmp()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// sweepTmp removes what tmp/ holds that nobody holds a lock on: the leftovers of pulls and
// collections that were killed. A pull or GC in progress (in any process) keeps its lock; a
// pull creates and locks its directory under the store's lock, which the sweep takes too.
func (s *Store) sweepTmp() {
	unlock, err := s.lock()
	if err != nil {
		return
	}
	defer unlock()
	tmp := filepath.Join(s.dir, "tmp")
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(tmp, e.Name())
		if e.IsDir() {
			f, err := tryLock(p, unix.LOCK_EX)
			if err != nil {
				continue // in use
			}
			os.RemoveAll(p)
			f.Close()
			continue
		}
		os.Remove(p)
	}
}

// Get returns the image stored under ref (normalized first), or with the digest ref
// ("sha256:..."). Absent, it is ErrNotFound.
func (s *Store) Get(ref string) (Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	return idx.find(ref)
}

func (idx *index) find(ref string) (Image, error) {
	notFound := errdefs.New(errdefs.ErrNotFound, "image %q is not in the store; run `airlock pull %s`", ref, ref)
	if isDigest(ref) {
		for _, img := range idx.sorted() {
			if img.Digest == ref {
				return img, nil
			}
		}
		return Image{}, notFound
	}
	r, err := parseRef(ref)
	if err != nil {
		return Image{}, err
	}
	if img, ok := idx.Images[r.Name()]; ok {
		return img, nil
	}
	// repo@sha256:... also finds the image pulled by a tag of that repository.
	if d, ok := r.(name.Digest); ok {
		for _, img := range idx.sorted() {
			if img.Digest == d.DigestStr() && repoOf(img.Ref) == d.Context().Name() {
				return img, nil
			}
		}
	}
	return Image{}, notFound
}

// List returns the stored images sorted by Ref.
func (s *Store) List() ([]Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	return idx.sorted(), nil
}

func (idx *index) sorted() []Image {
	out := make([]Image, 0, len(idx.Images))
	for _, img := range idx.Images {
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Ref, b.Ref) })
	return out
}

// LayerDirs returns the absolute directories of img's unpacked layers, bottom layer first.
// Overlay wants them the other way round: lowerdir=top:...:bottom.
func (s *Store) LayerDirs(img Image) ([]string, error) {
	dirs := make([]string, len(img.Layers))
	for i, l := range img.Layers {
		d, err := s.layerDir(l)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(d); err != nil {
			return nil, errdefs.New(errdefs.ErrNotFound, "image %q: layer %s is not in the store; run `airlock pull %s`", img.Ref, l, img.Ref)
		}
		dirs[i] = d
	}
	return dirs, nil
}

// layerDir is where the layer with diff ID id is unpacked.
func (s *Store) layerDir(id string) (string, error) {
	hex, ok := strings.CutPrefix(id, "sha256:")
	if !ok || !isHex(hex) {
		return "", fmt.Errorf("layer %q: not a sha256 digest", id)
	}
	return filepath.Join(s.dir, "layers", "sha256", hex), nil
}

func (s *Store) manifestDir(digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || !isHex(hex) {
		return "", fmt.Errorf("manifest %q: not a sha256 digest", digest)
	}
	return filepath.Join(s.dir, "manifests", "sha256", hex), nil
}

// lock takes the store's exclusive lock; it is held briefly, never across a download. Each
// call opens the lock file anew, so it also excludes other goroutines of this process.
func (s *Store) lock() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("image store: lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// readIndex reads index.json; it is replaced by rename, so no lock is needed to read it.
func (s *Store) readIndex() (*index, error) {
	idx := &index{Images: map[string]Image{}, Layers: map[string]int64{}}
	b, err := os.ReadFile(filepath.Join(s.dir, "index.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if err := json.Unmarshal(b, idx); err != nil {
		return nil, fmt.Errorf("image store: %s: %w", filepath.Join(s.dir, "index.json"), err)
	}
	if idx.Images == nil {
		idx.Images = map[string]Image{}
	}
	if idx.Layers == nil {
		idx.Layers = map[string]int64{}
	}
	return idx, nil
}

// writeIndex replaces index.json; the caller holds the lock.
func (s *Store) writeIndex(idx *index) error {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.dir, "index.json"), b)
}

// writeFileAtomic writes path (atomicfile), root's alone.
func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("image store: write %s: %w", path, err)
	}
	return nil
}

// parseRef parses an image reference; "python:3.12-slim" means
// index.docker.io/library/python:3.12-slim.
func parseRef(ref string) (name.Reference, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, errdefs.Invalid("image", "an image reference is required, e.g. python:3.12-slim")
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.Invalid("image", "%q is not a valid image reference: %v", ref, err)
	}
	return r, nil
}

// repoOf returns the repository of a normalized ref ("host/repo:tag" or "host/repo@digest").
func repoOf(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

func isDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	return ok && isHex(hex)
}

func isHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// flock locks f, retrying on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// tryLock opens path (a directory) and locks it without waiting; how is LOCK_SH or LOCK_EX.
func tryLock(path string, how int) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := flock(f, how|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
