package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// A box is one sandbox the manager knows in memory, and the state machine of its lifecycle
// (sandbox.CanTransition). The box owns its state: its status, its level's sandbox and what is in
// flight on it change in its methods here, under its lock, and each transition is recorded in
// the store before it counts. The manager's request paths are steps over these: provisioned or
// failed after a create; begin and done around an operation; freeze for a pause or resume;
// beginRestore, swap and endRestore around a restore; beginEnd and recordEnd around a release.
type box struct {
	id      string
	j       *journal // where its transitions and events are recorded
	logs    *logRing
	metrics *metricRing
	// res is spec's resources, which no later spec changes (a claim's has its pool's shape; a
	// restore or a network policy leaves them): the quota reads them under m.mu alone.
	res sandbox.Resources

	mu sync.Mutex // guards everything below
	// tenant, spec, createdAt and expiresAt change when a warm pool's sandbox is claimed, before
	// it is live (in m.boxes, where readers under m.mu find it); spec also with a restore or a
	// new network policy.
	tenant     string
	spec       sandbox.Spec
	createdAt  time.Time
	expiresAt  time.Time
	status     string
	reason     string
	updatedAt  time.Time
	lastActive time.Time
	busy       int            // execs, file operations and interactive sessions in flight
	execs      []execSpan     // the recent execs' times, to tell which one opened a connection
	sb         driver.Sandbox // nil until ready and after release
	restores   int            // how many times a snapshot replaced sb (its level id's suffix)
	restoring  bool           // a restore is about to replace sb: no new operations
	spare      string         // the level id its level prepared the next restore in ("" none)
	// ending is made when a release begins and closed when it is done: a second release (a
	// retried DELETE, a timeout) waits for the first instead of ending b twice.
	ending chan struct{}

	// setup is closed when b leaves provisioning (ready, or failed): operations on a sandbox
	// still provisioning wait for it (settle). setupOnce closes it.
	setup     chan struct{}
	setupOnce sync.Once

	op       sync.Mutex     // orders snapshots and restores of the sandbox
	retiring sync.WaitGroup // destroys of the instances restores replaced, in flight

	scans layerScans // the last scan of the writable layer, for exec.files events

	agent   *agentRun // its agent while it runs (agent.go), under mu
	agentRC *int      // its agent's exit code once it exited by itself, under mu
}

// journal is where boxes record what happens to them: transitions in the store, events in their
// log streams and the audit log. The manager is one, and its boxes share it.
type journal struct {
	store  *store.Store
	events *audit.Log
	log    *slog.Logger
}

// recordEvent puts an event of sandbox b, owned by tenant ten, in its logs stream and in the
// audit log (which hands it to the sinks: webhooks, metrics). It never waits for the store.
func (j *journal) recordEvent(b *box, ten string, e api.Event) {
	if e.ID == "" {
		e.ID = sandbox.NewOrderedID("evt_")
	}
	e.SandboxID = b.id
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b.logs.add(api.LogEntry{Stream: api.StreamEvent, ExecutionID: e.ExecutionID, Event: &e})
	j.events.Add(store.TenantEvent{Tenant: ten, Event: e})
}

// newBox is the in-memory side of sandbox r, active from now.
func (m *Manager) newBox(r store.Sandbox) *box {
	b := &box{
		id: r.ID, j: &m.journal, res: r.Spec.Resources, tenant: r.Tenant, spec: r.Spec, createdAt: r.CreatedAt, expiresAt: expiresAt(r.Spec, r.CreatedAt),
		logs: newLogRing(m.cfg.LogBytes), metrics: newMetricRing(m.cfg.MetricsHistory),
		status: r.Status, reason: r.Reason, updatedAt: r.UpdatedAt, lastActive: time.Now(),
		restores: restoresOf(r.ID, r.Instance), setup: make(chan struct{}),
	}
	if r.Status != api.StatusProvisioning {
		b.setupDone()
	}
	return b
}

// setupDone marks b's provisioning over, whatever its outcome, and wakes those waiting for it.
func (b *box) setupDone() { b.setupOnce.Do(func() { close(b.setup) }) }

