// Package manager owns the daemon's live sandboxes: it creates them through the drivers, moves
// them through the lifecycle of docs/daemon.md#lifecycle (recording every transition in the store before it is
// acknowledged), runs execs, enforces timeouts and quotas, and recovers after a crash.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenancy"
	"github.com/airlockrun/airlock/internal/tenant"
)

// Config tunes the manager; the zero value of a field means its default.
type Config struct {
	// MaxSandboxesPerTenant caps a tenant's live sandboxes (HTTP 429 beyond) where its quota
	// sets none. Default 100.
	MaxSandboxesPerTenant int
	// MaxPools caps the pools made through the API; MaxPoolSandboxes the sandboxes all pools
	// keep warm together. Defaults 16 and 256.
	MaxPools, MaxPoolSandboxes int
	// TickInterval is how often timeouts are checked and metrics sampled. Default 1 s.
	TickInterval time.Duration
	// MetricsHistory is how many samples GET .../metrics returns as "recent". Default 300.
	MetricsHistory int
	// LogBytes caps the output and events kept per sandbox for GET .../logs. Default 4 MiB.
	LogBytes int
	// SnapshotDir is where snapshots' content is stored (internal/snapshot). "" means the
	// daemon offers no snapshots.
	SnapshotDir string
	// Audit configures the audit log (retention, or no stored events at all); its Sinks get
	// every event once it is in the log (webhooks, metrics).
	Audit audit.Config
	// Sinks are added to Audit.Sinks.
	Sinks []audit.Sink
	// Metrics times creates and execs (airlock_sandbox_create_seconds, airlock_exec_seconds);
	// nil records nothing.
	Metrics *metrics.Metrics
	// Grants are what the operator lends tenants (volumes, templates, secrets, images) and
	// their quotas; nil grants nothing beyond the host template and bounds only
	// MaxSandboxesPerTenant.
	Grants *tenancy.Grants
	// ImageInStore reports whether an image is in the host's store already (the operator
	// pulled it, so any tenant may use it); nil means none is.
	ImageInStore func(ref string) bool
	// ImageCommand is the entrypoint and cmd of an image in the host's store (the agent of a
	// sandbox of it that names none); nil means none has one.
	ImageCommand func(ref string) []string
	// DefaultIsolation is the level of a sandbox (or pool) whose spec names none: the
	// operator's defaults.isolation. Default sandbox.DefaultIsolation (container).
	DefaultIsolation string
}

func (c *Config) setDefaults() {
	if c.MaxSandboxesPerTenant == 0 {
		c.MaxSandboxesPerTenant = 100
	}
	if c.TickInterval == 0 {
		c.TickInterval = time.Second
	}
	if c.MaxPools == 0 {
		c.MaxPools = 16
	}
	if c.MaxPoolSandboxes == 0 {
		c.MaxPoolSandboxes = 256
	}
	if c.MetricsHistory == 0 {
		c.MetricsHistory = 300
	}
	if c.LogBytes == 0 {
		c.LogBytes = 4 << 20
	}
	if c.Grants == nil {
		c.Grants = &tenancy.Grants{}
	}
	if c.ImageInStore == nil {
		c.ImageInStore = func(string) bool { return false }
	}
	if c.ImageCommand == nil {
		c.ImageCommand = func(string) []string { return nil }
	}
	if c.DefaultIsolation == "" {
		c.DefaultIsolation = sandbox.DefaultIsolation
	}
}

