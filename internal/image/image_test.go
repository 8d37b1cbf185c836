package image

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore opens a store in a temporary directory, with no credentials from the host.
func newStore(t *testing.T, opts Options) *Store {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	s, err := Open(filepath.Join(t.TempDir(), "images"), opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// requireRoot skips tests that create files owned by others, device nodes and xattrs.
func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "unpacking preserves owners and creates whiteout devices")
}

// blobCounter counts the registry's blob downloads by digest.
type blobCounter struct {
	mu sync.Mutex
	n  map[string]int // digest → GETs
}

func (c *blobCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := strings.Index(r.URL.Path, "/blobs/sha256:"); i >= 0 && r.Method == http.MethodGet {
			c.mu.Lock()
			c.n[r.URL.Path[i+len("/blobs/"):]]++
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (c *blobCounter) get(digest string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[digest]
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// assertClean checks that a failed pull left nothing behind.
func assertClean(t *testing.T, s *Store) {
	t.Helper()
	for _, d := range []string{"layers/sha256", "tmp", "manifests/sha256"} {
		if es := entries(t, filepath.Join(s.dir, d)); len(es) > 0 {
			t.Errorf("%s after a failed pull: %v", d, es)
		}
	}
	if imgs, err := s.List(); err != nil || len(imgs) > 0 {
		t.Errorf("List after a failed pull = %v, %v", imgs, err)
	}
}

func TestPull(t *testing.T) {
	requireRoot(t)
	counter := &blobCounter{n: map[string]int{}}
	host := imagetest.RegistryWith(t, counter.wrap)
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	owned := imagetest.File("etc/owned", "agent's", 0o640)
	owned.Uid, owned.Gid, owned.ModTime = 1000, 1001, mtime
	etc := imagetest.Dir("etc/", 0o755)
	etc.ModTime = mtime
	layer := imagetest.Layer(t,
		imagetest.Dir("bin/", 0o755),
		imagetest.File("bin/tool", "#!/bin/sh\n", 0o755),
		imagetest.File("bin/su", "setuid", 0o4755),
		imagetest.Symlink("bin/sh", "tool"),
		imagetest.Symlink("bin/abs", "/etc/owned"),
		etc, owned,
		imagetest.Hardlink("etc/hard", "etc/owned"),
		imagetest.Dir("tmp/", 0o1777),
		imagetest.File("deep/er/file", "no parent entries", 0o600),
	)
	cfg := v1.Config{Env: []string{"PATH=/bin", "A=b"}, Cmd: []string{"/bin/sh"}, Entrypoint: []string{"/bin/tool"}, WorkingDir: "/work", User: "1000"}
	ref := imagetest.PushLayers(t, host, "test/app:v1", cfg, layer)

	s := newStore(t, Options{})
	var statuses []string
	img, err := s.Pull(context.Background(), ref, func(p Progress) { statuses = append(statuses, p.Status) })
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != ref || !strings.HasPrefix(img.Digest, "sha256:") || len(img.Layers) != 1 || img.Size == 0 {
		t.Errorf("image = %+v", img)
	}
	if last := statuses[len(statuses)-1]; last != StatusDone {
		t.Errorf("statuses = %v, want ... done", statuses)
	}
	want := Config{Env: cfg.Env, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, WorkingDir: "/work", User: "1000"}
	if g := img.Config; strings.Join(g.Env, ",") != strings.Join(want.Env, ",") || strings.Join(g.Cmd, ",") != "/bin/sh" ||
		strings.Join(g.Entrypoint, ",") != "/bin/tool" || g.WorkingDir != want.WorkingDir || g.User != want.User {
		t.Errorf("config = %+v, want %+v", g, want)
	}

	dirs, err := s.LayerDirs(img)
	if err != nil || len(dirs) != 1 {
		t.Fatalf("LayerDirs = %v, %v", dirs, err)
	}
	l := dirs[0]
	for _, c := range []struct {
		path     string
		mode     os.FileMode
		uid, gid uint32
	}{
		{".", os.ModeDir | 0o755, 0, 0},
		{"bin/tool", 0o755, 0, 0},
		{"bin/su", os.ModeSetuid | 0o755, 0, 0},
		{"etc/owned", 0o640, 1000, 1001},
		{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0, 0},
		{"deep/er/file", 0o600, 0, 0},
	} {
		fi, err := os.Lstat(filepath.Join(l, c.path))
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != c.mode || st.Uid != c.uid || st.Gid != c.gid {
			t.Errorf("%s: mode %v uid %d gid %d, want %v %d %d", c.path, fi.Mode(), st.Uid, st.Gid, c.mode, c.uid, c.gid)
		}
	}
	for link, target := range map[string]string{"bin/sh": "tool", "bin/abs": "/etc/owned"} {
		if got, err := os.Readlink(filepath.Join(l, link)); got != target {
			t.Errorf("readlink %s = %q, %v; want %q", link, got, err, target)
		}
	}
	a, _ := os.Stat(filepath.Join(l, "etc/owned"))
	b, err := os.Stat(filepath.Join(l, "etc/hard"))
	if err != nil || !os.SameFile(a, b) {
		t.Errorf("etc/hard is not a hard link of etc/owned: %v", err)
	}
	for _, p := range []string{"etc/owned", "etc"} {
		if fi, err := os.Stat(filepath.Join(l, p)); err != nil || !fi.ModTime().Equal(mtime) {
			t.Errorf("%s mtime = %v, want %v", p, fi.ModTime(), mtime)
		}
	}

	// Get by the short name, the normalized one, the digest and repo@digest; List.
	for _, q := range []string{ref, img.Digest, strings.TrimSuffix(ref, ":v1") + "@" + img.Digest} {
		if got, err := s.Get(q); err != nil || got.Digest != img.Digest {
			t.Errorf("Get(%q) = %v, %v", q, got.Digest, err)
		}
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Ref != ref {
		t.Errorf("List = %v, %v", list, err)
	}

	// Pulled again, nothing is downloaded.
	ld := imagetest.Digest(t, layer)
	if n := counter.get(ld); n != 1 {
		t.Fatalf("layer downloaded %d times by the first pull", n)
	}
	statuses = nil
	img2, err := s.Pull(context.Background(), ref, func(p Progress) { statuses = append(statuses, p.Status) })
	if err != nil || img2.Digest != img.Digest {
		t.Fatalf("second pull = %v, %v", img2, err)
	}
	if strings.Join(statuses, ",") != StatusExists {
		t.Errorf("second pull statuses = %v, want [exists]", statuses)
	}
	if n := counter.get(ld); n != 1 {
		t.Errorf("second pull downloaded the layer again (%d GETs)", n)
	}
	// Ensure finds it without the registry.
	if got, err := s.Ensure(context.Background(), ref, nil); err != nil || got.Digest != img.Digest {
		t.Errorf("Ensure = %v, %v", got, err)
	}
}

func TestPullByDigest(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	ref := imagetest.PushLayers(t, host, "test/digest:v1", v1.Config{}, imagetest.Layer(t, imagetest.File("a", "a", 0o644)))
	desc, err := remote.Get(mustRef(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, Options{})
	byDigest := host + "/test/digest@" + desc.Digest.String()
	img, err := s.Pull(context.Background(), byDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != byDigest || img.Digest != desc.Digest.String() {
		t.Errorf("image = %+v", img)
	}
	if _, err := s.Get(byDigest); err != nil {
		t.Error(err)
	}
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMultiPlatform pulls the host's platform out of an index, and says which platforms an
// index has when the host's is not among them.
func TestMultiPlatform(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	var adds []mutate.IndexAddendum
	for _, arch := range []string{"amd64", "arm64", "riscv64"} {
		img, err := mutate.AppendLayers(empty.Image, imagetest.Layer(t, imagetest.File("arch", arch, 0o644)))
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", arch
		img, _ = mutate.ConfigFile(img, cf)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	ref := host + "/test/multi:v1"
	if err := remote.WriteIndex(mustRef(t, ref), mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"arm64", "riscv64"} {
		s := newStore(t, Options{Platform: &v1.Platform{OS: "linux", Architecture: arch}})
		img, err := s.Pull(context.Background(), ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		dirs, _ := s.LayerDirs(img)
		if b, _ := os.ReadFile(filepath.Join(dirs[0], "arch")); string(b) != arch {
			t.Errorf("pulled %q for %s", b, arch)
		}
	}
	s := newStore(t, Options{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}})
	_, err := s.Pull(context.Background(), ref, nil)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "linux/arm64") {
		t.Errorf("pull for s390x: %v, want ErrUnavailable listing the platforms", err)
	}
	assertClean(t, s)
}

func TestPullErrors(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	// 1 MiB of zeros compresses to about 1 KiB.
	big := imagetest.Layer(t, imagetest.File("zeros", string(make([]byte, 1<<20)), 0o644))
	ref := imagetest.PushLayers(t, host, "test/big:v1", v1.Config{}, big)
	size, _ := big.Size()

	for _, c := range []struct {
		name, ref string
		max       int64
		kind      error
		msg       string
	}{
		{"bad reference", "UPPER/case::x", 0, errdefs.ErrInvalidArgument, "not a valid image reference"},
		{"empty reference", " ", 0, errdefs.ErrInvalidArgument, "required"},
		{"missing repository", host + "/test/nope:v1", 0, errdefs.ErrNotFound, host + "/test/nope:v1"},
		{"missing tag", host + "/test/big:v2", 0, errdefs.ErrNotFound, host + "/test/big:v2"},
		{"compressed over the cap", ref, size - 1, errdefs.ErrInvalidArgument, "cap of"},
		{"unpacked over the cap", ref, 64 << 10, errdefs.ErrInvalidArgument, "unpacks to more than the cap of 65536 bytes"},
		{"registry unreachable", "127.0.0.1:1/test/x:v1", 0, errdefs.ErrUnavailable, "unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, Options{MaxImageBytes: c.max})
			_, err := s.Pull(context.Background(), c.ref, nil)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Pull(%q) = %v; want %v containing %q", c.ref, err, c.kind, c.msg)
			}
			assertClean(t, s)
		})
	}

	s := newStore(t, Options{})
	_, err := s.Get("python:3.12-slim")
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "airlock pull python:3.12-slim") {
		t.Errorf("Get of an absent image: %v", err)
	}
	if _, err := s.Get("Not A Ref"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Get of a bad ref: %v", err)
	}
}

func TestPullCorrupted(t *testing.T) {
	requireRoot(t)
	payload := strings.Repeat("airlock ", 4096)
	good := imagetest.Layer(t, imagetest.File("good", "fine", 0o644))
	bad := imagetest.Layer(t, imagetest.File("a", payload, 0o644), imagetest.File("b", payload, 0o644))
	badDigest := imagetest.Digest(t, bad)
	host := imagetest.RegistryWith(t, imagetest.CorruptBlob(badDigest))
	ref := imagetest.PushLayers(t, host, "test/corrupt:v1", v1.Config{}, good, bad)

	s := newStore(t, Options{})
	_, err := s.Pull(context.Background(), ref, nil)
	if err == nil || !strings.Contains(err.Error(), "layer "+badDigest+": digest mismatch: expected "+badDigest+", got sha256:") {
		t.Fatalf("Pull of a corrupted layer: %v", err)
	}
	// The good layer may be in place (it is whole and verified); the bad one is nowhere.
	goodID, _ := good.DiffID()
	for _, e := range entries(t, filepath.Join(s.dir, "layers/sha256")) {
		if "sha256:"+e != goodID.String() {
			t.Errorf("layers/ has %s", e)
		}
	}
	if es := entries(t, filepath.Join(s.dir, "tmp")); len(es) > 0 {
		t.Errorf("tmp/ after a failed pull: %v", es)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "index.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("index.json written by a failed pull: %v", err)
	}
}

// rawManifest is a manifest pushed as is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// TestPullDiffIDMismatch: a config whose diff ID does not match the layer's content.
func TestPullDiffIDMismatch(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	ref := host + "/test/diffid:v1"
	repo := mustRef(t, ref).Context()
	layer := imagetest.Layer(t, imagetest.File("a", "a", 0o644))
	wrong := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	cfgBytes, _ := json.Marshal(v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH,
		RootFS: v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{wrong}}})
	cfg := static.NewLayer(cfgBytes, types.OCIConfigJSON)
	for _, l := range []v1.Layer{layer, cfg} {
		if err := remote.WriteLayer(repo, l); err != nil {
			t.Fatal(err)
		}
	}
	desc := func(l v1.Layer, mt types.MediaType) v1.Descriptor {
		d, _ := l.Digest()
		n, _ := l.Size()
		return v1.Descriptor{MediaType: mt, Digest: d, Size: n}
	}
	m, _ := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: desc(cfg, types.OCIConfigJSON), Layers: []v1.Descriptor{desc(layer, types.OCILayer)}})
	if err := remote.Put(mustRef(t, ref), rawManifest(m)); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, Options{})
	_, err := s.Pull(context.Background(), ref, nil)
	if err == nil || !strings.Contains(err.Error(), "diff ID mismatch: expected "+wrong.String()) {
		t.Fatalf("Pull: %v", err)
	}
	assertClean(t, s)
}

