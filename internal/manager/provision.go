package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// Provisioning (SPEC §5): a create records the sandbox provisioning, in the store first, and its
// level makes it either before the answer (Create: wait) or in the background (CreateAsync). The
// background work is tracked: a stop cancels what is in flight and waits for it, so that it
// leaves nothing (the level removes what a cancelled create made, the record ends failed); a
// crash mid-provisioning leaves a provisioning record, which Recover ends (recover.go).

// setupTimeout bounds a sandbox's setup by its level.
const setupTimeout = 60 * time.Second

// Create validates spec, makes a sandbox for the tenant in ctx and returns it ready: claimed from
// a warm pool of its shape when one has a sandbox ready, created cold otherwise. It waits for the
// level (?wait=true, the SDKs' default); a failure is its error.
func (m *Manager) Create(ctx context.Context, spec sandbox.Spec) (api.Sandbox, error) {
	return m.create(ctx, spec, true)
}

// CreateAsync is Create answering at once: the sandbox ready when a warm pool served it, else
// provisioning while its level makes it in the background. A failure after the answer ends
// the sandbox failed with the reason (a poller, the events and the webhooks see it).
func (m *Manager) CreateAsync(ctx context.Context, spec sandbox.Spec) (api.Sandbox, error) {
	return m.create(ctx, spec, false)
}

func (m *Manager) create(ctx context.Context, spec sandbox.Spec, wait bool) (api.Sandbox, error) {
	start := time.Now()
	spec, from, d, err := m.createSpec(ctx, spec)
	if err != nil {
		return api.Sandbox{}, err
	}
	ten := tenant.From(ctx)
	if from == nil && spec.ID == "" { // a warm sandbox has its own ID
		if p := m.matchPool(spec); p != nil {
			if warm := p.take(); warm != nil {
				return m.createWarm(ctx, p, warm, ten, spec, start)
			}
		}
	}
	return m.createCold(ctx, d, ten, spec, from, start, wait)
}

// createWarm gives b, which a create of spec took from pool p, to tenant ten, within its quota;
// a create past it gives b back.
func (m *Manager) createWarm(ctx context.Context, p *pool, b *box, ten string, spec sandbox.Spec, start time.Time) (api.Sandbox, error) {
	now := time.Now()
	if err := m.reserveClaim(ten, spec); err != nil {
		p.giveBack(b)
		return api.Sandbox{}, err
	}
	view, err := m.claim(ctx, p, b, ten, spec)
	m.endClaim(ten, b, err == nil)
	if err == nil {
		m.log.Info("sandbox claimed", "sandbox", b.id, "tenant", ten, "pool", p.def.Name, "took", time.Since(now))
	}
	m.cfg.Metrics.ObserveCreate(spec.Isolation, metrics.SourcePool, start, err)
	if err == nil && spec.Start {
		m.startAtCreate(ctx, b)
		view = b.view()
	}
	return view, err
}

// createCold makes a sandbox of spec for tenant ten with level d (from snapshot from, when not
// nil), within the tenant's quota: recorded provisioning, then made by its level, before the
// answer when wait is set and in the background otherwise.
func (m *Manager) createCold(ctx context.Context, d driver.Driver, ten string, spec sandbox.Spec, from *store.Snapshot, start time.Time, wait bool) (api.Sandbox, error) {
	now := time.Now().UTC()
	id := spec.ID
	if id == "" {
		id = sandbox.NewID("sbx_")
	}
	b := m.newBox(store.Sandbox{ID: id, Tenant: ten, Spec: spec, Status: api.StatusProvisioning,
		Reason: sandbox.ReasonCreated, CreatedAt: now, UpdatedAt: now})
	if err := m.reserve(ten, spec, b); err != nil {
		return api.Sandbox{}, err
	}
	if err := m.recordNew(ctx, b); err != nil {
		m.cfg.Metrics.ObserveCreate(spec.Isolation, createSource(from), start, err)
		return api.Sandbox{}, setupError(b.id, err)
	}
	setup := func() error {
		sctx, cancel := m.setupContext(ctx)
		defer cancel()
		err := m.build(sctx, d, b, sandbox.ReasonReady, from)
		m.cfg.Metrics.ObserveCreate(spec.Isolation, createSource(from), start, err)
		if err == nil && spec.Start {
			m.startAtCreate(sctx, b)
		}
		return err
	}
	if !wait {
		view := b.view()                       // provisioning, as recorded
		if m.prov.do(func() { _ = setup() }) { // its failure is recorded: the sandbox ends failed
			return view, nil
		}
		// The daemon is stopping: the setup is done (and cut short) here.
	}
	if err := setup(); err != nil {
		return api.Sandbox{}, setupError(b.id, err)
	}
	return b.view(), nil
}

