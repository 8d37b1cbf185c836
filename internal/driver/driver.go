// Package driver defines the small interface every isolation level implements, the static facts a
// level reports about itself, and the registry the daemon and CLI look levels up in.
package driver

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// Driver is an isolation level. Implementations register themselves by name (see Register).
type Driver interface {
	// Name is the level's name: "process", "container", ...
	Name() string
	// Capabilities says whether the level works on this host and, if not, why and how to fix it.
	// It is cheap: drivers probe once, at construction.
	Capabilities() Capabilities
	// Create builds a sandbox from a defaulted, validated spec and returns it ready for Exec. The
	// network policy and every limit are in force before Create returns. ctx bounds the setup only.
	Create(ctx context.Context, id string, spec sandbox.Spec) (Sandbox, error)
}

// Sandbox is one live sandbox of some level.
type Sandbox interface {
	ID() string
	// Exec runs one command and waits for it. ctx's deadline is the command's timeout: when it
	// passes, the command's whole process tree is killed and the result says TimedOut. An error is
	// returned only when the command could not be run at all; a command that fails is a result.
	Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	// Destroy kills everything in the sandbox and releases every host resource it held: processes,
	// mounts, cgroups, namespaces. It is safe to call more than once.
	Destroy(ctx context.Context) error
}

// Sweeper is a level that can clean up after airlock processes that were killed before they
// could tear their sandboxes down. Found by type assertion.
type Sweeper interface {
	Sweep(ctx context.Context)
}

// Closer is a level that holds host state of its own beside its sandboxes' (mounts its
// sandboxes share, say). Close releases it once the level's sandboxes are gone: the daemon calls
// it at a clean stop, after ending them. A level whose sandboxes outlive it (adoptable ones) keeps
// what they need.
type Closer interface {
	Close(ctx context.Context) error
}

// Capabilities are static facts about a level on this host.
type Capabilities struct {
	Level     string   `json:"level"`
	Available bool     `json:"available"`
	Reason    string   `json:"reason,omitempty"` // why not, when !Available
	Fix       string   `json:"fix,omitempty"`    // how to make it available
	Features  []string `json:"features,omitempty"`
	// Detail says how an available level runs on this host, when that depends on the host (the
	// microvm level's accelerator, and why).
	Detail string `json:"detail,omitempty"`
	// Checks are the individual host facts behind Available, for `airlock doctor`.
	Checks []Check `json:"checks,omitempty"`
}

// Check is one probed host fact.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	// Required checks make the level unavailable when they fail; others only weaken it (and
	// doctor says so).
	Required bool `json:"required"`
}

// Watcher is a sandbox that can end by itself (its init died, its VM crashed). Done is closed
// when that happens; the daemon then marks the sandbox failed and destroys it.
type Watcher interface {
	Done() <-chan struct{}
}

// Pauser is a sandbox whose processes can be frozen and thawed (cgroup freezer). A paused sandbox
// uses no CPU; its memory stays allocated.
type Pauser interface {
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}

// Statser is a sandbox that can report its kernel counters, for the metrics API.
type Statser interface {
	Usage(ctx context.Context) (Usage, error)
}

// Usage is a reading of a sandbox's kernel counters; cumulative values count from its creation.
type Usage struct {
	CPUTime          time.Duration
	MemoryBytes      int64
	MemoryPeakBytes  int64
	MemoryLimitBytes int64
	Pids             int64
	PidsLimit        int64
	DiskUsedBytes    int64
	DiskLimitBytes   int64
	NetTxBytes       int64
	NetRxBytes       int64
}

// FileRooter is a sandbox whose root filesystem the host can reach directly, for the files API.
type FileRooter interface {
	// FileRoot opens the sandbox's root directory as its processes see it (the caller closes
	// it), and says which host uid and gid own files the sandbox's user creates. The files API
	// resolves every path beneath this directory with the kernel's RESOLVE_IN_ROOT, so neither
	// ".." nor a symlink can lead out of it.
	FileRoot() (root *os.File, uid, gid int, err error)
}

