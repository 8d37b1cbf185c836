package manager

// Snapshots (docs/api.md#http-api): a sandbox's writable layer, environment, working directory and metadata,
// and, where the level can, its processes, saved under an id; restored into the same sandbox, or
// into new ones (a create with fromSnapshot, a fork). The content lives in the snapshot store
// (internal/snapshot: compressed, content-addressed, checked on every read), the records in the
// store's snapshots table; both outlive the sandbox and the daemon.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// Limits of the snapshot API.
const (
	maxSnapshotName = 128
	maxSnapshotDesc = 1024
	maxForks        = 64
)

// blobs returns the snapshot store, or says why there is none.
func (m *Manager) blobs() (*snapshot.Store, error) {
	if m.snaps == nil {
		// The cause as text: whatever its kind, the store is unavailable.
		return nil, fmt.Errorf("snapshots: %v: %w", m.snapsErr, errdefs.ErrServiceUnavailable) //nolint:errorlint // see above
	}
	return m.snaps, nil
}

// SnapshotsAvailable reports whether the daemon has a snapshot store.
func (m *Manager) SnapshotsAvailable() bool { return m.snaps != nil }

// Snapshot saves sandbox id's state (docs/api.md#http-api). The sandbox goes on as it was (a paused one stays
// paused); it stands still only while its layer is read.
func (m *Manager) Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error) {
	if len(req.Name) > maxSnapshotName {
		return api.Snapshot{}, errdefs.Invalid("name", "at most %d characters (got %d)", maxSnapshotName, len(req.Name))
	}
	if len(req.Description) > maxSnapshotDesc {
		return api.Snapshot{}, errdefs.Invalid("description", "at most %d characters (got %d)", maxSnapshotDesc, len(req.Description))
	}
	b, err := m.live(ctx, id, "snapshot")
	if err != nil {
		return api.Snapshot{}, err
	}
	sn, err := m.takeSnapshot(ctx, b, req.Name, req.Description, req.Memory)
	if err != nil {
		return api.Snapshot{}, err
	}
	return snapshotView(sn), nil
}

// takeSnapshot saves b and records the snapshot; memory is SnapshotRequest.Memory.
func (m *Manager) takeSnapshot(ctx context.Context, b *box, name, desc string, memory *bool) (store.Snapshot, error) {
	ten := b.owner()
	if err := m.snapshotRoom(ten); err != nil {
		return store.Snapshot{}, err
	}
	blobs, err := m.blobs()
	if err != nil {
		return store.Snapshot{}, err
	}
	b.op.Lock() // one snapshot or restore of a sandbox at a time
	defer b.op.Unlock()
	sb, err := b.begin(ctx, "snapshot", false)
	if err != nil {
		return store.Snapshot{}, err
	}
	defer b.done()
	spec := b.specNow()
	snapper, ok := sb.(driver.Snapshotter)
	if !ok {
		return store.Snapshot{}, fmt.Errorf("isolation level %s cannot snapshot sandboxes: %w", spec.Isolation, errdefs.ErrUnavailable)
	}
	saves := snapper.SavesMemory()
	if memory != nil && *memory && !saves {
		what := spec.Isolation
		if spec.Runtime != "" {
			what += " level under " + spec.Runtime
		}
		return store.Snapshot{}, errdefs.Invalid("memory", "sandbox %s (%s) saves files only; ask for memory: false, or see capabilities' snapshot:memory", b.id, what)
	}
	mem := ""
	if saves && (memory == nil || *memory) {
		if mem, err = blobs.TempDir("memory-"); err != nil {
			return store.Snapshot{}, err
		}
		defer os.RemoveAll(mem)
	}
	t0 := time.Now()
	m.blobsMu.RLock() // from storing the content to its record
	defer m.blobsMu.RUnlock()
	var saved bool
	layer, err := blobs.PutLayer(func(w io.Writer) error {
		var err error
		saved, err = snapper.Snapshot(ctx, w, mem)
		return err
	})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot sandbox %s: %w", b.id, err)
	}
	sn := store.Snapshot{
		ID: sandbox.NewID("snap_"), Tenant: ten, SandboxID: b.id, Name: name, Description: desc,
		Spec: withoutCredentials(spec), LayerDigest: layer.Digest, LayerSize: layer.Size, LayerBytes: layer.Raw,
		CreatedAt: time.Now().UTC(),
	}
	if sn.Name == "" {
		sn.Name = sn.ID
	}
	if saved {
		sn.Memory = map[string]string{}
		ents, err := os.ReadDir(mem)
		if err != nil {
			return store.Snapshot{}, err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			blob, err := blobs.PutFile(filepath.Join(mem, e.Name()))
			if err != nil {
				return store.Snapshot{}, fmt.Errorf("snapshot sandbox %s: store memory image: %w", b.id, err)
			}
			sn.Memory[e.Name()], sn.MemorySize = blob.Digest, sn.MemorySize+blob.Size
		}
	}
	if err := m.store.PutSnapshot(context.WithoutCancel(ctx), sn); err != nil {
		return store.Snapshot{}, err
	}
	m.snapshotStored(ten, sn.LayerSize+sn.MemorySize)
	m.recordEvent(b, ten, api.Event{Type: api.EventSandboxSnapshot, Message: "snapshot " + sn.ID, Data: map[string]any{
		"snapshotId": sn.ID, "name": sn.Name, "memory": saved, "sizeMb": snapshotView(sn).SizeMB}})
	m.log.Info("snapshot taken", "sandbox", b.id, "snapshot", sn.ID, "layerBytes", sn.LayerBytes,
		"storedBytes", sn.LayerSize+sn.MemorySize, "memory", saved, "took", time.Since(t0))
	if saved {
		m.prepareRestore(b)
	}
	return sn, nil
}

