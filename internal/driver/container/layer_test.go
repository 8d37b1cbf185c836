package container_test

import (
	"context"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/testutil"
)

// TestLayerChangesOverImage: on every level with images, the files an exec changed are told
// over the image's layers (drivertest.ExpectImageChanges): an image file edited (copied up) is
// modified, one removed (a whiteout) deleted, and a directory removed and made again (opaque)
// hides what the image had in it, which is deleted.
func TestLayerChangesOverImage(t *testing.T) {
	testutil.RequiresRoot(t, "it makes sandboxes")
	host := imagetest.Registry(t)
	ref := imagetest.PushLayers(t, host, "test/files:v1", v1.Config{Env: []string{"PATH=/bin"}},
		imagetest.TreeLayer(t, imagetest.Busybox(t)), drivertest.ImageChangesLayer(t))
	store := newImageStore(t)
	if _, err := store.Pull(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range imageLevels(t, store) {
		t.Run(l.name, func(t *testing.T) {
			leakCheck(t, l)
			h := &drivertest.Harness{D: l.d}
			sb := h.New(t, sandbox.Spec{Image: ref, User: sandbox.UserRoot})
			drivertest.ExpectImageChanges(t, sb, drivertest.LayerOf(t, sb), 10*time.Second)
		})
	}
}