// Manager is the daemon's sandbox manager. It is safe for concurrent use.
type Manager struct {
	cfg     Config
	drivers *driver.Registry
	journal // the store, the audit log and the logger, shared with the boxes

	mu    sync.Mutex      // guards boxes and ended
	boxes map[string]*box // live sandboxes (provisioning, ready, running, paused)
	// ended keeps the logs of recently ended sandboxes, so that a follower sees the end and a
	// late reader the last output; oldest first.
	ended []*box

	// claiming counts each tenant's claims from warm pools in flight, for the quota.
	claiming map[string]int
	claims   *claimWriter     // records claims, grouped
	poolMu   sync.Mutex       // guards pools
	pools    map[string]*pool // warm pools by name
	// poolAPIMu orders PutPool and DeletePool, which store and then start or stop a pool.
	poolAPIMu sync.Mutex

	snaps *snapshot.Store // nil without one, and snapsErr says why
	// blobsMu orders storing a snapshot's content and record against deleting a record and its
	// now unused content: a snapshot that finds its content stored already (equal layers are
	// stored once) must not record it while a delete removes it. Snapshots share it.
	blobsMu  sync.RWMutex
	snapsErr error

	stored *storedBytes // what the store keeps for each tenant, against maxStoredMb
	unrec  unrecorded   // exec results the store could not take yet (storage.go)

	closing atomic.Bool // the daemon is ending every sandbox (EndSandboxes)
	prov    *background // provisioning in the background (provision.go)
	agents  *background // the sandboxes' running agents (agent.go)

	stop chan struct{}
	wg   sync.WaitGroup
}

// maxEnded bounds how many ended sandboxes' logs stay in memory.
const maxEnded = 256

// New returns a manager over the given drivers and store, and starts its timekeeper. Call
// Recover before serving requests and Close at the end.
func New(cfg Config, drivers *driver.Registry, st *store.Store, log *slog.Logger) *Manager {
	cfg.setDefaults()
	m := &Manager{cfg: cfg, drivers: drivers, journal: journal{store: st, log: log}, boxes: map[string]*box{}, stop: make(chan struct{}), prov: newBackground(), agents: newBackground(),
		claiming: map[string]int{}, pools: map[string]*pool{}, claims: newClaimWriter(st), stored: newStoredBytes(),
	}
	acfg := cfg.Audit
	acfg.Sinks = append(append([]audit.Sink(nil), acfg.Sinks...), cfg.Sinks...)
	m.events = audit.New(st, acfg, log.With("component", "audit"))
	if cfg.SnapshotDir == "" {
		m.snapsErr = errors.New("this daemon has no snapshot store configured")
	} else if m.snaps, m.snapsErr = snapshot.Open(cfg.SnapshotDir); m.snapsErr != nil {
		log.Error("snapshot store unavailable", "err", m.snapsErr)
	}
	m.wg.Add(3)
	go m.tick()
	go func() {
		defer m.wg.Done()
		m.claims.run(m.stop)
	}()
	go func() {
		defer m.wg.Done()
		m.events.Run(m.stop)
	}()
	return m
}

// createSpec is the spec a create of spec makes, with the snapshot it restores (nil for none) and
// the level that makes it: the snapshot's spec under the create's, defaulted and validated,
// within the tenant's grants, resolved.
func (m *Manager) createSpec(ctx context.Context, spec sandbox.Spec) (sandbox.Spec, *store.Snapshot, driver.Driver, error) {
	var from *store.Snapshot
	if spec.FromSnapshot != "" {
		s, sn, err := m.fromSnapshot(ctx, spec)
		if err != nil {
			return spec, nil, nil, err
		}
		spec, from = s, &sn
	}
	if spec.Agent == nil && spec.AgentID != "" {
		if ag, ok := m.cfg.Grants.AgentFor(tenant.From(ctx), tenant.IsAdmin(ctx), spec.AgentID); ok {
			spec.Agent = &ag // the operator's agent of that ID (config agents)
		}
	}
	defaulted := spec.Isolation == ""
	if defaulted {
		spec.Isolation = m.cfg.DefaultIsolation
	}
	sandbox.SetDefaults(&spec)
	if err := sandbox.Validate(&spec); err != nil {
		return spec, nil, nil, err
	}
	if err := checkAgent(spec); err != nil {
		return spec, nil, nil, err
	}
	if err := m.admit(ctx, spec); err != nil {
		return spec, nil, nil, err
	}
	if err := m.checkStore(ctx); err != nil {
		return spec, nil, nil, err // before a warm sandbox is taken: its claim could not be recorded
	}
	if err := m.cfg.Grants.Resolve(&spec); err != nil {
		return spec, nil, nil, err
	}
	d, err := m.drivers.Lookup(spec.Isolation)
	if err != nil {
		return spec, nil, nil, isolationUnavailable(err, spec.Isolation, defaulted)
	}
	return spec, from, d, nil
}

