package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockrun/airlock/api"
)

// The daemon's image store is the host's, shared by every tenant.

// imagePath is /api/v1/images/{ref}: the reference's slashes stay as they are (the route takes
// the rest of the path), everything between them is escaped.
func imagePath(ref string) string {
	parts := strings.Split(ref, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/api/v1/images/" + strings.Join(parts, "/")
}

// Images lists the images in the daemon's store, sorted by ref.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var imgs []api.Image
	err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/images"}, &imgs)
	return imgs, err
}

// Image returns the stored image with ref (as pulled, e.g. "python:3.12-slim") or with the
// manifest digest "sha256:...". One not in the store is ErrNotFound.
func (c *Client) Image(ctx context.Context, ref string) (api.Image, error) {
	var img api.Image
	err := c.call(ctx, request{method: http.MethodGet, path: imagePath(ref)}, &img)
	return img, err
}

// Pull makes the daemon pull ref from its registry, with the daemon host's registry
// credentials, and returns the image once it is unpacked. A malformed ref is
// ErrInvalidArgument; an image the registry does not have is ErrNotFound; a registry that is
// unreachable or refuses the host's credentials is ErrUnavailable, its message saying which.
// Cancelling ctx cancels the pull.
func (c *Client) Pull(ctx context.Context, ref string) (api.Image, error) {
	var img api.Image
	err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/images", json: api.PullRequest{Ref: ref}}, &img)
	return img, err
}

// RemoveImage removes ref from the daemon's store (a digest "sha256:..." removes every ref of
// that image) and deletes the layers no other image uses; layers a live sandbox uses are kept
// until it ends (LayersInUse).
func (c *Client) RemoveImage(ctx context.Context, ref string) (api.ImageRemoval, error) {
	var rm api.ImageRemoval
	err := c.call(ctx, request{method: http.MethodDelete, path: imagePath(ref)}, &rm)
	return rm, err
}

// PruneImages deletes the layers in the daemon's store that no image refers to, except those
// a live sandbox uses.
func (c *Client) PruneImages(ctx context.Context) (api.ImageRemoval, error) {
	var rm api.ImageRemoval
	err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/images/prune"}, &rm)
	return rm, err
}
