package api

import "time"

// SnapshotRequest is the body of POST /api/v1/sandboxes/{id}/snapshots.
type SnapshotRequest struct {
	Name        string `json:"name,omitempty"`        // up to 128 characters; default: the snapshot's id
	Description string `json:"description,omitempty"` // up to 1024 characters
	// Memory says whether to save running processes and their memory: absent means wherever the
	// sandbox's level and runtime can (container level under runsc); true requires it (400 where
	// they cannot); false saves files only. A snapshot with memory is taken between execs and of
	// a running sandbox: one while an exec runs, or of a paused sandbox, is refused (409).
	Memory *bool `json:"memory,omitempty"`
}

// Snapshot is a sandbox's saved state: its writable layer (compressed, content-addressed, checked
// against its sha256 on every restore), environment, working directory and metadata, and, where
// the level can save it, its memory and running processes. A snapshot outlives its sandbox and a
// daemon restart; it goes when it is deleted.
type Snapshot struct {
	ID          string `json:"snapshotId"` // snap_...
	SandboxID   string `json:"sandboxId"`  // the sandbox it was taken of
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Isolation and Runtime are the level the snapshot can be restored into: only a sandbox of the
	// same level, runtime, image, rootfs, template and user.
	Isolation string `json:"isolation"`
	Runtime   string `json:"runtime,omitempty"`
	// SizeMB is what the snapshot takes on disk (compressed layer plus memory image), in MiB,
	// rounded up to 0.01.
	SizeMB float64 `json:"sizeMb"`
	// LayerBytes is the writable layer's size before compression.
	LayerBytes int64 `json:"layerBytes"`
	// Memory says whether running processes and their memory were saved (container level under
	// runsc); otherwise a restore starts from the files, with no process running.
	Memory bool `json:"memory"`
	// Digest is the sha256 of the compressed layer, its address in the snapshot store.
	Digest    string    `json:"digest"`
	CreatedAt time.Time `json:"createdAt"`
}

// RestoreRequest is the body of POST /api/v1/sandboxes/{id}/restore.
type RestoreRequest struct {
	SnapshotID string `json:"snapshotId" openapi:"required"`
}

// Restore is the answer to POST /api/v1/sandboxes/{id}/restore, seed 000's shape: the sandbox's
// id, its state ("ready"), the snapshot it was restored from and when; the sandbox as it now is
// follows in the same object.
type Restore struct {
	State        string    `json:"state"`
	RestoredFrom string    `json:"restoredFrom"` // the snapshot's ID
	RestoredAt   time.Time `json:"restoredAt"`
	Sandbox
}

// ForkRequest is the body of POST /api/v1/sandboxes/{id}/fork: Count new sandboxes, each started
// from one snapshot taken of the sandbox now.
type ForkRequest struct {
	Count int `json:"count,omitempty"` // 1 to 64 (default 1)
	// Name is the new sandboxes' name prefix; the i-th is "<name>-<i>" (default: no name).
	Name string `json:"name,omitempty"`
	// Memory is the snapshot's (SnapshotRequest.Memory): with it, the forks' processes run on
	// from where the parent's were.
	Memory *bool `json:"memory,omitempty"`
}

// Fork is the answer to a fork: the snapshot it took (kept until deleted) and the new sandboxes.
type Fork struct {
	Snapshot  Snapshot  `json:"snapshot"`
	Sandboxes []Sandbox `json:"sandboxes"`
}
