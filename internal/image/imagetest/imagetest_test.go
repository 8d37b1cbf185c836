package imagetest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/testutil"
)

// TestBusybox pushes the busybox root and pulls it through a store, as other packages do.
func TestBusybox(t *testing.T) {
	testutil.RequiresRoot(t, "unpacking preserves owners")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "airlock/busybox:test", imagetest.Busybox(t), v1.Config{
		Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/sh"}, WorkingDir: "/workspace",
	})
	s, err := image.Open(t.TempDir(), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.WorkingDir != "/workspace" || len(img.Layers) != 1 {
		t.Errorf("image = %+v", img)
	}
	dirs, err := s.LayerDirs(img)
	if err != nil {
		t.Fatal(err)
	}
	root := dirs[0]
	if target, err := os.Readlink(filepath.Join(root, "bin/sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "bin/busybox")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/busybox: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode() != os.ModeDir|os.ModeSticky|0o777 {
		t.Errorf("tmp: %v, %v", fi.Mode(), err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || len(b) == 0 {
		t.Errorf("etc/passwd: %v", err)
	}
}
