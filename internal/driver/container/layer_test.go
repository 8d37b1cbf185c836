package container_test

import (
	"context"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/testutil"
)

// TestLayerChangesOverImage: on every level with images, the files an exec changed are told
// over the image's layers: an image file edited (copied up) is modified, one removed (a
// whiteout) deleted, and a directory removed and made again (opaque) hides what the image had
// in it, which is deleted.
func TestLayerChangesOverImage(t *testing.T) {
	testutil.RequiresRoot(t, "it makes sandboxes")
	host := imagetest.Registry(t)
	// Owned by the host's root, which no level maps: writable by mode (the container level's
	// image root is read-only but for the writable directories, /workspace among them).
	files := imagetest.Layer(t,
		imagetest.Dir("workspace/", 0o755), imagetest.File("workspace/edit", "image", 0o666),
		imagetest.File("workspace/gone", "image", 0o644), imagetest.File("workspace/keep", "image", 0o644),
		imagetest.Dir("workspace/dir/", 0o777), imagetest.File("workspace/dir/a", "a", 0o644),
		imagetest.File("workspace/dir/b", "b", 0o644))
	ref := imagetest.PushLayers(t, host, "test/files:v1", v1.Config{Env: []string{"PATH=/bin"}},
		imagetest.TreeLayer(t, imagetest.Busybox(t)), files)
	store := newImageStore(t)
	if _, err := store.Pull(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range imageLevels(t, store) {
		t.Run(l.name, func(t *testing.T) {
			leakCheck(t, l)
			h := &drivertest.Harness{D: l.d}
			sb := h.New(t, sandbox.Spec{Image: ref, User: sandbox.UserRoot})
			layer := drivertest.LayerOf(t, sb)
			if len(layer.Lowers) != 2 {
				t.Fatalf("lowers %q: want the image's two layers", layer.Lowers)
			}
			before := drivertest.ScanLayer(t, layer)
			expectOut(t, drivertest.Exec(t, sb, 10*time.Second, "echo edited > /workspace/edit && rm /workspace/gone && "+
				"rm -r /workspace/dir && mkdir /workspace/dir && echo n > /workspace/new && cat /workspace/keep"), "image")
			drivertest.ExpectChanges(t, fsdiff.CompareOver(before, drivertest.ScanLayer(t, layer), layer.Lowers),
				[]string{"/workspace/new"}, []string{"/workspace/dir", "/workspace/edit"},
				[]string{"/workspace/dir/a", "/workspace/dir/b", "/workspace/gone"})
		})
	}
}