// restoreInstance is the level id of the gen-th instance restores made of sandbox id.
func restoreInstance(id string, gen int) string { return fmt.Sprintf("%s-r%d", id, gen) }

// levelID is the level id of sandbox id after gen restores: its own id before the first.
func levelID(id string, gen int) string {
	if gen == 0 {
		return id
	}
	return restoreInstance(id, gen)
}

// prepareRestore has b's level make ready, in the background, the instance b's next restore goes
// into, when the level can (driver.Preparer): a sandbox with a memory snapshot is one that will
// likely be restored, and most of a restore is making the sandbox the image goes into.
func (m *Manager) prepareRestore(b *box) {
	d, _ := m.drivers.Lookup(b.level())
	if p, ok := d.(driver.Preparer); ok {
		b.prepare(p)
	}
}

// discardSpare ends what prepareRestore had the level of spec make as level id spare.
func (m *Manager) discardSpare(spec sandbox.Spec, spare string) {
	if spare == "" {
		return
	}
	d, _ := m.drivers.Lookup(spec.Isolation)
	if p, ok := d.(driver.Preparer); ok {
		p.Discard(spare)
	}
}

// Snapshots lists the tenant's snapshots, newest first: those of sandbox id, or all when id is "".
// A sandbox that never existed is ErrNotFound; an ended one still lists its snapshots.
func (m *Manager) Snapshots(ctx context.Context, id string) ([]api.Snapshot, error) {
	ten := tenant.From(ctx)
	if id != "" {
		if _, err := m.store.Sandbox(ctx, ten, id); err != nil {
			return nil, notFound(id, err)
		}
	}
	recs, err := m.store.Snapshots(ctx, ten, id)
	if err != nil {
		return nil, err
	}
	out := make([]api.Snapshot, 0, len(recs))
	for _, sn := range recs {
		out = append(out, snapshotView(sn))
	}
	return out, nil
}

// GetSnapshot returns one of the tenant's snapshots.
func (m *Manager) GetSnapshot(ctx context.Context, snapID string) (api.Snapshot, error) {
	sn, err := m.store.Snapshot(ctx, tenant.From(ctx), snapID)
	if err != nil {
		return api.Snapshot{}, err
	}
	return snapshotView(sn), nil
}

