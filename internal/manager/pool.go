package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// Warm pools (the pool issue): each pool keeps Size sandboxes of one shape ready, made through the
// same path as a create, recorded in the store under the pool's own owner (poolTenant), and
// invisible to every tenant. A create whose spec has the pool's shape takes one (Create → claim):
// the claimant's environment and network policy are attached, the record changes owner in one
// write, and the pool refills in the background. Nothing returns to a pool.

// Pool limits and defaults.
const (
	maxPoolSize        = 256
	defaultRefill      = 10.0 // sandboxes started per second
	defaultPoolMaxAge  = time.Hour
	maxWarmingPerPool  = 2 // creates in flight per pool: the host has few cores
	poolCheckInterval  = time.Second
	maxPoolFailureWait = 30 * time.Second
	// A refill waits until claims have paused for refillQuiet, but no longer than refillMaxDelay
	// after the first claim it replaces: a burst of claims is not slowed down by the creates
	// that replace its first members.
	refillQuiet    = 25 * time.Millisecond
	refillMaxDelay = 250 * time.Millisecond
)

// Pool sources.
const (
	PoolFromConfig = "config"
	PoolFromAPI    = "api"
)

// poolTenant owns a pool's unclaimed sandboxes in the store. No tenant can have this name
// (store.ValidateTenant refuses ':'), so no key sees them.
func poolTenant(name string) string { return "pool:" + name }

func isPoolTenant(t string) bool { return strings.HasPrefix(t, "pool:") }

// pool is one warm pool.
type pool struct {
	def    api.Pool // defaulted and validated
	source string
	shape  string
	m      *Manager

	mu       sync.Mutex
	ready    []*box // oldest first
	warming  int
	closed   bool
	claims   int64
	misses   int64
	recycled int64
	failures int64
	failRun  int // failures in a row, for the backoff
	lastErr  string
	// lastTake and firstTake are the latest claim and the first since the pool was last full.
	lastTake, firstTake time.Time

	wake chan struct{} // a claim or an end: look at the pool now
	stop chan struct{}
	wg   sync.WaitGroup // the refill loop and creates in flight
}