// isolationUnavailable is the 422 of a create whose level this host cannot run. When the level
// was the daemon's default (the request named none) it says so and how to fix it: the level is
// never silently replaced by another.
func isolationUnavailable(err error, level string, defaulted bool) error {
	msg := err.Error()
	if defaulted {
		msg = fmt.Sprintf("the request names no isolation and this daemon's default level is %s (config defaults.isolation), "+
			"which this host cannot run: %s. Fix: install what it needs (for container, gVisor's runsc: make deps), "+
			"name a level in the request (isolation: process), or set the operator's default (defaults.isolation)", level, msg)
	}
	return &errdefs.FieldError{Field: "isolation", Message: msg, Kind: errdefs.ErrUnavailable}
}

// DefaultIsolation is the level of a create that names none.
func (m *Manager) DefaultIsolation() string { return m.cfg.DefaultIsolation }

// watchIfWatcher starts watching sb if its level can end by itself.
func (m *Manager) watchIfWatcher(b *box, sb driver.Sandbox) {
	if w, ok := sb.(driver.Watcher); ok {
		m.wg.Add(1)
		go m.watch(b, w)
	}
}

// agentEndGrace is how long a sandbox that ended by itself waits for its running agent's result.
const agentEndGrace = 5 * time.Second

// watch fails a sandbox that ends by itself.
func (m *Manager) watch(b *box, w driver.Watcher) {
	defer m.wg.Done()
	select {
	case <-w.Done():
		// A running agent ends with its sandbox: its result, which says whether a limit killed
		// it (an OOM kill that took the sandbox's init too), ends the sandbox instead.
		if run := b.runningAgent(); run != nil {
			select {
			case <-run.done:
			case <-time.After(agentEndGrace):
			case <-m.stop:
			}
		}
		// Unless the manager released it (Destroy closes Done too), or a restore replaced it.
		if b.runs(w) {
			m.log.Warn("sandbox ended by itself", "sandbox", b.id)
			_ = m.release(b, api.StatusFailed, sandbox.ReasonInitExited) // release logs what it could not record
		}
	case <-m.stop:
	}
}

// Get returns one sandbox of the tenant in ctx, with its transitions.
func (m *Manager) Get(ctx context.Context, id string) (api.Sandbox, error) {
	rec, err := m.store.Sandbox(ctx, tenant.From(ctx), id)
	if err != nil {
		return api.Sandbox{}, notFound(id, err)
	}
	view := m.recordView(rec)
	if view.Transitions, err = m.store.Transitions(ctx, id); err != nil {
		return api.Sandbox{}, err
	}
	return view, nil
}

// ListOptions filter List.
type ListOptions struct {
	Status   []string
	AgentID  string
	Metadata map[string]string
}

// List returns the tenant's sandboxes, newest first.
func (m *Manager) List(ctx context.Context, o ListOptions) ([]api.Sandbox, error) {
	recs, err := m.store.Sandboxes(ctx, store.Filter{Tenant: tenant.From(ctx), Status: o.Status, AgentID: o.AgentID, Metadata: o.Metadata})
	if err != nil {
		return nil, err
	}
	out := make([]api.Sandbox, 0, len(recs))
	for _, r := range recs {
		out = append(out, m.recordView(r))
	}
	return out, nil
}

// expiresAt is when timeout.maxDurationSeconds ends a sandbox created at created.
func expiresAt(spec sandbox.Spec, created time.Time) time.Time {
	return created.Add(time.Duration(spec.Timeout.MaxDurationSeconds) * time.Second)
}

// recordView is a stored sandbox as the API shows it. The store is never behind memory: a
// transition is recorded before it counts.
func (m *Manager) recordView(r store.Sandbox) api.Sandbox {
	return redact(api.Sandbox{
		ID: r.ID, Status: r.Status, Reason: r.Reason, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ExpiresAt: expiresAt(r.Spec, r.CreatedAt), Spec: r.Spec, Endpoints: endpoints(r.ID),
	})
}