// settle waits, for an operation op, until b is no longer provisioning, or ctx is done. A
// sandbox whose provisioning failed is a *sandbox.StateError naming why.
func (b *box) settle(ctx context.Context, op string) error {
	select {
	case <-b.setup:
	default:
		select {
		case <-b.setup:
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s is still provisioning; %s it once it is ready: %w", b.id, op, errdefs.ErrConflict)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status == api.StatusFailed {
		return fmt.Errorf("%w: its provisioning failed: %s", &sandbox.StateError{ID: b.id, Status: b.status, Op: op}, b.reason)
	}
	return nil
}

// moveLocked records b's move to status `to` and makes it current. The store is written first:
// a transition that is not recorded did not happen.
func (b *box) moveLocked(ctx context.Context, to, reason string) error {
	if !sandbox.CanTransition(b.status, to) {
		return &sandbox.StateError{ID: b.id, Status: b.status, Op: "become " + to}
	}
	now := time.Now().UTC()
	t := api.Transition{From: b.status, To: to, Reason: reason, At: now}
	if err := b.j.store.Transition(context.WithoutCancel(ctx), b.id, b.status, t); err != nil {
		return fmt.Errorf("record transition %s → %s: %w", b.status, to, err)
	}
	b.status, b.reason, b.updatedAt = to, reason, now
	data := map[string]any{"from": t.From, "to": to, "reason": reason}
	if reason == sandbox.ReasonAgentExit && b.agentRC != nil {
		data["exitCode"] = *b.agentRC
	}
	b.j.recordEvent(b, b.tenant, api.Event{Type: api.EventSandboxStatus, Time: now, Message: reason, Data: data})
	b.j.log.Debug("transition", "sandbox", b.id, "from", t.From, "to", to, "reason", reason)
	return nil
}

// record is b's record as a new sandbox's.
func (b *box) record() store.Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return store.Sandbox{ID: b.id, Tenant: b.tenant, Spec: b.spec, Status: b.status, Reason: b.reason,
		CreatedAt: b.createdAt, UpdatedAt: b.createdAt}
}

// view is b as the API shows it.
func (b *box) view() api.Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.viewLocked()
}

func (b *box) viewLocked() api.Sandbox {
	return redact(api.Sandbox{
		ID: b.id, Status: b.status, Reason: b.reason, CreatedAt: b.createdAt, UpdatedAt: b.updatedAt,
		ExpiresAt: b.expiresAt, Spec: b.spec, Endpoints: endpoints(b.id),
	})
}

// owner is b's tenant (it changes once, when a warm pool's sandbox is claimed).
func (b *box) owner() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tenant
}

// level is b's isolation level, for the metrics' level label.
func (b *box) level() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spec.Isolation
}

// specNow is b's spec.
func (b *box) specNow() sandbox.Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spec
}

// state is b's status and its level's sandbox (nil before it is ready and once it is released).
func (b *box) state() (string, driver.Sandbox) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status, b.sb
}

// runs reports whether sb is b's level's sandbox still: not released, nor replaced by a restore.
func (b *box) runs(sb any) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb != nil && any(b.sb) == sb
}

// provisioned makes sb, which b's level made, b's, and b ready for reason. When that cannot be
// recorded sb is b's all the same, for the release that follows to destroy.
func (b *box) provisioned(ctx context.Context, sb driver.Sandbox, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sb = sb
	return b.moveLocked(ctx, api.StatusReady, reason)
}

// failed records that b's level could not make it.
func (b *box) failed(ctx context.Context, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.moveLocked(ctx, api.StatusFailed, reason); err != nil {
		b.j.log.Error("record a failed create", "sandbox", b.id, "err", err)
	}
}

// begin marks b busy for an operation and returns its level's sandbox; done ends it. An exec
// moves a ready sandbox to running; a paused sandbox takes no exec.
func (b *box) begin(ctx context.Context, op string, exec bool) (driver.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.beginLocked(ctx, op, exec, sandbox.ReasonExec)
}

// beginLocked is begin with b.mu held; a ready sandbox that an exec starts becomes running for
// reason.
func (b *box) beginLocked(ctx context.Context, op string, exec bool, reason string) (driver.Sandbox, error) {
	ok := b.status == api.StatusReady || b.status == api.StatusRunning || (!exec && b.status == api.StatusPaused)
	if !ok || b.sb == nil {
		return nil, &sandbox.StateError{ID: b.id, Status: b.status, Op: op}
	}
	if b.restoring {
		return nil, fmt.Errorf("sandbox %s is being restored from a snapshot; %s it when the restore returns: %w", b.id, op, errdefs.ErrConflict)
	}
	if exec && b.status == api.StatusReady {
		if err := b.moveLocked(ctx, api.StatusRunning, reason); err != nil {
			return nil, err
		}
	}
	b.busy++
	b.lastActive = time.Now()
	return b.sb, nil
}

// done ends what begin started.
func (b *box) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.busy--
	b.lastActive = time.Now()
}