// shapeOf is what a create must share with a pool to claim from it: the spec without the fields
// attached at claim time, and with only whether it is networked of its network.
func shapeOf(spec sandbox.Spec) string {
	s := spec
	s.Name, s.AgentID, s.Environment, s.Metadata, s.Timeout = "", "", nil, nil, sandbox.Timeout{}
	s.Network = sandbox.Network{EgressPolicy: sandbox.EgressNone}
	if spec.Network.EgressPolicy != sandbox.EgressNone {
		s.Network.EgressPolicy = "networked"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// validatePool defaults p (its level: the daemon's default) and says what is wrong with it,
// naming the field.
func (m *Manager) validatePool(p *api.Pool) error {
	if !api.ValidName(p.Name) { // the alphabet of tenants, for the same reason: it names a record owner
		return errdefs.Invalid("name", "a pool name must be 1-64 letters, digits, '.', '_' or '-'")
	}
	if p.Size < 1 || p.Size > maxPoolSize {
		return errdefs.Invalid("size", "must be 1 to %d, not %d", maxPoolSize, p.Size)
	}
	if p.RefillPerSecond == 0 {
		p.RefillPerSecond = defaultRefill
	}
	if p.RefillPerSecond < 0.01 || p.RefillPerSecond > 1000 {
		return errdefs.Invalid("refillPerSecond", "must be 0.01 to 1000, not %g", p.RefillPerSecond)
	}
	if p.MaxAgeSeconds == 0 {
		p.MaxAgeSeconds = int64(defaultPoolMaxAge / time.Second)
	}
	if p.MaxAgeSeconds < 1 {
		return errdefs.Invalid("maxAgeSeconds", "must be positive, not %d", p.MaxAgeSeconds)
	}
	s := &p.Spec
	claimTime := []struct {
		field string
		set   bool
	}{
		{"name", s.Name != ""}, {"agentId", s.AgentID != ""}, {"environment", len(s.Environment) > 0},
		{"metadata", len(s.Metadata) > 0}, {"timeout", s.Timeout != sandbox.Timeout{} && s.Timeout != defaultTimeout()},
		{"network.allowedDomains", len(s.Network.AllowedDomains) > 0}, {"network.credentials", len(s.Network.Credentials) > 0},
	}
	for _, c := range claimTime {
		if c.set {
			return errdefs.Invalid("spec."+c.field, "is attached at claim time: give it to the create that claims the sandbox, not to the pool")
		}
	}
	if s.Isolation == "" {
		s.Isolation = m.cfg.DefaultIsolation
	}
	sandbox.SetDefaults(s)
	if err := sandbox.Validate(s); err != nil {
		var fe *errdefs.FieldError
		if errors.As(err, &fe) {
			return &errdefs.FieldError{Field: "spec." + fe.Field, Message: fe.Message, Kind: fe.Kind}
		}
		return err
	}
	// The claimant's timeouts count; a waiting sandbox ages out by maxAgeSeconds. Left at zero,
	// a pool read back from the API can be sent again as it is.
	s.Timeout = sandbox.Timeout{}
	return nil
}

// defaultTimeout is the timeout a spec gets by default, which a pool read back from the API shows.
func defaultTimeout() sandbox.Timeout {
	var s sandbox.Spec
	sandbox.SetDefaults(&s)
	return s.Timeout
}

// StartPools starts the configuration file's pools and those stored through the API, after
// Recover. A stored pool of a configured pool's name is ignored: the file wins.
func (m *Manager) StartPools(ctx context.Context, configured []api.Pool) error {
	for _, p := range configured {
		if err := m.validatePool(&p); err != nil {
			return fmt.Errorf("pool %q of the configuration: %w", p.Name, err)
		}
		if err := m.startPool(p, PoolFromConfig); err != nil {
			return err
		}
	}
	stored, err := m.store.Pools(ctx)
	if err != nil {
		return err
	}
	for _, p := range stored {
		m.poolMu.Lock()
		_, dup := m.pools[p.Name]
		m.poolMu.Unlock()
		if dup {
			m.log.Warn("a pool stored through the API has the name of a configured one; the configuration's is used", "pool", p.Name)
			continue
		}
		if err := m.validatePool(&p); err != nil {
			m.log.Error("stored pool no longer valid; not started", "pool", p.Name, "err", err)
			continue
		}
		if err := m.startPool(p, PoolFromAPI); err != nil {
			return err
		}
	}
	return nil
}

// poolLevel is the level a pool's sandboxes are made by, or why this host has none.
func (m *Manager) poolLevel(def api.Pool) (driver.Driver, error) {
	d, err := m.drivers.Lookup(def.Spec.Isolation)
	if err != nil {
		return nil, &errdefs.FieldError{Field: "spec.isolation", Message: err.Error(), Kind: errdefs.ErrUnavailable}
	}
	return d, nil
}

func (m *Manager) startPool(def api.Pool, source string) error {
	d, err := m.poolLevel(def)
	if err != nil {
		return err
	}
	p := &pool{def: def, source: source, shape: shapeOf(def.Spec), m: m, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	m.poolMu.Lock()
	if _, ok := m.pools[def.Name]; ok {
		m.poolMu.Unlock()
		return fmt.Errorf("pool %q exists: %w", def.Name, errdefs.ErrConflict)
	}
	for _, o := range m.pools {
		if o.shape == p.shape {
			m.poolMu.Unlock()
			return fmt.Errorf("pool %q has the same shape (spec), so a create could not tell them apart; change its size instead: %w", o.def.Name, errdefs.ErrConflict)
		}
	}
	m.pools[def.Name] = p
	m.poolMu.Unlock()
	p.wg.Add(1)
	go p.run(d)
	return nil
}

// PutPool makes or replaces a pool through the API and stores it. A pool whose spec stays the
// same keeps its sandboxes and takes the new size, rate and age; a new spec ends the unclaimed
// ones. A pool of the configuration file cannot be changed here.
func (m *Manager) PutPool(ctx context.Context, def api.Pool) (api.PoolStatus, error) {
	if err := m.validatePool(&def); err != nil {
		return api.PoolStatus{}, err
	}
	if _, err := m.poolLevel(def); err != nil { // before anything is stored
		return api.PoolStatus{}, err
	}
	m.poolAPIMu.Lock()
	old := m.lookupPool(def.Name)
	if old != nil && old.source == PoolFromConfig {
		m.poolAPIMu.Unlock()
		return api.PoolStatus{}, fmt.Errorf("pool %q is defined in the daemon's configuration file; change it there: %w", def.Name, errdefs.ErrConflict)
	}
	if err := m.poolRoom(def); err != nil {
		m.poolAPIMu.Unlock()
		return api.PoolStatus{}, err
	}
	if err := m.store.PutPool(ctx, def); err != nil {
		m.poolAPIMu.Unlock()
		return api.PoolStatus{}, err
	}
	if old != nil && old.shape == shapeOf(def.Spec) {
		old.resize(def)
		m.poolAPIMu.Unlock()
		return old.status(), nil
	}
	if old != nil {
		m.poolMu.Lock()
		delete(m.pools, def.Name)
		m.poolMu.Unlock()
	}
	err := m.startPool(def, PoolFromAPI)
	m.poolAPIMu.Unlock()
	if old != nil {
		old.close(sandbox.ReasonPoolRemoved) // its creates in flight may take a while: not under the lock
	}
	if err != nil {
		if old == nil || !errors.Is(err, errdefs.ErrConflict) {
			if err := m.store.DeletePool(context.WithoutCancel(ctx), def.Name); err != nil {
				m.log.Error("remove the record of a pool that did not start", "pool", def.Name, "err", err)
			}
		}
		return api.PoolStatus{}, err
	}
	return m.Pool(def.Name)
}

// poolRoom refuses a pool past the bounds on pools: how many the API made, and how many
// sandboxes all pools keep warm together (pool sandboxes are the operator's: no tenant's quota
// counts them). def replaces the pool of its name, if any. poolAPIMu is held.
func (m *Manager) poolRoom(def api.Pool) error {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	fromAPI, size := 0, def.Size
	for name, p := range m.pools {
		if name == def.Name {
			continue
		}
		if p.source == PoolFromAPI {
			fromAPI++
		}
		size += p.def.Size
	}
	switch {
	case fromAPI+1 > m.cfg.MaxPools:
		return quotaError("maxPools", "the daemon has %d pools made through the API, the most it keeps (limits.maxPools)", fromAPI)
	case size > m.cfg.MaxPoolSandboxes:
		return quotaError("maxPoolSandboxes", "pools would keep %d sandboxes warm; the daemon keeps at most %d (limits.maxPoolSandboxes)", size, m.cfg.MaxPoolSandboxes)
	}
	return nil
}

// DeletePool removes a pool made through the API, ends its unclaimed sandboxes and returns its
// last status.
func (m *Manager) DeletePool(ctx context.Context, name string) (api.PoolStatus, error) {
	m.poolAPIMu.Lock()
	p := m.lookupPool(name)
	if p == nil {
		m.poolAPIMu.Unlock()
		return api.PoolStatus{}, fmt.Errorf("pool %q: %w", name, errdefs.ErrNotFound)
	}
	if p.source == PoolFromConfig {
		m.poolAPIMu.Unlock()
		return api.PoolStatus{}, fmt.Errorf("pool %q is defined in the daemon's configuration file; remove it there: %w", name, errdefs.ErrConflict)
	}
	if err := m.store.DeletePool(ctx, name); err != nil {
		m.poolAPIMu.Unlock()
		return api.PoolStatus{}, err
	}
	m.poolMu.Lock()
	delete(m.pools, name)
	m.poolMu.Unlock()
	m.poolAPIMu.Unlock()
	p.close(sandbox.ReasonPoolRemoved)
	return p.status(), nil
}

// Pool returns one pool with its counters.
func (m *Manager) Pool(name string) (api.PoolStatus, error) {
	p := m.lookupPool(name)
	if p == nil {
		return api.PoolStatus{}, fmt.Errorf("pool %q: %w", name, errdefs.ErrNotFound)
	}
	return p.status(), nil
}

// Pools returns every pool with its counters, by name.
func (m *Manager) Pools() []api.PoolStatus {
	m.poolMu.Lock()
	ps := make([]*pool, 0, len(m.pools))
	for _, p := range m.pools {
		ps = append(ps, p)
	}
	m.poolMu.Unlock()
	slices.SortFunc(ps, func(a, b *pool) int { return strings.Compare(a.def.Name, b.def.Name) })
	out := make([]api.PoolStatus, len(ps))
	for i, p := range ps {
		out[i] = p.status()
	}
	return out
}

func (m *Manager) lookupPool(name string) *pool {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	return m.pools[name]
}

// matchPool returns the pool whose shape spec has, or nil.
func (m *Manager) matchPool(spec sandbox.Spec) *pool {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	if len(m.pools) == 0 {
		return nil
	}
	shape := shapeOf(spec)
	for _, p := range m.pools {
		if p.shape == shape {
			return p
		}
	}
	return nil
}

// closePools stops every pool and ends their unclaimed sandboxes (daemon shutdown).
func (m *Manager) closePools() {
	m.poolMu.Lock()
	ps := make([]*pool, 0, len(m.pools))
	for _, p := range m.pools {
		ps = append(ps, p)
	}
	clear(m.pools)
	m.poolMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.close(sandbox.ReasonDaemonShutdown) })
	}
	wg.Wait()
}