// startAtCreate starts the agent of b, just made by a create with start: true. A start that
// fails (an image without entrypoint or cmd) leaves b ready, and says why in its events: the
// create made the sandbox all the same.
func (m *Manager) startAtCreate(ctx context.Context, b *box) {
	if err := m.startAgent(ctx, b); err != nil {
		m.log.Warn("start the agent at create", "sandbox", b.id, "err", err)
		m.recordEvent(b, b.owner(), api.Event{Type: api.EventAgentExited, Message: "not started: " + err.Error(),
			Data: map[string]any{"error": err.Error()}})
	}
}

// setupError is the error a waiting create of sandbox id answers for err: a client's mistake or
// the host's lack as it is, anything else a setup failure.
func setupError(id string, err error) error {
	if errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, snapshot.ErrCorrupt) ||
		errors.Is(err, errdefs.ErrStoreFull) {
		return err
	}
	return fmt.Errorf("sandbox %s: %w: %w", id, errdefs.ErrSetup, err)
}

// setupContext bounds a create's setup by its own deadline, not the client's connection (a
// create the client gave up on still ends in a recorded state), and by the daemon's stop.
func (m *Manager) setupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	stop := context.AfterFunc(m.prov.ctx, cancel)
	return sctx, func() { stop(); cancel() }
}

// provision records new sandbox b, has level d create it (from snapshot from, when not nil) and
// records it ready for reason; on failure b ends failed and is forgotten.
func (m *Manager) provision(ctx context.Context, d driver.Driver, b *box, reason string, from *store.Snapshot) error {
	if err := m.recordNew(ctx, b); err != nil {
		return err
	}
	return m.build(ctx, d, b, reason, from)
}

// recordNew records new sandbox b, provisioning; when it cannot, b is forgotten.
func (m *Manager) recordNew(ctx context.Context, b *box) error {
	rec := b.record()
	if err := m.store.InsertSandbox(ctx, rec); err != nil {
		m.forget(b, false)
		b.setupDone()
		return fmt.Errorf("record sandbox: %w", err)
	}
	m.recordEvent(b, rec.Tenant, api.Event{Type: api.EventSandboxStatus, Message: "provisioning", Data: map[string]any{"to": api.StatusProvisioning, "level": rec.Spec.Isolation}})
	return nil
}

// build has level d create recorded sandbox b (from snapshot from, when not nil) and records it
// ready for reason, with the host facts a restarted daemon needs; on failure b ends failed (the
// level's error its reason, or daemon_shutdown when the daemon's stop cut it short) and is
// forgotten. Those waiting for b to settle are woken either way.
func (m *Manager) build(ctx context.Context, d driver.Driver, b *box, reason string, from *store.Snapshot) error {
	defer b.setupDone()
	rec := b.record()
	log := m.log.With("sandbox", b.id, "tenant", rec.Tenant, "level", rec.Spec.Isolation)
	tDriver := time.Now()
	var sb driver.Sandbox
	var err error
	if from != nil {
		sb, err = m.restore(ctx, d, b.id, rec.Spec, *from)
	} else {
		sb, err = d.Create(ctx, b.id, rec.Spec)
	}
	tReady := time.Now()
	if err != nil {
		log.Warn("create failed", "err", err)
		why := err.Error()
		if m.prov.ctx.Err() != nil {
			why = sandbox.ReasonDaemonShutdown
		}
		b.failed(ctx, why)
		m.forget(b, true)
		return err
	}
	if err := b.provisioned(ctx, sb, reason); err != nil {
		_ = m.release(b, api.StatusFailed, err.Error()) // release logs what it could not record
		return err
	}
	if hf, ok := sb.(driver.HostFacter); ok {
		// What a restarted daemon needs to adopt the sandbox; without it, it reclaims it.
		if err := m.store.SetHost(ctx, b.id, hf.HostFacts()); err != nil {
			log.Warn("record host facts", "err", err)
		}
	}
	m.watchIfWatcher(b, sb)
	log.Info("sandbox ready", "took", time.Since(rec.CreatedAt), "driver", tReady.Sub(tDriver), "readyRecorded", time.Since(tReady))
	return nil
}

// background is the manager's work that outlives the request that started it (provisioning,
// agents): a stop cancels its context and waits for it.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards stopped and the Adds of wg
	stopped bool
	wg      sync.WaitGroup
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// do runs fn in the background, tracked, and reports whether it did: once stopped it does not.
func (g *background) do(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// stop cancels the work in flight and waits for it to end.
func (g *background) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}
