package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image/imagetest"
)

func TestRemoveAndGC(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	base := imagetest.Layer(t, imagetest.File("base", "shared", 0o644))
	one := imagetest.Layer(t, imagetest.File("one", "1", 0o644))
	two := imagetest.Layer(t, imagetest.File("two", "2", 0o644))
	ref1 := imagetest.PushLayers(t, host, "test/one:v1", v1.Config{}, base, one)
	ref2 := imagetest.PushLayers(t, host, "test/two:v1", v1.Config{}, base, two)
	s := newStore(t, Options{})
	ctx := context.Background()
	img1, err := s.Pull(ctx, ref1, nil)
	if err != nil {
		t.Fatal(err)
	}
	img2, err := s.Pull(ctx, ref2, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers := func() []string {
		var ids []string
		for _, e := range entries(t, filepath.Join(s.dir, "layers/sha256")) {
			ids = append(ids, "sha256:"+e)
		}
		slices.Sort(ids)
		return ids
	}
	want := func(imgs ...Image) []string {
		var ids []string
		for _, img := range imgs {
			ids = append(ids, img.Layers...)
		}
		slices.Sort(ids)
		return slices.Compact(ids)
	}
	if got := layers(); !slices.Equal(got, want(img1, img2)) || len(got) != 3 {
		t.Fatalf("layers = %v", got)
	}

	// Removing one keeps the shared base.
	if c, err := s.Remove(ref1); err != nil || !slices.Equal(c.Refs, []string{ref1}) || c.Layers != 1 || c.Bytes < int64(len("1")) || c.InUse != 0 {
		t.Fatalf("Remove(one) = %+v, %v; want its one own layer", c, err)
	}
	if got := layers(); !slices.Equal(got, want(img2)) {
		t.Errorf("after Remove(one): layers %v, want %v", got, want(img2))
	}
	if _, err := s.Get(ref1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(removed) = %v", err)
	}
	if _, err := s.Remove(ref1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Remove twice = %v", err)
	}
	if es := entries(t, filepath.Join(s.dir, "manifests/sha256")); len(es) != 1 || "sha256:"+es[0] != img2.Digest {
		t.Errorf("manifests = %v, want only %s", es, img2.Digest)
	}

	// A lease keeps the layers of a removed image.
	lease, err := s.Acquire(img2)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Remove(img2.Digest); err != nil || !slices.Equal(c.Refs, []string{ref2}) || c.Layers != 0 || c.InUse != 2 {
		t.Fatalf("Remove(leased) = %+v, %v; want its 2 layers kept in use", c, err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("List after removing all = %v", list)
	}
	if got := layers(); !slices.Equal(got, want(img2)) {
		t.Errorf("leased layers collected: %v", got)
	}
	if dirs, err := s.LayerDirs(img2); err != nil || len(dirs) != 2 {
		t.Errorf("LayerDirs of a leased, removed image = %v, %v", dirs, err)
	}
	if c, err := s.GC(); c.Layers != 0 || c.InUse != 2 || err != nil {
		t.Errorf("GC with a lease = %+v, %v", c, err)
	}
	lease.Release()
	lease.Release()
	c, err := s.GC()
	if c.Layers != 2 || c.Bytes < int64(len("shared")+len("2")) || c.InUse != 0 || c.Refs != nil || err != nil {
		t.Errorf("GC after Release = %+v, %v; want 2 layers", c, err)
	}
	if got := layers(); len(got) != 0 {
		t.Errorf("layers after GC = %v", got)
	}
	for _, d := range []string{"tmp", "manifests/sha256"} {
		if es := entries(t, filepath.Join(s.dir, d)); len(es) != 0 {
			t.Errorf("%s after GC = %v", d, es)
		}
	}
	if _, err := s.Acquire(img2); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "airlock pull") {
		t.Errorf("Acquire of a collected image = %v", err)
	}
	if _, err := s.LayerDirs(img2); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("LayerDirs of a collected image = %v", err)
	}
	// Pulled again, it is whole again.
	if _, err := s.Pull(ctx, ref2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "index.json")); err != nil {
		t.Fatal(err)
	}
}