func TestPullAuth(t *testing.T) {
	requireRoot(t)
	const user, pass = "agent", "s3cret"
	var open atomic.Bool // pushing goes in without credentials
	host := imagetest.RegistryWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !open.Load() && (!ok || u != user || p != pass) {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	open.Store(true)
	ref := imagetest.PushLayers(t, host, "private/app:v1", v1.Config{}, imagetest.Layer(t, imagetest.File("secret", "s", 0o600)))
	open.Store(false)

	s := newStore(t, Options{}) // DOCKER_CONFIG is an empty directory
	_, err := s.Pull(context.Background(), ref, nil)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "docker login "+host) {
		t.Fatalf("Pull without credentials: %v", err)
	}
	assertClean(t, s)

	cfg := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)
	if _, err := s.Pull(context.Background(), ref, nil); err != nil {
		t.Fatalf("Pull with credentials: %v", err)
	}
}

func TestConcurrentPull(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	ref := imagetest.PushLayers(t, host, "test/race:v1", v1.Config{},
		imagetest.Layer(t, imagetest.File("big", strings.Repeat("x", 1<<20), 0o644)))
	s := newStore(t, Options{})
	// A second store on the same directory stands for another process.
	s2, err := Open(s.dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			st := s
			if i%2 == 1 {
				st = s2
			}
			_, errs[i] = st.Pull(context.Background(), ref, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("pull %d: %v", i, err)
		}
	}
	if es := entries(t, filepath.Join(s.dir, "layers/sha256")); len(es) != 1 {
		t.Errorf("layers/ = %v, want one", es)
	}
	if es := entries(t, filepath.Join(s.dir, "tmp")); len(es) != 0 {
		t.Errorf("tmp/ = %v, want empty", es)
	}
	if list, _ := s.List(); len(list) != 1 {
		t.Errorf("List = %v", list)
	}
}