// freeze moves b to `to` (paused, or running again) for reason, once do has had its level's
// sandbox do it; op names the move in errors.
func (b *box) freeze(ctx context.Context, op, to, reason string, do func(driver.Pauser) error) (api.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !sandbox.CanTransition(b.status, to) || b.sb == nil {
		return api.Sandbox{}, &sandbox.StateError{ID: b.id, Status: b.status, Op: op}
	}
	p, ok := b.sb.(driver.Pauser)
	if !ok {
		return api.Sandbox{}, fmt.Errorf("isolation level %s cannot %s: %w", b.spec.Isolation, op, errdefs.ErrUnavailable)
	}
	if err := do(p); err != nil {
		return api.Sandbox{}, fmt.Errorf("%s sandbox %s: %w", op, b.id, err)
	}
	if err := b.moveLocked(ctx, to, reason); err != nil {
		return api.Sandbox{}, err
	}
	b.lastActive = time.Now()
	return b.viewLocked(), nil
}

// expired says why b must end now, or "".
func (b *box) expired(now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status == api.StatusProvisioning || b.ending != nil {
		return ""
	}
	if !now.Before(b.expiresAt) {
		return sandbox.ReasonTimeout
	}
	idle := time.Duration(b.spec.Timeout.IdleTimeoutSeconds) * time.Second
	if b.busy == 0 && now.Sub(b.lastActive) >= idle {
		return sandbox.ReasonIdle
	}
	return ""
}

// setSpec makes spec b's (recorded already) and returns b as the API shows it.
func (b *box) setSpec(spec sandbox.Spec) api.Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spec = spec
	return b.viewLocked()
}

// Warm pools: a pool's sandbox waits ready, owned by the pool's tenant, until a create claims it.

// waiting reports whether b, waiting in a pool, is still ready to be claimed, and whether it has
// waited maxAge since it was made.
func (b *box) waiting(now time.Time, maxAge time.Duration) (ready, aged bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status == api.StatusReady && b.sb != nil, now.Sub(b.lastActive) >= maxAge
}

// warmed is b's level's sandbox, and when b became ready in its pool.
func (b *box) warmed() (driver.Sandbox, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb, b.updatedAt
}

// handTo makes b, claimed at now (and recorded so), tenant ten's with the claim's spec, and
// returns it as the API shows it.
func (b *box) handTo(ten string, spec sandbox.Spec, now time.Time) api.Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tenant, b.spec, b.createdAt, b.expiresAt = ten, spec, now, expiresAt(spec, now)
	b.lastActive, b.updatedAt = time.Now(), now
	return b.viewLocked()
}

// Restores (snapshots.go): beginRestore, then the level makes the new instance, then swap, and
// endRestore whatever happened.

// beginRestore starts a restore of b: no operation starts until endRestore. It returns b's spec
// and the restore's generation (the new instance's suffix). A sandbox that is not live, or has
// operations in flight, is refused. The caller holds b.op.
func (b *box) beginRestore() (sandbox.Spec, int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.sb == nil || !(b.status == api.StatusReady || b.status == api.StatusRunning || b.status == api.StatusPaused):
		return sandbox.Spec{}, 0, &sandbox.StateError{ID: b.id, Status: b.status, Op: "restore"}
	case b.busy > 0:
		return sandbox.Spec{}, 0, fmt.Errorf("sandbox %s has %d exec(s) or file operation(s) in flight; restore it when they end: %w", b.id, b.busy, errdefs.ErrConflict)
	}
	b.restoring = true
	return b.spec, b.restores + 1, nil
}

// endRestore ends what beginRestore started.
func (b *box) endRestore() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.restoring = false
}

// takeSpare reports whether instance is the one prepareRestore had b's level make, and if so
// forgets it: a restore into it took it.
func (b *box) takeSpare(instance string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spare != instance {
		return false
	}
	b.spare = ""
	return true
}

// prepare has b's level (p) make ready, in the background, the instance b's next restore goes
// into, unless it has one or b has ended.
func (b *box) prepare(p driver.Preparer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spare != "" || !sandbox.Live(b.status) || b.sb == nil {
		return
	}
	// Under b.mu, so that beginEnd, which takes b.spare under it, discards what this starts.
	b.spare = restoreInstance(b.id, b.restores+1)
	p.Prepare(b.spare, b.spec)
}