// FileServer is a sandbox whose files the host does not reach (a VM's disk is its guest's
// alone): its own side serves the files API instead, with the same checks.
type FileServer interface {
	// OpenFiles opens the sandbox's filesystem for one session of the files API, bound to ctx.
	OpenFiles(ctx context.Context) (Files, error)
}

// Files is a sandbox's filesystem as the files API uses it: fsroot.Root's calls, on sandbox
// paths, with its errors (errdefs kinds). Close ends the session.
type Files interface {
	Open(p string) (io.ReadCloser, api.FileInfo, error)
	Stat(p string) (api.FileInfo, error)
	List(p string) ([]api.FileInfo, error)
	Write(p string, src io.Reader, mode os.FileMode, limit int64, parents bool) (api.FileInfo, error)
	Mkdir(p string, parents bool) (api.FileInfo, error)
	Remove(p string, recursive bool) error
	Close() error
}

// Networker is a sandbox whose network policy can change while it runs (PUT .../network). The
// new policy is in force for every connection attempt after UpdateNetwork returns.
type Networker interface {
	UpdateNetwork(ctx context.Context, n sandbox.Network) error
}

// EgressProxier is a sandbox with a network of its own whose egress proxy the daemon can send
// requests through on the sandbox's behalf (an http tool's, docs/tools.md): they leave as the
// sandbox's own would, under its policy, with its credentials, recorded as its network events.
type EgressProxier interface {
	// EgressProxy is the explicit proxy's URL (http://HOST:PORT), or false for a sandbox
	// without a network (egress none).
	EgressProxy() (proxyURL string, ok bool)
}

// Claimer is a sandbox that can be made ahead of time, in a warm pool, and handed to the create
// that claims it. Claim gives it that create's spec, whose shape (everything the pool matched on)
// is the sandbox's own; what may differ takes effect per exec or live: environment, network
// policy and credentials, name, metadata and timeouts. It is called once, before the claimant's
// first exec, and when it returns the new policy is in force.
type Claimer interface {
	Claim(ctx context.Context, spec sandbox.Spec) error
}

// Snapshotter is a sandbox whose state can be saved (docs/api.md#http-api snapshots). The sandbox goes on
// running: it is frozen while its layer is read, so the layer is one instant's, and a paused
// sandbox stays paused.
type Snapshotter interface {
	// Snapshot writes the sandbox's writable layer to layer as a tar stream (internal/snapshot's
	// format). When mem is not "" and the level can save processes (FeatureSnapshotMemory), it
	// also writes their memory and state into the directory mem, taken at the same instant as the
	// layer, and says so.
	Snapshot(ctx context.Context, layer io.Writer, mem string) (memory bool, err error)
	// SavesMemory reports whether Snapshot saves this sandbox's processes when given mem (its
	// level lists FeatureSnapshotMemory, and its runtime can).
	SavesMemory() bool
}

// Layerer is a sandbox whose writable layer can be scanned, for the files an exec changed
// (audit: internal/fsdiff scans the layer before and after, Layer.Scan).
type Layerer interface {
	// Layer says how the sandbox's writable layer is scanned; it stays valid until Destroy.
	// It fails with errdefs.ErrUnavailable, saying why, where the level cannot scan the layer, and
	// with errdefs.ErrConflict while the sandbox cannot hand it over (paused before it ever did).
	Layer(ctx context.Context) (Layer, error)
}