func endpoints(id string) api.Endpoints {
	p := "/api/v1/sandboxes/" + id
	return api.Endpoints{Exec: p + "/exec", Files: p + "/files", Logs: p + "/logs", Metrics: p + "/metrics"}
}

// live returns the live sandbox id of the tenant in ctx. A sandbox that exists but is not live
// is a *sandbox.StateError for op; one that does not exist (or is another tenant's) is
// ErrNotFound.
func (m *Manager) live(ctx context.Context, id, op string) (*box, error) {
	ten := tenant.From(ctx)
	m.mu.Lock()
	b, ok := m.boxes[id]
	m.mu.Unlock()
	if ok && (ten == "" || b.owner() == ten) {
		// A sandbox still provisioning is waited for (within its setup deadline and ctx): a
		// client that creates and at once execs keeps working.
		if err := b.settle(ctx, op); err != nil {
			return nil, err
		}
		return b, nil
	}
	rec, err := m.store.Sandbox(ctx, ten, id)
	if err != nil {
		return nil, notFound(id, err)
	}
	serr := &sandbox.StateError{ID: id, Status: rec.Status, Op: op}
	if rec.Status == api.StatusFailed && rec.Reason != "" {
		// Why, as settle says it to an operation that waited: one that came a moment later (the
		// sandbox let go already) learns the same.
		return nil, fmt.Errorf("%w: %s", serr, rec.Reason)
	}
	return nil, serr
}

func notFound(id string, err error) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return err
}

// Pause freezes every process of a sandbox.
func (m *Manager) Pause(ctx context.Context, id string) (api.Sandbox, error) {
	return m.freeze(ctx, id, "pause", api.StatusPaused, sandbox.ReasonPaused, func(p driver.Pauser) error { return p.Pause(ctx) })
}

// Resume thaws a paused sandbox.
func (m *Manager) Resume(ctx context.Context, id string) (api.Sandbox, error) {
	return m.freeze(ctx, id, "resume", api.StatusRunning, sandbox.ReasonResumed, func(p driver.Pauser) error { return p.Resume(ctx) })
}

func (m *Manager) freeze(ctx context.Context, id, op, to, reason string, do func(driver.Pauser) error) (api.Sandbox, error) {
	b, err := m.live(ctx, id, op)
	if err != nil {
		return api.Sandbox{}, err
	}
	if to == api.StatusPaused {
		// The scans of the execs that answered are made first: a paused sandbox may not answer
		// one (a VM's layer is scanned by its guest).
		b.waitScans(ctx, 5*time.Second)
	}
	return b.freeze(ctx, op, to, reason, do)
}

// Terminate ends a sandbox at the tenant's request: its processes are killed, its host resources
// released, and it ends terminated (through completed if it ran).
func (m *Manager) Terminate(ctx context.Context, id string) (api.Sandbox, error) {
	b, err := m.live(ctx, id, "terminate")
	if err != nil {
		var se *sandbox.StateError
		if !errors.As(err, &se) || sandbox.Live(se.Status) {
			return api.Sandbox{}, err
		}
		// An ended sandbox whose teardown is unfinished (a destroy that failed, a killed
		// daemon's) has it finished first; the answer waits for it.
		status := se.Status
		if td, err := m.store.TeardownOf(ctx, id); err == nil {
			if status, err = m.finishTeardown(ctx, td, status); err != nil {
				return api.Sandbox{}, err
			}
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return api.Sandbox{}, err
		}
		if se.Status == api.StatusTerminated {
			return api.Sandbox{}, err
		}
		// A failed or completed sandbox holds nothing; terminating it only closes the record.
		if status != api.StatusTerminated {
			t := api.Transition{From: status, To: api.StatusTerminated, Reason: sandbox.ReasonTerminated, At: time.Now().UTC()}
			if err := m.store.Transition(ctx, id, status, t); err != nil {
				return api.Sandbox{}, err
			}
			if rec, err := m.store.Sandbox(ctx, tenant.From(ctx), id); err == nil {
				m.recordEnded(rec.Tenant, id, t)
			}
		}
		return m.Get(ctx, id)
	}
	if err := m.release(b, api.StatusTerminated, sandbox.ReasonTerminated); err != nil {
		if errors.Is(err, errNothingDestroyed) {
			return api.Sandbox{}, fmt.Errorf("sandbox %s not terminated: %w", id, err)
		}
		return api.Sandbox{}, fmt.Errorf("sandbox %s holds nothing now, but its end could not be recorded; terminate it again when the store has room (a restart finishes it too): %w", id, err)
	}
	return m.Get(ctx, id)
}