// swap makes sb, the instance of generation gen a restore from sn made with spec, b's level's
// sandbox, and b ready. It is recorded first (store.Restored, which also records the replaced
// instance as one to tear down); it returns that instance, which b's release waits for until
// retired (b.retiring) is done. A sandbox that ended meanwhile is not swapped: a
// *sandbox.StateError, and sb is the caller's to destroy, as on any error.
func (b *box) swap(ctx context.Context, sb driver.Sandbox, spec sandbox.Spec, gen int, sn store.Snapshot) (old driver.Sandbox, view api.Sandbox, err error) {
	var host json.RawMessage
	if hf, ok := sb.(driver.HostFacter); ok {
		host = hf.HostFacts()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !sandbox.Live(b.status) || b.sb == nil {
		// It ended meanwhile (a timeout, a terminate): the new instance has no sandbox to join.
		return nil, api.Sandbox{}, &sandbox.StateError{ID: b.id, Status: b.status, Op: "restore"}
	}
	if err := b.j.store.Restored(ctx, b.id, restoreInstance(b.id, gen), spec, host, levelID(b.id, gen-1)); err != nil {
		return nil, api.Sandbox{}, fmt.Errorf("record restore of sandbox %s: %w", b.id, err)
	}
	old = b.sb
	b.sb, b.spec, b.restores = sb, spec, gen
	b.retiring.Add(1) // under b.mu: a release from now on reads the new sb, and waits for the old one
	b.scans.drop()
	if b.status != api.StatusReady {
		if err := b.moveLocked(ctx, api.StatusReady, sandbox.ReasonRestored); err != nil {
			b.j.log.Error("record restore transition", "sandbox", b.id, "err", err)
		}
	}
	b.lastActive = time.Now()
	b.j.recordEvent(b, b.tenant, api.Event{Type: api.EventSandboxRestored, Message: "restored from " + sn.ID,
		Data: map[string]any{"snapshotId": sn.ID, "memory": sn.Memory != nil}})
	return old, b.viewLocked(), nil
}

// restoredSpec is the spec of sandbox spec restored from snapshot sn: the snapshot's
// environment, working directory and metadata.
func restoredSpec(spec sandbox.Spec, sn store.Snapshot) sandbox.Spec {
	spec.Environment, spec.Workdir, spec.Metadata = maps.Clone(sn.Spec.Environment), sn.Spec.Workdir, maps.Clone(sn.Spec.Metadata)
	return spec
}

// Ends (teardown.go): beginEnd records the intent and takes what the release destroys; then
// recordEnd, once it is destroyed.

// taken is what beginEnd took from a box for its release to destroy.
type taken struct {
	done   chan struct{} // b.ending: closed when the release is over
	sb     driver.Sandbox
	spare  string
	spec   sandbox.Spec
	intent error // why the teardown intent could not be recorded, if it could not
}

// beginEnd starts b's end (`end`, for reason): it records the teardown intent, then takes b's
// level's sandbox and spare instance so that no operation starts; those in flight return when
// their processes die. It returns nil when there is nothing to end: b ended, or another release
// is ending it (it waited for that one), or a client's terminate whose intent could not be
// recorded, which takes nothing (the error, errNothingDestroyed).
func (b *box) beginEnd(ctx context.Context, end, reason string) (*taken, error) {
	b.mu.Lock()
	if ending := b.ending; ending != nil || !sandbox.Live(b.status) {
		b.mu.Unlock()
		if ending != nil {
			<-ending
		}
		return nil, nil // someone else ended it
	}
	defer b.mu.Unlock()
	td := store.Teardown{SandboxID: b.id, LevelID: levelID(b.id, b.restores), Isolation: b.spec.Isolation, End: end, Reason: reason}
	// Without the intent recorded the record stays live, and a restart reclaims it as such.
	intent := b.j.store.BeginTeardown(ctx, td)
	if intent != nil && reason == sandbox.ReasonTerminated {
		// A client's terminate that could not be recorded destroys nothing: the sandbox goes
		// on as it was (and a later end ends it), and the client is told (a full store is a
		// 507). Every other end (timeouts, shutdown, failures) destroys anyway: a sandbox never
		// outlives them.
		return nil, fmt.Errorf("%w: %w", errNothingDestroyed, intent)
	}
	b.ending = make(chan struct{})
	t := &taken{done: b.ending, sb: b.sb, spare: b.spare, spec: b.spec, intent: intent}
	b.sb, b.spare = nil, ""
	if reason == sandbox.ReasonTimeout {
		secs := b.spec.Timeout.MaxDurationSeconds
		b.j.recordEvent(b, b.tenant, api.Event{Type: sandbox.EventLimitTimeout, Message: fmt.Sprintf("the sandbox reached its maxDurationSeconds (%d)", secs),
			Data: map[string]any{"scope": "sandbox", "seconds": secs}})
	}
	return t, nil
}

// recordEnd records the end of b, whose level's sandbox is destroyed, along the path ends gives.
func (b *box) recordEnd(ctx context.Context, end, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, to := range ends(b.status, end) {
		if err := b.moveLocked(ctx, to, reason); err != nil {
			b.j.log.Error("record the end of a sandbox", "sandbox", b.id, "err", err)
			return err
		}
	}
	return nil
}