func (p *pool) status() api.PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := api.PoolStatus{Pool: p.def, Source: p.source, Ready: len(p.ready), Warming: p.warming,
		Claims: p.claims, Misses: p.misses, Recycled: p.recycled, Failures: p.failures, LastError: p.lastErr}
	if n := p.claims + p.misses; n > 0 {
		s.HitRate = float64(p.claims) / float64(n)
	}
	return s
}

// resize takes def's size, refill rate and age (its spec is p's) and ends ready sandboxes beyond
// the new size, newest first.
func (p *pool) resize(def api.Pool) {
	p.mu.Lock()
	p.def = def
	var extra []*box
	if n := len(p.ready) - def.Size; n > 0 {
		extra = slices.Clone(p.ready[def.Size:])
		clear(p.ready[def.Size:])
		p.ready = p.ready[:def.Size]
	}
	p.mu.Unlock()
	p.poke()
	for _, b := range extra {
		_ = p.m.release(b, api.StatusTerminated, sandbox.ReasonPoolRemoved) // release logs what it could not record
	}
}

// take hands out the oldest ready sandbox that is still ready, or counts a miss and returns nil.
func (p *pool) take() *box {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.firstTake.IsZero() {
		p.firstTake = now
	}
	p.lastTake = now
	defer p.poke()
	for len(p.ready) > 0 {
		b := p.ready[0]
		p.ready = p.ready[1:]
		if ready, _ := b.waiting(now, 0); ready {
			p.claims++
			return b
		}
		p.recycled++ // ended by itself while it waited
	}
	p.misses++
	return nil
}

