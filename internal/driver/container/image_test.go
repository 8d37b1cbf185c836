package container_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/testutil"
)

// imageLevel is a level under test with images: the driver, and what it leaves on the host.
type imageLevel struct {
	name      string
	d         driver.Driver
	leftovers func() []string
	// cow says the image's root is copy-on-write into the sandbox's layer (the process level,
	// like --rootfs) rather than read-only (the container level).
	cow bool
}

// imageLevels are the container level on both runtimes and the process level, all with store.
func imageLevels(t *testing.T, store *image.Store) []imageLevel {
	var out []imageLevel
	for _, rt := range []string{sandbox.RuntimeRunc, sandbox.RuntimeRunsc} {
		d := newDriverWith(t, rt, func(c *container.Config) {
			c.Images = store
		})
		out = append(out, imageLevel{rt, &pinned{d, rt}, d.Leftovers, false})
	}
	p := newProcessDriver(t, store)
	return append(out, imageLevel{"process", p, p.Leftovers, true})
}

// newProcessDriver returns a process-level driver with its own state and cgroup parent (so its
// own instance in the host's uid records), that makes sandboxes from images in store.
func newProcessDriver(t *testing.T, store driver.Images) processLevel {
	t.Helper()
	state, err := os.MkdirTemp("", "airlock-test-cimage-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	d := drivertest.ProcessLevel(t, drivertest.ProcessOptions{
		CgroupParent: fmt.Sprintf("airlock-test-cimg-%d", os.Getpid()),
		StateDir:     state,
		Images:       store,
	})
	if c := d.Capabilities(); !c.Available {
		t.Skipf("process level unavailable: %s", c.Reason)
	}
	return d
}

// processLevel is the process level as these tests use it.
type processLevel interface {
	driver.Driver
	Leftovers() []string
}

