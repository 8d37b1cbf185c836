package api

import "time"

// Image is an OCI image in the daemon's image store (GET /api/v1/images). The store is the
// host's, shared by every tenant.
type Image struct {
	// Ref is the normalized reference, e.g. "index.docker.io/library/python:3.12-slim".
	Ref string `json:"ref"`
	// Digest is the manifest's digest ("sha256:..."); for a multi-platform image, the digest of
	// the manifest of the daemon's platform.
	Digest string `json:"digest"`
	// Layers are the diff IDs ("sha256:...") of the unpacked layers, bottom layer first.
	Layers []string `json:"layers"`
	// Size is the unpacked bytes (the uncompressed layer tars).
	Size   int64       `json:"size"`
	Pulled time.Time   `json:"pulled"`
	Config ImageConfig `json:"config"`
}

// ImageConfig is what a sandbox made from the image takes from its configuration.
type ImageConfig struct {
	Env        []string `json:"env,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// PullRequest is the body of POST /api/v1/images.
type PullRequest struct {
	Ref string `json:"ref" openapi:"required"` // e.g. "python:3.12-slim" (Docker Hub), "ghcr.io/org/app:v1", "repo@sha256:..."
}

// ImageRemoval is the answer of DELETE /api/v1/images/{ref} and POST /api/v1/images/prune. A
// layer a live sandbox (or a pull in progress) holds is never deleted: it is counted in
// LayersInUse and collected by a later prune once it is let go.
type ImageRemoval struct {
	Refs          []string `json:"refs"` // the references removed (none for a prune)
	LayersRemoved int      `json:"layersRemoved"`
	BytesFreed    int64    `json:"bytesFreed"`
	LayersInUse   int      `json:"layersInUse"`
}