// recordEnded emits transition t, recorded, of sandbox id of tenant ten, which has ended (it
// is no box's, and its log is complete): in the audit log, and so to webhooks.
func (m *Manager) recordEnded(ten, id string, t api.Transition) {
	m.events.Add(store.TenantEvent{Tenant: ten, Event: api.Event{ID: sandbox.NewOrderedID("evt_"), SandboxID: id, Type: api.EventSandboxStatus,
		Time: t.At, Message: t.Reason, Data: map[string]any{"from": t.From, "to": t.To, "reason": t.Reason}}})
}

// EndSandboxes ends every live sandbox with reason daemon_shutdown; an exec cut off by it is
// recorded with endedBy daemon_shutdown. The daemon calls it (then Close) when its shutdown
// grace is over with requests in flight.
func (m *Manager) EndSandboxes() {
	m.closing.Store(true)
	m.prov.stop() // provisioning in flight is cut short, and ends failed
	var wg sync.WaitGroup
	for _, b := range m.snapshot() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = m.release(b, api.StatusTerminated, sandbox.ReasonDaemonShutdown) // release logs what it could not record
		}()
	}
	wg.Wait()
}

// forget drops b from the live set; its logs stay readable for a while when keep is set.
func (m *Manager) forget(b *box, keep bool) {
	b.logs.end()
	unclaimed := isPoolTenant(b.owner()) // an unclaimed pool sandbox's logs interest no one
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.boxes, b.id)
	if keep && !unclaimed {
		m.ended = append(m.ended, b)
		if len(m.ended) > maxEnded {
			m.ended = m.ended[len(m.ended)-maxEnded:]
		}
	}
}

// tick enforces maxDurationSeconds and idleTimeoutSeconds and samples metrics.
func (m *Manager) tick() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			if !m.store.Probe(context.Background()).Degraded {
				m.recordUnrecorded(context.Background())
			}
			for _, b := range m.snapshot() {
				if reason := b.expired(now); reason != "" {
					m.log.Info("sandbox timed out", "sandbox", b.id, "reason", reason)
					go func() { _ = m.release(b, api.StatusTerminated, reason) }() // release logs what it could not record
					continue
				}
				m.sample(b, now)
			}
		}
	}
}

// snapshot returns the live sandboxes, oldest first.
func (m *Manager) snapshot() []*box {
	m.mu.Lock()
	out := make([]*box, 0, len(m.boxes))
	for _, b := range m.boxes {
		out = append(out, b)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].createdAt.Before(out[j].createdAt) })
	return out
}

// Live returns how many sandboxes are live.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.boxes)
}

// Close stops the timekeeper and ends every live sandbox with reason daemon_shutdown.
func (m *Manager) Close() {
	m.closePools()
	close(m.stop)
	m.EndSandboxes()
	m.agents.stop() // each one ended with its sandbox
	// Nothing is live any more: the teardowns left unfinished (a destroy that failed, a killed
	// daemon's that Recover could not finish) are tried again, and each level sweeps what is its
	// own, so that a clean stop leaves nothing behind.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	m.finishTeardowns(ctx)
	m.sweep(ctx)
	cancel()
	m.wg.Wait()
	m.recordUnrecorded(context.Background()) // a last try; what fails is marked lost at the next start
	m.events.Flush()                         // what the last teardowns reported
}

// sweep has every available level remove what no sandbox of its holds any more.
func (m *Manager) sweep(ctx context.Context) {
	for _, d := range m.drivers.All() {
		if s, ok := d.(driver.Sweeper); ok && d.Capabilities().Available {
			s.Sweep(ctx)
		}
	}
}