// newImageStore opens a store in a temporary directory that reads no credentials of the host.
func newImageStore(t *testing.T) *image.Store {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	s, err := image.Open(filepath.Join(t.TempDir(), "images"), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// create makes a sandbox of spec (defaulted and validated) on d.
func create(t *testing.T, d driver.Driver, spec sandbox.Spec) (driver.Sandbox, error) {
	t.Helper()
	spec.Isolation = d.Name()
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return d.Create(ctx, sandbox.NewID("sbx_"), spec)
}

// leakCheck fails t, at its end, if the level still holds host resources.
func leakCheck(t *testing.T, l imageLevel) {
	t.Cleanup(func() {
		if left := settled(l.leftovers); len(left) > 0 {
			t.Errorf("%s leaked after teardown: %s", l.name, strings.Join(left, "; "))
		}
	})
}

func TestImage(t *testing.T) {
	testutil.RequiresRoot(t, "it makes sandboxes")
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "test/busybox:v1", imagetest.Busybox(t), v1.Config{Env: []string{"PATH=/bin", "FOO=bar"}})
	store := newImageStore(t)
	if _, err := store.Pull(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	layers := filepath.Join(store.Dir(), "layers")
	before := treeState(t, layers)

	for _, l := range imageLevels(t, store) {
		t.Run(l.name, func(t *testing.T) {
			leakCheck(t, l)
			h := &drivertest.Harness{D: l.d}
			sb := h.New(t, sandbox.Spec{Image: ref, Resources: sandbox.Resources{DiskMB: 16}})
			res := drivertest.Exec(t, sb, 20*time.Second, "echo hi; id -u; echo $FOO; cat /etc/resolv.conf; ls /")
			out := strings.Split(res.Stdout, "\n")
			if res.ExitCode != 0 || len(out) < 4 || out[0] != "hi" || out[1] != "1000" || out[2] != "bar" || !strings.Contains(res.Stdout, "# airlock") {
				t.Fatalf("exec: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			for _, d := range []string{"bin", "etc", "tmp", "workspace"} {
				if !slices.Contains(strings.Fields(strings.Join(out[3:], " ")), d) {
					t.Errorf("ls / lacks %s: %q", d, res.Stdout)
				}
			}
			expectOut(t, drivertest.Exec(t, sb, 10*time.Second, "echo ok > /workspace/f && cat /workspace/f && pwd"), "ok\n/workspace\n")
			for _, p := range []string{"/bin/x", "/bin/busybox", "/etc/passwd", "/x"} {
				if res := drivertest.Exec(t, sb, 10*time.Second, "echo x >> "+p); res.ExitCode == 0 {
					t.Errorf("wrote %s on the image's read-only root", p)
				}
			}
			// The disk cap holds on /tmp: a write beyond diskMb ends in ENOSPC.
			res = drivertest.Exec(t, sb, 30*time.Second, "dd if=/dev/zero of=/tmp/big bs=1M count=64")
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
				t.Errorf("dd beyond diskMb: exit %d stderr %q", res.ExitCode, res.Stderr)
			}
			expectOut(t, drivertest.Exec(t, sb, 10*time.Second, "rm /tmp/big && echo ok > /tmp/small && cat /tmp/small"), "ok\n")

			// Root of the sandbox changes what it can; none of it may reach the layers.
			rootSb := h.New(t, sandbox.Spec{Image: ref, User: sandbox.UserRoot})
			expectOut(t, drivertest.Exec(t, rootSb, 10*time.Second, "id -u; echo $FOO"), "0\nbar\n")
			changes := []string{"echo x > /bin/x", "echo x >> /etc/passwd", "chmod 777 /bin/busybox", "touch /etc", "rm /bin/false"}
			for _, s := range changes {
				res := drivertest.Exec(t, rootSb, 10*time.Second, s)
				if !l.cow && res.ExitCode == 0 {
					t.Errorf("root changed the image's read-only root: %q", s)
				}
				if l.cow && res.ExitCode != 0 {
					t.Errorf("root could not change its copy-on-write root: %q: %q", s, res.Stderr)
				}
			}
			if res := drivertest.Exec(t, rootSb, 10*time.Second, "mount -o remount,rw / || mount -o remount,ro /"); res.ExitCode == 0 {
				t.Errorf("root remounted its root")
			}
			expectOut(t, drivertest.Exec(t, rootSb, 10*time.Second,
				"chmod 700 /workspace && rm -rf /workspace/* && mkdir /workspace/d && echo y > /workspace/d/f && cat /workspace/d/f"), "y\n")

			// A snapshot of the changed sandbox restores over the same image: the overlay's
			// copies up and whiteouts (a removed image file stays removed) come back.
			var layer bytes.Buffer
			if _, err := rootSb.(driver.Snapshotter).Snapshot(context.Background(), &layer, ""); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			restored, err := h.Restore(t, sandbox.Spec{Image: ref, User: sandbox.UserRoot}, &layer, "")
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			want := "y\n/bin/false\nno x\n"
			if l.cow {
				want = "y\ngone\nx\n"
			}
			expectOut(t, drivertest.Exec(t, restored, 10*time.Second,
				"cat /workspace/d/f; ls /bin/false 2>/dev/null || echo gone; cat /bin/x 2>/dev/null || echo no x"), want)
		})
	}
	if after := treeState(t, layers); !slices.Equal(before, after) {
		t.Errorf("the store's layers changed under sandboxes:\n%s", diffLines(before, after))
	}

	t.Run("missing", func(t *testing.T) {
		missing := host + "/test/nope:v1"
		for _, l := range imageLevels(t, store) {
			t.Run(l.name, func(t *testing.T) {
				leakCheck(t, l)
				sb, err := create(t, l.d, sandbox.Spec{Image: missing})
				if err == nil {
					drivertest.Destroy(context.Background(), t, sb)
					t.Fatal("created a sandbox of a missing image")
				}
				t.Logf("%v", err)
				if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), missing) {
					t.Fatalf("missing image: %v; want ErrNotFound naming %s", err, missing)
				}
			})
		}
	})

	t.Run("corrupted", func(t *testing.T) {
		payload := strings.Repeat("airlock ", 4096)
		good := imagetest.Layer(t, imagetest.File("good", "fine", 0o644))
		bad := imagetest.Layer(t, imagetest.File("a", payload, 0o644), imagetest.File("b", payload, 0o644))
		badDigest := imagetest.Digest(t, bad)
		chost := imagetest.RegistryWith(t, imagetest.CorruptBlob(badDigest))
		cref := imagetest.PushLayers(t, chost, "test/corrupt:v1", v1.Config{}, good, bad)
		goodID, _ := good.DiffID()
		prior := dirNames(t, filepath.Join(store.Dir(), "layers", "sha256"))
		for _, l := range imageLevels(t, store) {
			t.Run(l.name, func(t *testing.T) {
				leakCheck(t, l)
				sb, err := create(t, l.d, sandbox.Spec{Image: cref})
				if err == nil {
					drivertest.Destroy(context.Background(), t, sb)
					t.Fatal("created a sandbox of a corrupted image")
				}
				t.Logf("%v", err)
				if !strings.Contains(err.Error(), badDigest+": digest mismatch") {
					t.Fatalf("corrupted layer: %v; want a digest mismatch of %s", err, badDigest)
				}
				for _, e := range dirNames(t, filepath.Join(store.Dir(), "layers", "sha256")) {
					if !slices.Contains(prior, e) && "sha256:"+e != goodID.String() {
						t.Errorf("layers/ has %s after a failed pull", e)
					}
				}
				if es := dirNames(t, filepath.Join(store.Dir(), "tmp")); len(es) > 0 {
					t.Errorf("tmp/ after a failed pull: %v", es)
				}
				if _, err := store.Get(cref); !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("the store has the corrupted image: %v", err)
				}
			})
		}
	})

	t.Run("auth", func(t *testing.T) {
		var open atomic.Bool // pushing goes in without credentials
		ahost := imagetest.RegistryWith(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !open.Load() && (!ok || u != "agent" || p != "s3cret") {
					w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
					http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		open.Store(true)
		aref := imagetest.PushLayers(t, ahost, "private/app:v1", v1.Config{}, imagetest.Layer(t, imagetest.File("secret", "s", 0o600)))
		open.Store(false)
		for _, l := range imageLevels(t, store) {
			t.Run(l.name, func(t *testing.T) {
				leakCheck(t, l)
				sb, err := create(t, l.d, sandbox.Spec{Image: aref})
				if err == nil {
					drivertest.Destroy(context.Background(), t, sb)
					t.Fatal("created a sandbox of a private image without credentials")
				}
				t.Logf("%v", err)
				if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "docker login "+ahost) {
					t.Fatalf("private image without credentials: %v", err)
				}
			})
		}
	})
}

func expectOut(t *testing.T, res sandbox.ExecResult, stdout string) {
	t.Helper()
	if res.ExitCode != 0 || res.Stdout != stdout {
		t.Fatalf("exit %d stdout %q stderr %q; want stdout %q", res.ExitCode, res.Stdout, res.Stderr, stdout)
	}
}

// treeState lists every entry under dir with its type, mode, owner, size, time, and its
// content's hash or link target.
func treeState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		what := ""
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			what = hex.EncodeToString(h.Sum(nil))
		case fi.Mode()&fs.ModeSymlink != 0:
			what, _ = os.Readlink(p)
		}
		out = append(out, fmt.Sprintf("%s %v %d:%d %d %d %s", rel, fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano(), what))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffLines(a, b []string) string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

func dirNames(t *testing.T, dir string) []string {
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
