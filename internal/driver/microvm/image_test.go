package microvm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// TestRootImages: a VM's root can be an OCI image from the store (its layers stacked into one
// read-only image, a later layer's whiteout applied) or an operator's template directory, with
// the writable layer over it; the image's environment applies, and the sandbox's writes stay
// in its layer.
func TestRootImages(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	tpl := imagetest.Busybox(t)
	host := imagetest.Registry(t)
	ref := imagetest.PushLayers(t, host, "test/busybox:vm", v1.Config{Env: []string{"PATH=/bin", "FOO=bar"}},
		imagetest.TreeLayer(t, tpl), imagetest.Layer(t, imagetest.File("bin/.wh.false", "", 0o644), imagetest.File("etc/motd", "hello\n", 0o644)))
	d := newDriver(t, func(c *microvm.Config) { c.Images = pulled(t, ref) })
	t0 := time.Now()
	t.Cleanup(func() { removeNewImages(d, t0) })
	cases := []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"image", sandbox.Spec{Image: ref}, "1000\nbar\nhello\ngone\n"},
		{"template", sandbox.Spec{RootDir: tpl}, "1000\n\nno motd\n/bin/false\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Two VMs boot side by side on a loaded host: more room than a create's usual 30 s.
			spec := c.spec
			spec.Isolation = d.Name()
			sandbox.SetDefaults(&spec)
			if err := sandbox.Validate(&spec); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sb, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { drivertest.Destroy(context.Background(), t, sb) })
			res := drivertest.Exec(t, sb, 30*time.Second, "id -u; echo $FOO; cat /etc/motd 2>/dev/null || echo no motd; ls /bin/false 2>/dev/null || echo gone")
			if res.ExitCode != 0 || res.Stdout != c.want {
				t.Fatalf("exit %d stdout %q (want %q) stderr %q", res.ExitCode, res.Stdout, c.want, res.Stderr)
			}
			// Copy on write: the sandbox's changes stay in its layer.
			res = drivertest.Exec(t, sb, 10*time.Second, "echo x > /workspace/f && cat /workspace/f && echo y >> /etc/passwd; echo $?")
			if !strings.HasPrefix(res.Stdout, "x\n") {
				t.Fatalf("write: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
	t.Cleanup(func() {
		b, err := os.ReadFile(filepath.Join(tpl, "etc", "passwd"))
		if err != nil || strings.Contains(string(b), "y\n") {
			t.Errorf("the template's /etc/passwd: %q %v", b, err)
		}
	})
}

// removeNewImages removes the root images made since t0: the test's own (its template and image
// are new each run).
func removeNewImages(d *microvm.Driver, t0 time.Time) {
	imgs, _ := filepath.Glob(filepath.Join(d.ImageDir(), "root-*.erofs"))
	for _, img := range imgs {
		if fi, err := os.Stat(img); err == nil && fi.ModTime().After(t0) {
			os.Remove(img)
		}
	}
}

// pulled is an image store in a temporary directory that holds ref, pulled from the test's
// registry.
func pulled(t *testing.T, ref string) *image.Store {
	t.Helper()
	store, err := image.Open(filepath.Join(t.TempDir(), "images"), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pull(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	return store
}