// giveBack returns a sandbox whose claim was refused before anything of it changed.
func (p *pool) giveBack(b *box) {
	p.mu.Lock()
	p.claims--
	if !p.closed {
		p.ready = append([]*box{b}, p.ready...)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = p.m.release(b, api.StatusTerminated, sandbox.ReasonPoolRemoved) // release logs what it could not record
}

// poke wakes the refill loop; callers hold p.mu or not, it never blocks.
func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run keeps the pool full at its refill rate and recycles sandboxes that aged out, until close.
// It reads the pool's size, rate and age on every turn: resize changes them.
func (p *pool) run(d driver.Driver) {
	defer p.wg.Done()
	check := time.NewTicker(poolCheckInterval)
	defer check.Stop()
	var next time.Time // the refill rate's next slot
	for {
		p.mu.Lock()
		interval := time.Duration(float64(time.Second) / p.def.RefillPerSecond)
		maxAge := time.Duration(p.def.MaxAgeSeconds) * time.Second
		p.mu.Unlock()
		p.recycle(maxAge)
		p.mu.Lock()
		need := p.def.Size - len(p.ready) - p.warming
		delay := time.Until(next)
		if p.failRun > 0 {
			delay = max(delay, min(time.Duration(1<<min(p.failRun, 10))*100*time.Millisecond, maxPoolFailureWait))
		}
		if need <= 0 {
			p.firstTake = time.Time{}
		} else if !p.firstTake.IsZero() {
			// Let a burst of claims pass first.
			delay = max(delay, min(time.Until(p.lastTake.Add(refillQuiet)), time.Until(p.firstTake.Add(refillMaxDelay))))
		}
		start := need > 0 && p.warming < maxWarmingPerPool
		if start && delay <= 0 {
			p.warming++
		}
		p.mu.Unlock()
		switch {
		case start && delay <= 0:
			next = time.Now().Add(interval)
			p.wg.Add(1)
			go p.warm(d)
			continue
		case start:
			// Look again when the delay has passed (a claim meanwhile may lengthen it).
			select {
			case <-time.After(delay):
			case <-p.wake:
			case <-p.stop:
				return
			}
		default:
			select {
			case <-p.wake:
			case <-check.C:
			case <-p.stop:
				return
			}
		}
	}
}

// recycle ends the ready sandboxes older than maxAge, and forgets those that ended by themselves.
func (p *pool) recycle(maxAge time.Duration) {
	now := time.Now()
	var old []*box
	p.mu.Lock()
	keep := p.ready[:0]
	for _, b := range p.ready {
		alive, aged := b.waiting(now, maxAge)
		switch {
		case !alive:
			p.recycled++
		case aged:
			p.recycled++
			old = append(old, b)
		default:
			keep = append(keep, b)
		}
	}
	clear(p.ready[len(keep):])
	p.ready = keep
	p.mu.Unlock()
	for _, b := range old {
		_ = p.m.release(b, api.StatusTerminated, sandbox.ReasonRecycled) // release logs what it could not record
	}
}

// warm creates one sandbox of the pool's shape and adds it to the ready ones.
func (p *pool) warm(d driver.Driver) {
	defer p.wg.Done()
	m := p.m
	now := time.Now().UTC()
	spec := p.def.Spec
	err := m.cfg.Grants.Resolve(&spec) // the pool's, the operator's: not checked against a tenant
	rec := store.Sandbox{ID: sandbox.NewID("sbx_"), Tenant: poolTenant(p.def.Name), Spec: spec,
		Status: api.StatusProvisioning, Reason: sandbox.ReasonCreated, CreatedAt: now, UpdatedAt: now}
	b := m.newBox(rec)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err == nil {
		err = m.provision(ctx, d, b, sandbox.ReasonWarm, nil)
	}
	p.mu.Lock()
	p.warming--
	p.poke() // its slot is free: the loop need not wait for its next check
	if err != nil {
		p.failures++
		p.failRun++
		p.lastErr = err.Error()
		p.mu.Unlock()
		m.log.Warn("pool sandbox failed", "pool", p.def.Name, "err", err)
		return
	}
	p.failRun = 0
	closed := p.closed
	if !closed {
		p.ready = append(p.ready, b)
	}
	p.mu.Unlock()
	if closed {
		_ = m.release(b, api.StatusTerminated, sandbox.ReasonPoolRemoved) // release logs what it could not record
	}
}

// close stops the refill loop, waits for creates in flight and ends every unclaimed sandbox.
func (p *pool) close(reason string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range ready {
		wg.Go(func() { _ = p.m.release(b, api.StatusTerminated, reason) }) // release logs what it could not record
	}
	wg.Wait()
}

// claim gives pool sandbox b, taken from p, to tenant ten with the create's spec: the level
// attaches environment and network policy first, then the record changes owner. A refused
// attach leaves the sandbox as it was, back in the pool; a failed record ends it.
func (m *Manager) claim(ctx context.Context, p *pool, b *box, ten string, spec sandbox.Spec) (api.Sandbox, error) {
	sb, warmedAt := b.warmed()
	c, ok := sb.(driver.Claimer)
	if !ok {
		p.giveBack(b)
		return api.Sandbox{}, fmt.Errorf("level %s cannot hand out pooled sandboxes: %w", spec.Isolation, errdefs.ErrUnavailable)
	}
	if err := c.Claim(ctx, spec); err != nil {
		p.giveBack(b)
		return api.Sandbox{}, err
	}
	now := time.Now().UTC()
	if err := m.claims.write(store.Claim{ID: b.id, From: b.owner(), To: ten, Spec: spec, At: now}); err != nil {
		_ = m.release(b, api.StatusFailed, "claim not recorded: "+err.Error()) // release logs what it could not record
		return api.Sandbox{}, fmt.Errorf("record claim: %w", err)
	}
	// Out of the pool and not yet in m.boxes, b is only shared with its watcher (manager.watch).
	view := b.handTo(ten, spec, now)
	m.recordEvent(b, ten, api.Event{Type: api.EventSandboxClaimed, Time: now,
		Message: "claimed from warm pool " + p.def.Name, Data: map[string]any{"pool": p.def.Name, "warmedAt": warmedAt}})
	return view, nil
}

// claimWriter records claims with group commit: a claim waits for the transaction in flight, and
// every claim that arrived meanwhile goes into the next one together. Fifty concurrent claims
// then cost a few commits instead of fifty in a row on the store's one writer connection.
type claimWriter struct {
	st    *store.Store
	queue chan claimReq
}

type claimReq struct {
	c    store.Claim
	done chan error
}

func newClaimWriter(st *store.Store) *claimWriter {
	return &claimWriter{st: st, queue: make(chan claimReq, 256)}
}

// write records c and returns when it is committed.
func (w *claimWriter) write(c store.Claim) error {
	r := claimReq{c: c, done: make(chan error, 1)}
	w.queue <- r
	return <-r.done
}

// run commits queued claims in batches until stop; claims still queued then are committed first.
func (w *claimWriter) run(stop <-chan struct{}) {
	for {
		var batch []claimReq
		select {
		case r := <-w.queue:
			batch = append(batch, r)
		case <-stop:
			select {
			case r := <-w.queue:
				batch = append(batch, r)
			default:
				return
			}
		}
	more:
		for len(batch) < cap(w.queue) {
			select {
			case r := <-w.queue:
				batch = append(batch, r)
			default:
				break more
			}
		}
		claims := make([]store.Claim, len(batch))
		for i, r := range batch {
			claims[i] = r.c
		}
		each, err := w.st.ClaimSandboxes(context.Background(), claims)
		for i, r := range batch {
			if err != nil {
				r.done <- fmt.Errorf("record claim: %w", err)
			} else {
				r.done <- each[i]
			}
		}
	}
}
