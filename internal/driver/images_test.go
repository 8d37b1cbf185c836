package driver_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// fakeImages has one image, "img", of two layers, bottom first.
type fakeImages struct{ released *int }

func (f fakeImages) Layers(_ context.Context, ref string) ([]string, []string, func(), error) {
	if ref != "img" {
		return nil, nil, nil, errdefs.ErrNotFound
	}
	return []string{"/bottom", "/top"}, []string{"PATH=/image/bin", "LANG=C"}, func() { *f.released++ }, nil
}

func TestImageLayers(t *testing.T) {
	released := 0
	store := fakeImages{&released}
	for _, c := range []struct {
		name     string
		images   driver.Images
		image    string
		lowers   []string
		env      map[string]string
		err      error
		released int
	}{
		{name: "no image", images: store, env: map[string]string{"PATH": "/mine"}},
		{name: "no image, no store", env: map[string]string{"PATH": "/mine"}},
		{name: "no store", image: "img", err: errdefs.ErrUnavailable},
		{name: "unknown image", images: store, image: "other", err: errdefs.ErrNotFound},
		{name: "image", images: store, image: "img", lowers: []string{"/top", "/bottom"},
			env: map[string]string{"PATH": "/mine", "LANG": "C"}, released: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			released = 0
			spec := sandbox.Spec{Image: c.image, Environment: map[string]string{"PATH": "/mine"}}
			lowers, got, release, err := driver.ImageLayers(context.Background(), c.images, spec)
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if err != nil {
				return
			}
			release()
			if !slices.Equal(lowers, c.lowers) || len(got.Environment) != len(c.env) || released != c.released {
				t.Fatalf("lowers %v, environment %v, released %d; want %v, %v, %d", lowers, got.Environment, released, c.lowers, c.env, c.released)
			}
			for k, v := range c.env {
				if got.Environment[k] != v {
					t.Errorf("environment %s = %q, want %q", k, got.Environment[k], v)
				}
			}
		})
	}
}