// DeleteSnapshot removes one of the tenant's snapshots, and its content unless another snapshot
// shares it, and returns it.
func (m *Manager) DeleteSnapshot(ctx context.Context, snapID string) (api.Snapshot, error) {
	m.blobsMu.Lock() // from finding content unused to removing it
	defer m.blobsMu.Unlock()
	sn, unused, err := m.store.DeleteSnapshot(ctx, tenant.From(ctx), snapID)
	if err != nil {
		return api.Snapshot{}, err
	}
	m.snapshotStored(sn.Tenant, -(sn.LayerSize + sn.MemorySize))
	if blobs, err := m.blobs(); err == nil {
		for _, d := range unused {
			if err := blobs.Remove(d); err != nil {
				m.log.Warn("remove snapshot blob", "snapshot", snapID, "blob", d, "err", err)
			}
		}
	}
	m.log.Info("snapshot deleted", "snapshot", snapID, "sandbox", sn.SandboxID)
	return snapshotView(sn), nil
}

// Restore puts sandbox id back in the state of a snapshot of the same level, root and user: the
// level makes a new sandbox from it, and only once that is ready does it replace the old one,
// which is then destroyed. A restore that fails (a corrupt snapshot, say) leaves the sandbox as
// it was. The sandbox keeps its id, resources, network policy and timeouts; its environment,
// working directory and metadata become the snapshot's; it is ready.
func (m *Manager) Restore(ctx context.Context, id string, req api.RestoreRequest) (api.Sandbox, error) {
	if req.SnapshotID == "" {
		return api.Sandbox{}, errdefs.Invalid("snapshotId", "required")
	}
	b, err := m.live(ctx, id, "restore")
	if err != nil {
		return api.Sandbox{}, err
	}
	sn, err := m.store.Snapshot(ctx, b.owner(), req.SnapshotID)
	if err != nil {
		return api.Sandbox{}, &errdefs.FieldError{Field: "snapshotId", Message: err.Error(), Kind: errdefs.ErrNotFound}
	}
	b.op.Lock()
	defer b.op.Unlock()
	spec, gen, err := b.beginRestore() // no new operation until endRestore
	if err != nil {
		return api.Sandbox{}, err
	}
	defer b.endRestore()
	if err := sameShape(sn.Spec, spec); err != nil {
		return api.Sandbox{}, err
	}
	next := restoredSpec(spec, sn)
	d, err := m.drivers.Lookup(spec.Isolation)
	if err != nil {
		return api.Sandbox{}, err
	}
	instance := restoreInstance(id, gen)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	sb, err := m.makeRestored(sctx, d, b, instance, next, sn)
	if err != nil {
		return api.Sandbox{}, err
	}
	old, view, err := b.swap(sctx, sb, next, gen, sn)
	if err != nil {
		if sb.Destroy(sctx) == nil {
			m.reclaimed(sctx, id, instance)
		}
		return api.Sandbox{}, err
	}
	m.watchIfWatcher(b, sb)
	m.destroyReplaced(b, old, levelID(id, gen-1))
	if sn.Memory != nil {
		m.prepareRestore(b)
	}
	m.log.Info("sandbox restored", "sandbox", id, "snapshot", sn.ID, "instance", instance, "took", time.Since(t0))
	return view, nil
}

// makeRestored has level d make instance, the next of sandbox b, from snapshot sn with spec. The
// instance is recorded before it is made, as one to tear down: a daemon killed before the swap is
// recorded reclaims it at its next start (swap's store.Restored makes it the sandbox's). A
// restore that fails leaves nothing of it.
func (m *Manager) makeRestored(ctx context.Context, d driver.Driver, b *box, instance string, spec sandbox.Spec, sn store.Snapshot) (driver.Sandbox, error) {
	if err := m.store.Retire(ctx, instance, b.id, spec.Isolation); err != nil {
		return nil, fmt.Errorf("record restore of sandbox %s: %w", b.id, err)
	}
	sb, err := m.restore(ctx, d, instance, spec, sn)
	spare := b.takeSpare(instance) // the level's Restore took it, unless the restore failed first
	if err == nil {
		return sb, nil
	}
	if spare {
		m.discardSpare(spec, instance)
	}
	// A failed restore leaves nothing (the level's contract); its Reclaim makes sure.
	if rc, ok := d.(driver.Reclaimer); !ok || rc.Reclaim(ctx, instance) == nil {
		m.reclaimed(ctx, b.id, instance)
	}
	return nil, err
}

