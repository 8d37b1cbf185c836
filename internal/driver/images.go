package driver

import (
	"context"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// ImageLayers gives a sandbox of spec made from an image (spec.Image) its image's layers from
// images: the layer directories top first, as overlayfs stacks them, spec with the image's
// environment under its own, and release, which lets the layers be collected again once the
// sandbox is gone (a no-op when there is nothing to release). A spec without an image gets no
// layers and is returned as it is.
func ImageLayers(ctx context.Context, images Images, spec sandbox.Spec) (lowers []string, _ sandbox.Spec, release func(), err error) {
	release = func() {}
	if spec.Image == "" {
		return nil, spec, release, nil
	}
	if images == nil {
		return nil, spec, release, errdefs.Unavailable("image", "no image store is configured")
	}
	dirs, env, rel, err := images.Layers(ctx, spec.Image)
	if err != nil {
		return nil, spec, release, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		lowers = append(lowers, dirs[i])
	}
	spec.Environment = WithImageEnv(spec.Environment, env)
	return lowers, spec, rel, nil
}
