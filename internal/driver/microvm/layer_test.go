package microvm_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// TestLayerChangesOverImage is the container level's case of the same name on a VM: the guest
// agent scans the disk, and the host compares the trees over the image's layers, which the VM
// keeps leased. A file an exec wrote is created, an image file edited (copied up) modified, one
// removed (a whiteout) deleted, a directory removed and made again (opaque) hides what the image
// had in it, which is deleted. A paused VM's scan is a conflict until it resumes.
func TestLayerChangesOverImage(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	host := imagetest.Registry(t)
	files := imagetest.Layer(t,
		imagetest.Dir("workspace/", 0o755), imagetest.File("workspace/edit", "image", 0o666),
		imagetest.File("workspace/gone", "image", 0o644), imagetest.File("workspace/keep", "image", 0o644),
		imagetest.Dir("workspace/dir/", 0o777), imagetest.File("workspace/dir/a", "a", 0o644),
		imagetest.File("workspace/dir/b", "b", 0o644))
	ref := imagetest.PushLayers(t, host, "test/files:vm", v1.Config{Env: []string{"PATH=/bin"}},
		imagetest.TreeLayer(t, imagetest.Busybox(t)), files)
	store, err := image.Open(filepath.Join(t.TempDir(), "images"), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pull(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, func(c *microvm.Config) { c.Images = store })
	t0 := time.Now()
	t.Cleanup(func() { removeNewImages(d, t0) })
	h := &drivertest.Harness{D: d}
	sb := h.New(t, sandbox.Spec{Image: ref, User: sandbox.UserRoot})
	layer := drivertest.LayerOf(t, sb)
	if len(layer.Lowers) != 2 || layer.Dir != "" || layer.Scanner == nil {
		t.Fatalf("layer %+v: want the guest's scans over the image's two layers", layer)
	}
	// The layers stay leased while the VM runs: the image removed, they are not collected.
	if c, err := store.Remove(ref); err != nil || c.Layers != 0 || c.InUse != 2 {
		t.Fatalf("remove the image with the VM running: %+v, %v; want its two layers in use", c, err)
	}
	before := drivertest.ScanLayer(t, layer)
	res := drivertest.Exec(t, sb, 30*time.Second, "echo edited > /workspace/edit && rm /workspace/gone && "+
		"rm -r /workspace/dir && mkdir /workspace/dir && echo n > /workspace/new && cat /workspace/keep")
	if res.ExitCode != 0 || res.Stdout != "image" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	after := drivertest.ScanLayer(t, layer)
	drivertest.ExpectChanges(t, fsdiff.CompareOver(before, after, layer.Lowers),
		[]string{"/workspace/new"}, []string{"/workspace/dir", "/workspace/edit"},
		[]string{"/workspace/dir/a", "/workspace/dir/b", "/workspace/gone"})
	// The guest's own files (init's mount points, the lost+found of its ext4) are not the
	// sandbox's: only paths the sandbox sees.
	for p := range after.Entries {
		if p == "/lost+found" || slices.Contains([]string{"/oldroot", "/work"}, p) {
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