// destroyReplaced ends, after the answer, instance old of sandbox b, which a restore replaced
// (swap). The store recorded it as retired with the restore, and forgets it once it is gone: a
// daemon killed meanwhile reclaims it at its next start (Recover). Ending the sandbox waits for
// it (release).
func (m *Manager) destroyReplaced(b *box, old driver.Sandbox, instance string) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer b.retiring.Done()
		dctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := old.Destroy(dctx); err != nil {
			m.log.Error("destroy the sandbox a restore replaced", "sandbox", b.id, "instance", instance, "err", err)
			return // reclaimed at the next start
		}
		m.reclaimed(dctx, b.id, instance)
	}()
}

// collectBlobs removes the snapshot blobs that no snapshot record uses. A snapshot's content is
// stored before its record, and a deleted snapshot's record goes before its content, so that a
// record never names a blob that is not there; a daemon killed in between (or a record that
// could not be written) leaves a blob that nothing names, and nothing else would ever remove it.
// Recover runs this before any request, when no snapshot is on its way in.
func (m *Manager) collectBlobs(ctx context.Context) {
	blobs, err := m.blobs()
	if err != nil {
		return
	}
	used, err := m.store.SnapshotDigests(ctx)
	if err != nil {
		m.log.Error("collect snapshot blobs", "err", err)
		return
	}
	all, err := blobs.Digests()
	if err != nil {
		m.log.Error("collect snapshot blobs", "err", err)
		return
	}
	var removed []string
	for _, d := range all {
		if used[d] {
			continue
		}
		if err := blobs.Remove(d); err != nil {
			m.log.Error("remove an unused snapshot blob", "blob", d, "err", err)
			continue
		}
		removed = append(removed, d)
	}
	if len(removed) > 0 {
		m.log.Info("removed snapshot blobs no snapshot uses", "blobs", removed)
	}
}

// reclaimed records that instance of sandbox id, recorded as one to tear down, is gone.
func (m *Manager) reclaimed(ctx context.Context, id, instance string) {
	if err := m.store.Reclaimed(ctx, instance); err != nil {
		m.log.Error("record the end of an instance", "sandbox", id, "instance", instance, "err", err)
	}
}