// TestOpenSweepsTmp: what a killed pull left in tmp/ goes at the next Open, unless a pull
// (here: a lock) holds it.
func TestOpenSweepsTmp(t *testing.T) {
	s := newStore(t, Options{})
	dead := filepath.Join(s.dir, "tmp", "layer-dead")
	live := filepath.Join(s.dir, "tmp", "layer-live")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "usr"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := tryLock(live, syscall.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Open(s.dir, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if es := entries(t, filepath.Join(s.dir, "tmp")); strings.Join(es, ",") != "layer-live" {
		t.Errorf("tmp/ after Open = %v, want [layer-live]", es)
	}
}

// TestMirror: a registry's images are pulled from its mirror and keep their own reference, so
// that an image approved as docker.io/org/app stays that; other registries are not mirrored.
func TestMirror(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	imagetest.PushLayers(t, host, "agentcop/agent-sandbox:latest", v1.Config{Env: []string{"FROM=mirror"}},
		imagetest.Layer(t, imagetest.File("hello", "from the mirror", 0o644)))
	s := newStore(t, Options{Mirrors: map[string]string{"docker.io": host}})
	img, err := s.Pull(context.Background(), "agentcop/agent-sandbox:latest", nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "index.docker.io/agentcop/agent-sandbox:latest" || len(img.Config.Env) != 1 || img.Config.Env[0] != "FROM=mirror" {
		t.Errorf("image = %+v", img)
	}
	if got, err := s.Get("docker.io/agentcop/agent-sandbox:latest"); err != nil || got.Digest != img.Digest {
		t.Errorf("Get by the docker.io spelling: %+v, %v", got, err)
	}
	// The mirror answers for the registry it mirrors only.
	if _, err := s.Pull(context.Background(), host+"/agentcop/agent-sandbox:latest", nil); err != nil {
		t.Errorf("the mirror's own reference: %v", err)
	}
	if err := (Settings{MaxImageSizeMb: 1, Mirrors: map[string]string{"docker.io": "http://x/y"}}).Validate(); err == nil {
		t.Error("a mirror with a path was accepted")
	}
}
