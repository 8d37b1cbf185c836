package microvm_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// TestLayerChangesOverImage is the container level's case of the same name on a VM
// (drivertest.ExpectImageChanges): the guest agent scans the disk, and the host compares the
// trees over the image's layers, which the VM keeps leased until it is destroyed. A paused VM's
// scan is a conflict until it resumes.
func TestLayerChangesOverImage(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	ref := imagetest.PushLayers(t, imagetest.Registry(t), "test/files:vm", v1.Config{Env: []string{"PATH=/bin"}},
		imagetest.TreeLayer(t, imagetest.Busybox(t)), drivertest.ImageChangesLayer(t))
	store := pulled(t, ref)
	d := newDriver(t, func(c *microvm.Config) { c.Images = store })
	t0 := time.Now()
	t.Cleanup(func() { removeNewImages(d, t0) })
	h := &drivertest.Harness{D: d}
	sb := h.New(t, sandbox.Spec{Image: ref, User: sandbox.UserRoot})
	layer := drivertest.LayerOf(t, sb)
	if layer.Dir != "" || layer.Scanner == nil {
		t.Fatalf("layer %+v: want the guest's scans", layer)
	}
	// The layers stay leased while the VM runs: the image removed, they are not collected.
	if c, err := store.Remove(ref); err != nil || c.Layers != 0 || c.InUse != 2 {
		t.Fatalf("remove the image with the VM running: %+v, %v; want its two layers in use", c, err)
	}
	after := drivertest.ExpectImageChanges(t, sb, layer, 30*time.Second)
	// The guest's own files (init's mount points, the lost+found of its ext4) are not the
	// sandbox's: only paths the sandbox sees.
	for p := range after.Entries {
		if slices.Contains([]string{"/lost+found", "/oldroot", "/work"}, p) {
			t.Errorf("the scan holds %s", p)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := sb.(driver.Pauser)
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := layer.Scan(ctx); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a paused VM's scan: %v; want a conflict", err)
	}
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	drivertest.ExpectChanges(t, fsdiff.CompareOver(after, drivertest.ScanLayer(t, layer), layer.Lowers), nil, nil, nil)
	drivertest.Destroy(context.Background(), t, sb)
	if c, err := store.GC(); err != nil || c.Layers != 2 {
		t.Fatalf("gc after the VM: %+v, %v; want its two layers collected", c, err)
	}
}