// restore has level d make sandbox instance from snapshot sn, with spec.
func (m *Manager) restore(ctx context.Context, d driver.Driver, instance string, spec sandbox.Spec, sn store.Snapshot) (driver.Sandbox, error) {
	blobs, err := m.blobs()
	if err != nil {
		return nil, err
	}
	r, ok := d.(driver.Restorer)
	if !ok {
		return nil, fmt.Errorf("isolation level %s cannot restore snapshots: %w", d.Name(), errdefs.ErrUnavailable)
	}
	corrupt := func(err error) error {
		if errors.Is(err, snapshot.ErrCorrupt) {
			return fmt.Errorf("snapshot %s cannot be restored, nothing was changed: %w", sn.ID, err)
		}
		return err
	}
	mem := ""
	if sn.Memory != nil {
		if mem, err = blobs.TempDir("restore-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(mem)
		// The runtime reads the image itself: every file is checked first.
		for name, digest := range sn.Memory {
			if err := blobs.Verify(digest); err != nil {
				return nil, corrupt(err)
			}
			if err := blobs.Link(digest, filepath.Join(mem, filepath.Base(name))); err != nil {
				return nil, corrupt(err)
			}
		}
	}
	layer, err := blobs.OpenLayer(sn.LayerDigest)
	if err != nil {
		return nil, corrupt(err)
	}
	defer layer.Close()
	sb, err := r.Restore(ctx, instance, spec, layer, mem)
	if err != nil {
		return nil, corrupt(err)
	}
	return sb, nil
}

// sameShape says whether a snapshot of a sandbox with spec from can be restored into one with spec
// to: same level, runtime, root and user.
func sameShape(from, to sandbox.Spec) error {
	for _, f := range []struct{ field, a, b string }{
		{"isolation", from.Isolation, to.Isolation}, {"runtime", from.Runtime, to.Runtime},
		{"template", from.Template, to.Template}, {"image", from.Image, to.Image},
		{"user", from.User, to.User},
	} {
		if f.a != f.b {
			return &errdefs.FieldError{Field: "snapshotId", Kind: errdefs.ErrConflict,
				Message: fmt.Sprintf("the snapshot is of a sandbox with %s %q, this one has %q: a snapshot restores only into a sandbox of the same isolation, runtime, root and user", f.field, f.a, f.b)}
		}
	}
	return nil
}

// fromSnapshot makes spec, a create's with fromSnapshot, the spec of the sandbox to restore: the
// snapshot's shape (fields the create gave must equal it), its environment and metadata under
// the create's, its network policy (without credentials) unless the create gives one.
func (m *Manager) fromSnapshot(ctx context.Context, spec sandbox.Spec) (sandbox.Spec, store.Snapshot, error) {
	sn, err := m.store.Snapshot(ctx, tenant.From(ctx), spec.FromSnapshot)
	if err != nil {
		return spec, sn, &errdefs.FieldError{Field: "fromSnapshot", Message: err.Error(), Kind: errdefs.ErrNotFound}
	}
	from := sn.Spec
	same := func(field string, given, saved any, zero bool) error {
		if zero || given == saved {
			return nil
		}
		return errdefs.Invalid(field, "the snapshot's sandbox has %v; leave it out or give the same (got %v)", saved, given)
	}
	for _, err := range []error{
		same("isolation", spec.Isolation, from.Isolation, spec.Isolation == ""),
		same("runtime", spec.Runtime, from.Runtime, spec.Runtime == ""),
		same("template", spec.Template, from.Template, spec.Template == ""),
		same("image", spec.Image, from.Image, spec.Image == ""),
		same("user", spec.User, from.User, spec.User == ""),
		same("workdir", path.Clean(spec.Workdir), from.Workdir, spec.Workdir == ""),
		// Resources given are compared one by one: a zero one is its default, which the
		// snapshot's sandbox has filled in.
		same("resources.cpu", spec.Resources.CPU, from.Resources.CPU, spec.Resources.CPU == 0),
		same("resources.memoryMb", spec.Resources.MemoryMB, from.Resources.MemoryMB, spec.Resources.MemoryMB == 0),
		same("resources.diskMb", spec.Resources.DiskMB, from.Resources.DiskMB, spec.Resources.DiskMB == 0),
		same("resources.networkMbps", spec.Resources.NetworkMbps, from.Resources.NetworkMbps, spec.Resources.NetworkMbps == 0),
		same("resources.maxProcesses", spec.Resources.MaxProcesses, from.Resources.MaxProcesses, spec.Resources.MaxProcesses == 0),
		same("resources.maxOpenFiles", spec.Resources.MaxOpenFiles, from.Resources.MaxOpenFiles, spec.Resources.MaxOpenFiles == 0),
	} {
		if err != nil {
			return spec, sn, err
		}
	}
	if len(spec.Filesystem.ReadOnly)+len(spec.Filesystem.ReadWrite)+len(spec.Filesystem.Blocked) > 0 {
		return spec, sn, errdefs.Invalid("filesystem", "a sandbox from a snapshot has the snapshot's sandbox's file tree; leave filesystem out")
	}
	if len(spec.Volumes) > 0 {
		return spec, sn, errdefs.Invalid("volumes", "a sandbox from a snapshot has the snapshot's sandbox's volumes; leave volumes out")
	}
	out := from
	out.Name, out.AgentID, out.Timeout, out.FromSnapshot = spec.Name, spec.AgentID, spec.Timeout, spec.FromSnapshot
	// The new sandbox's own ID (a Pod's, chosen by the front API), never the snapshot's sandbox's.
	out.ID = spec.ID
	out.Environment = maps.Clone(from.Environment)
	if out.Environment == nil && len(spec.Environment) > 0 {
		out.Environment = map[string]string{}
	}
	maps.Copy(out.Environment, spec.Environment)
	out.Metadata = maps.Clone(from.Metadata)
	if out.Metadata == nil && len(spec.Metadata) > 0 {
		out.Metadata = map[string]string{}
	}
	maps.Copy(out.Metadata, spec.Metadata)
	if spec.Network.EgressPolicy != "" {
		out.Network = spec.Network
	}
	return out, sn, nil
}

// Fork snapshots sandbox id and starts req.Count new sandboxes from the snapshot, at once. They
// get the sandbox's network policy, credentials included. If one cannot be made, those made are
// terminated and the error returned; the snapshot stays.
func (m *Manager) Fork(ctx context.Context, id string, req api.ForkRequest) (api.Fork, error) {
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 1 || req.Count > maxForks {
		return api.Fork{}, errdefs.Invalid("count", "between 1 and %d (got %d)", maxForks, req.Count)
	}
	if len(req.Name) > maxSnapshotName {
		return api.Fork{}, errdefs.Invalid("name", "at most %d characters", maxSnapshotName)
	}
	b, err := m.live(ctx, id, "fork")
	if err != nil {
		return api.Fork{}, err
	}
	sn, err := m.takeSnapshot(ctx, b, "fork of "+id, fmt.Sprintf("taken to fork %d sandbox(es)", req.Count), req.Memory)
	if err != nil {
		return api.Fork{}, err
	}
	network := b.specNow().Network
	out := api.Fork{Snapshot: snapshotView(sn), Sandboxes: make([]api.Sandbox, req.Count)}
	errs := make([]error, req.Count)
	var wg sync.WaitGroup
	for i := range req.Count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := sandbox.Spec{FromSnapshot: sn.ID, Network: network}
			if req.Name != "" {
				spec.Name = fmt.Sprintf("%s-%d", req.Name, i+1)
			}
			out.Sandboxes[i], errs[i] = m.Create(ctx, spec)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, sb := range out.Sandboxes {
			if errs[i] == nil {
				if _, err := m.Terminate(context.WithoutCancel(ctx), sb.ID); err != nil {
					m.log.Error("terminate a fork of a failed fork", "sandbox", sb.ID, "err", err)
				}
			}
		}
		return api.Fork{}, fmt.Errorf("fork sandbox %s: %w", id, err)
	}
	return out, nil
}

