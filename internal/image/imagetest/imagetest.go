// Package imagetest serves OCI images to tests: an in-process registry on 127.0.0.1, images
// built from directory trees or tar entries, and a tiny busybox root.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry starts an in-process registry on 127.0.0.1 (closed at t.Cleanup) and returns its
// host:port. Registries on loopback addresses are spoken to over plain HTTP.
func Registry(t testing.TB) string { return RegistryWith(t, nil) }

// RegistryWith is Registry with the registry's handler wrapped by wrap (counting requests,
// requiring authentication, corrupting blobs...); wrap may be nil.
func RegistryWith(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push builds an image whose single layer is the tree under dir (files, dirs, symlinks with
// their modes; owned by root) plus the given config, pushes it as host/repoTag and returns the
// ref.
func Push(t testing.TB, host, repoTag, dir string, cfg v1.Config) string {
	t.Helper()
	return PushLayers(t, host, repoTag, cfg, TreeLayer(t, dir))
}

// PushLayers pushes an image of the given layers (bottom first) and config as host/repoTag and
// returns the ref.
func PushLayers(t testing.TB, host, repoTag string, cfg v1.Config, layers ...v1.Layer) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref := host + "/" + repoTag
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// Entry is one entry of a layer built by Layer: a header and, for a regular file, its content.
type Entry struct {
	tar.Header
	Body string
}

// File, Dir, Symlink and Hardlink are shorthands for entries.
func File(name, body string, mode int64) Entry {
	return Entry{Header: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}, Body: body}
}

func Dir(name string, mode int64) Entry {
	return Entry{Header: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

func Symlink(name, target string) Entry {
	return Entry{Header: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

func Hardlink(name, target string) Entry {
	return Entry{Header: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}}
}

// Layer builds a gzip-compressed layer of the entries, in order and as given (names are not
// cleaned: hostile tars are welcome).
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.Header
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.Body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TreeLayer builds a layer of the tree under dir: files, dirs and symlinks with their modes
// and times, owned by root.
func TreeLayer(t testing.TB, dir string) v1.Layer {
	t.Helper()
	var entries []Entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		e := Entry{Header: *h}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Body = string(b)
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return Layer(t, entries...)
}

// busyboxApplets are the commands Busybox links to /bin/busybox.
var busyboxApplets = []string{"sh", "ls", "cat", "echo", "id", "sleep", "dd", "mkdir", "rm", "env",
	"true", "false", "head", "wc", "stat", "touch", "uname", "mount"}

// Busybox builds a tiny root tree in t.TempDir(): /bin/busybox copied from the host (statically
// linked; apt-get install busybox-static) with its applets as symlinks, /etc/passwd (root,
// agent 1000, nobody), /etc/group, /tmp (1777) and /workspace. It skips the test if the host
// has no /bin/busybox.
func Busybox(t testing.TB) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox image: %v (apt-get install busybox-static)", err)
	}
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "workspace"} {
		must(os.Mkdir(filepath.Join(root, d), 0o755))
	}
	must(os.Chmod(filepath.Join(root, "tmp"), 0o777|fs.ModeSticky))
	must(os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755))
	for _, a := range busyboxApplets {
		must(os.Symlink("busybox", filepath.Join(root, "bin", a)))
	}
	must(os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(
		"root:x:0:0:root:/root:/bin/sh\n"+
			"agent:x:1000:1000:agent:/workspace:/bin/sh\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc", "group"), []byte(
		"root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"), 0o644))
	return root
}

// Digest is layer l's (compressed) digest, "sha256:...".
func Digest(t testing.TB, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// CorruptBlob is a RegistryWith wrapper that serves the blob with digest with one byte flipped.
func CorruptBlob(digest string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+digest) {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			b[len(b)/2] ^= 0xff
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(b) // a failure is the client's to see
		})
	}
}