// Layer is a sandbox's writable layer as the host scans it, live: a scan sees writes as they
// happen. The host reads it (Dir), or, where only the sandbox's own kernel can (a VM's disk),
// has it scanned there (Scanner); either way the scans are compared on the host, over Lowers.
type Layer struct {
	// Dir holds the layer; Layout names its top-level entries and the sandbox paths they are
	// seen at.
	Dir    string
	Layout snapshot.Layout
	// Lowers are the read-only directories under the layer's overlay (an image's layers or a
	// rootfs directory), top first, as the host reads them, seen at the sandbox's root; none for
	// a sandbox on the host's template.
	Lowers []string
	// Scanner, when set, scans the layer instead of the host reading Dir (which is then ""): a
	// tree of Layout's sandbox paths, made where the layer is and refused unless it is one
	// (fsdiff.ReadTree). It fails with errdefs.ErrConflict while the sandbox cannot answer
	// (paused).
	Scanner func(ctx context.Context) (fsdiff.Tree, error)
}

// Scan scans the layer: fsdiff.Scan of Dir, or the level's Scanner.
func (l Layer) Scan(ctx context.Context) (fsdiff.Tree, error) {
	if l.Scanner != nil {
		return l.Scanner(ctx)
	}
	return fsdiff.Scan(l.Dir, l.Layout)
}

// Restorer is a level that can start a sandbox from a snapshot: Create, with the writable layer
// read from layer before anything runs, and, when mem is not "", the processes a Snapshot saved
// into mem continuing where they were. An error reading layer (a snapshot found corrupt at its
// end) fails the restore, and nothing of the new sandbox is left.
type Restorer interface {
	Restore(ctx context.Context, id string, spec sandbox.Spec, layer io.Reader, mem string) (Sandbox, error)
}

// Preparer is a Restorer that can make, ahead of a restore, the sandbox a memory image will be
// restored into, so that the restore itself only loads the image (the container level under
// runsc: `runsc create` long before `runsc restore`).
type Preparer interface {
	// Prepare starts making sandbox id of spec ready for a Restore with a memory image, in the
	// background, when the level can for spec; it returns at once. A Restore of id whose spec
	// has the same shape uses it; any other Restore of id, or Discard, ends it.
	Prepare(id string, spec sandbox.Spec)
	// Discard ends what Prepare made for id, if anything, waiting for it to be made first.
	Discard(id string)
}

// Features a level may list in Capabilities.Features.
const (
	FeatureSnapshotFilesystem = "snapshot:filesystem" // Snapshotter and Restorer: the writable layer
	FeatureSnapshotMemory     = "snapshot:memory"     // also running processes and their memory
	// Preparer: a sandbox's next restore with memory goes into a sandbox made ahead.
	FeatureSnapshotPrepared = "snapshot:prepared-restore"
)

// Reclaimer is a level that can release what is left of one sandbox whose driver object is gone,
// e.g. after the daemon was killed: its cgroup, state files, network namespace.
type Reclaimer interface {
	Reclaim(ctx context.Context, id string) error
}

// HostFacter is a sandbox that can describe, for the store, what a later airlock process needs
// to find it again after this one died (e.g. its init's pid and adoption socket).
type HostFacter interface {
	HostFacts() json.RawMessage
}

// Adopter is a level whose sandboxes can outlive the airlock process that made them for a while
// (a daemon crash or upgrade) and be taken over by the next one, from their HostFacts. Adopt
// fails, leaving the sandbox as it is, unless it can verify that the sandbox is still the one
// recorded and still alive.
type Adopter interface {
	Adopt(ctx context.Context, id string, spec sandbox.Spec, host json.RawMessage) (Sandbox, error)
}

// Images gives levels the unpacked layers of an OCI image reference (pulling it when needed):
// directories bottom layer first, the image's environment, and a release that lets the layers
// be collected again once the sandbox is gone.
type Images interface {
	Layers(ctx context.Context, ref string) (dirs, env []string, release func(), err error)
}

// WithImageEnv is a sandbox's environment over its image's (PATH, LANG, PYTHON_VERSION, ...).
func WithImageEnv(env map[string]string, image []string) map[string]string {
	out := map[string]string{}
	for _, kv := range image {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out[k] = v
		}
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}