// ForkNetwork is the network policy a fork of live sandbox id gets (Fork's): the sandbox's own,
// credentials included. A node gives it to the sandbox of a Pod the front API made as a fork
// (docs/kubernetes.md#snapshots-restore-and-fork).
func (m *Manager) ForkNetwork(ctx context.Context, id string) (sandbox.Network, error) {
	b, err := m.live(ctx, id, "fork")
	if err != nil {
		return sandbox.Network{}, err
	}
	return b.specNow().Network, nil
}

// withoutCredentials is spec without its network credentials: their values are secrets that
// never go into a snapshot.
func withoutCredentials(spec sandbox.Spec) sandbox.Spec {
	spec.Network.Credentials = nil
	return spec
}

func snapshotView(sn store.Snapshot) api.Snapshot {
	return api.Snapshot{
		ID: sn.ID, SandboxID: sn.SandboxID, Name: sn.Name, Description: sn.Description,
		Isolation: sn.Spec.Isolation, Runtime: sn.Spec.Runtime,
		SizeMB:     math.Ceil(float64(sn.LayerSize+sn.MemorySize)/(1<<20)*100) / 100, // 0.01 at least
		LayerBytes: sn.LayerBytes, Memory: sn.Memory != nil, Digest: sn.LayerDigest, CreatedAt: sn.CreatedAt,
	}
}

// restoresOf is how many restores a sandbox with level instance id instance has had.
func restoresOf(id, instance string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(instance, id+"-r"))
	if err != nil {
		return 0
	}
	return n
}
