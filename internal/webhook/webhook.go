package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// Config tunes the dispatcher; the zero value of a field means its default.
type Config struct {
	// AllowPrivateNetworks lets deliveries reach loopback, private, CGNAT and link-local
	// addresses. Cloud metadata addresses are refused regardless.
	AllowPrivateNetworks bool
	// MaxAttempts is how many times a delivery is tried before it fails. Default 8.
	MaxAttempts int
	// Timeout bounds one attempt: connecting, sending, and reading the answer. Default 10 s.
	Timeout time.Duration
	// QueueSize caps the events waiting in memory to be recorded as deliveries; beyond it they
	// are dropped. Default 10000.
	QueueSize int
	// MaxPending caps one webhook's pending deliveries (its backlog while its receiver is down);
	// beyond it new ones are recorded as dropped. Default 1000.
	MaxPending int
	// LogSize is how many finished deliveries each webhook's log keeps. Default 1000.
	LogSize int
	// MaxWebhooksPerTenant caps a tenant's webhooks (ErrQuota beyond). Default 20.
	MaxWebhooksPerTenant int
	// BackoffBase is the wait after a first failed attempt; each further one waits three times
	// longer, up to BackoffMax, ±25% jitter. Defaults 1 s and 10 min (about 16 minutes from the
	// first attempt to the eighth).
	BackoffBase, BackoffMax time.Duration
	// OnDelivery, when set, is called with the outcome of every attempt or drop (the Outcome
	// constants), e.g. to count them in metrics. It must be quick.
	OnDelivery func(outcome string)
}

// Outcomes told to Config.OnDelivery.
const (
	OutcomeDelivered = "delivered" // a 2xx answer
	OutcomeRetried   = "retried"   // an attempt failed; another follows
	OutcomeFailed    = "failed"    // the delivery failed for good
	OutcomeDropped   = "dropped"   // never sent: a queue or backlog was full
)

func (c *Config) setDefaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 10000
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 1000
	}
	if c.LogSize <= 0 {
		c.LogSize = 1000
	}
	if c.MaxWebhooksPerTenant <= 0 {
		c.MaxWebhooksPerTenant = MaxWebhooksPerTenant
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 10 * time.Minute
	}
	c.BackoffMax = max(c.BackoffMax, c.BackoffBase)
}

// hook is a webhook as the dispatcher keeps it in memory. Immutable.
type hook struct {
	id, tenant, url, secret string
	events                  []string
}

// Dispatcher delivers events to webhooks. Its methods are safe for concurrent use.
type Dispatcher struct {
	cfg Config
	st  *store.Store
	log *slog.Logger
	hc  *http.Client

	mu       sync.Mutex         // guards the fields below
	state    int                // stateNew, stateStarted, stateClosed
	byTenant map[string][]*hook // the webhooks, for Publish
	workers  map[string]*worker // by webhook ID
	// pending counts each webhook's deliveries recorded (or about to be) and not final.
	pending map[string]int
	queue   []queued // published, not yet recorded
	// overflow are deliveries the full queue refused, to be recorded as dropped (at most
	// QueueSize); lost counts those beyond, which leave no record.
	overflow []queued
	lost     int

	wake     chan struct{} // the queue has something (capacity 1)
	stop     chan struct{} // closed by Close: the loop records what is queued and returns
	loopDone chan struct{}
	ctx      context.Context // of the workers; cancelled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup // workers
}

const (
	stateNew = iota
	stateStarted
	stateClosed
)

var _ audit.Sink = (*Dispatcher)(nil)

// New returns a dispatcher over st; Start loads the webhooks and starts delivering.
func New(st *store.Store, cfg Config, log *slog.Logger) *Dispatcher {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{cfg: cfg, st: st, log: log, byTenant: map[string][]*hook{}, workers: map[string]*worker{},
		pending: map[string]int{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), loopDone: make(chan struct{}),
		ctx: ctx, cancel: cancel}
	d.hc = d.newHTTPClient()
	return d
}

// Start loads the webhooks and resumes their pending deliveries (those a previous daemon left).
// Start it before anything publishes: events published earlier match no webhook.
func (d *Dispatcher) Start(ctx context.Context) error {
	hooks, err := d.st.Webhooks(ctx, "")
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != stateNew {
		return errors.New("webhooks: dispatcher already started")
	}
	d.state = stateStarted
	d.byTenant = map[string][]*hook{} // the store has every webhook, those created before Start too
	pending := 0
	for _, w := range hooks {
		d.addHook(w)
		d.pending[w.ID] = int(w.Pending)
		pending += int(w.Pending)
	}
	go d.loop()
	d.log.Info("webhooks started", "webhooks", len(hooks), "pending", pending)
	return nil
}

// Close records the deliveries still queued (they are sent after the next Start), stops the
// workers (an attempt in flight is abandoned, and made again after the next Start) and waits
// for them, or for ctx. Close it after whatever publishes has stopped.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	started := d.state == stateStarted
	d.state = stateClosed
	d.mu.Unlock()
	if !started {
		d.cancel()
		d.hc.CloseIdleConnections()
		return nil
	}
	close(d.stop)
	var err error
	select {
	case <-d.loopDone:
	case <-ctx.Done():
		err = fmt.Errorf("webhooks: recording queued deliveries: %w", ctx.Err())
	}
	d.cancel()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("webhooks: stopping the workers: %w", ctx.Err()))
	}
	d.hc.CloseIdleConnections()
	return err
}

// addHook makes w known to Publish and starts its worker. d.mu must be held.
func (d *Dispatcher) addHook(w store.Webhook) {
	h := &hook{id: w.ID, tenant: w.Tenant, url: w.URL, secret: w.Secret, events: w.Events}
	d.byTenant[h.tenant] = append(d.byTenant[h.tenant], h)
	if d.state == stateStarted {
		d.startWorker(h)
	}
}

// removeHook forgets webhook id of tenant and stops its worker. d.mu must be held.
func (d *Dispatcher) removeHook(tenant, id string) {
	hs := d.byTenant[tenant]
	for i, h := range hs {
		if h.id == id {
			// A new slice: Publish may not be iterating the old one (it holds d.mu), but keep
			// the rule simple: published slices are never modified.
			d.byTenant[tenant] = append(append([]*hook(nil), hs[:i]...), hs[i+1:]...)
			break
		}
	}
	if len(d.byTenant[tenant]) == 0 {
		delete(d.byTenant, tenant)
	}
	if w := d.workers[id]; w != nil {
		w.cancel()
		delete(d.workers, id)
	}
	delete(d.pending, id)
}

// Create registers a webhook of tenant and returns it with its secret (generated when req has
// none), the only time the secret is returned.
func (d *Dispatcher) Create(ctx context.Context, tenant string, req api.WebhookRequest) (api.Webhook, error) {
	req, err := d.checkRequest(req)
	if err != nil {
		return api.Webhook{}, err
	}
	if req.Secret == "" {
		var b [32]byte
		rand.Read(b[:])
		req.Secret = hex.EncodeToString(b[:])
	}
	w := store.Webhook{ID: sandbox.NewID("whk_"), Tenant: tenant, URL: req.URL, Events: req.Events, Secret: req.Secret,
		Description: req.Description, CreatedAt: time.Now().UTC()}
	if err := d.st.PutWebhook(ctx, w, d.cfg.MaxWebhooksPerTenant); err != nil {
		if errors.Is(err, errdefs.ErrQuota) {
			return api.Webhook{}, errdefs.New(errdefs.ErrQuota, "a tenant may have at most %d webhooks: delete one first", d.cfg.MaxWebhooksPerTenant)
		}
		return api.Webhook{}, err
	}
	d.mu.Lock()
	if d.state != stateClosed {
		d.addHook(w)
	}
	d.mu.Unlock()
	d.log.Info("webhook created", "tenant", tenant, "webhook", w.ID, "events", w.Events)
	out := apiWebhook(w)
	out.Secret = w.Secret
	return out, nil
}

// List returns tenant's webhooks, oldest first.
func (d *Dispatcher) List(ctx context.Context, tenant string) ([]api.Webhook, error) {
	ws, err := d.st.Webhooks(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]api.Webhook, len(ws))
	for i, w := range ws {
		out[i] = apiWebhook(w)
	}
	return out, nil
}

// Get returns webhook id of tenant; another tenant's is ErrNotFound.
func (d *Dispatcher) Get(ctx context.Context, tenant, id string) (api.Webhook, error) {
	w, err := d.st.Webhook(ctx, tenant, id)
	if err != nil {
		return api.Webhook{}, err
	}
	return apiWebhook(w), nil
}

// Delete removes webhook id of tenant and its log, and returns it as it was. Its pending
// deliveries are not sent; an attempt in flight is abandoned.
func (d *Dispatcher) Delete(ctx context.Context, tenant, id string) (api.Webhook, error) {
	w, err := d.st.Webhook(ctx, tenant, id)
	if err != nil {
		return api.Webhook{}, err
	}
	if err := d.st.DeleteWebhook(ctx, tenant, id); err != nil {
		return api.Webhook{}, err
	}
	d.mu.Lock()
	d.removeHook(tenant, id)
	d.mu.Unlock()
	d.log.Info("webhook deleted", "tenant", tenant, "webhook", id)
	return apiWebhook(w), nil
}

// Deliveries returns the most recent deliveries of webhook id of tenant, newest first: at most
// limit (0: 100; at most LogSize).
func (d *Dispatcher) Deliveries(ctx context.Context, tenant, id string, limit int) ([]api.WebhookDelivery, error) {
	if limit < 0 || limit > 1000 {
		return nil, errdefs.Invalid("limit", "must be between 1 and 1000")
	}
	if limit == 0 {
		limit = 100
	}
	if _, err := d.st.Webhook(ctx, tenant, id); err != nil {
		return nil, err
	}
	dls, err := d.st.WebhookDeliveries(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.WebhookDelivery, len(dls))
	for i, dl := range dls {
		out[i] = apiDelivery(dl)
	}
	return out, nil
}

// Test sends a webhook.test event to webhook id of tenant now, once (no retry), records the
// delivery in its log and returns it: delivered, or failed with the answer or the error.
func (d *Dispatcher) Test(ctx context.Context, tenant, id string) (api.WebhookDelivery, error) {
	w, err := d.st.Webhook(ctx, tenant, id)
	if err != nil {
		return api.WebhookDelivery{}, err
	}
	h := &hook{id: w.ID, tenant: w.Tenant, url: w.URL, secret: w.Secret, events: w.Events}
	now := time.Now().UTC()
	ev := api.Event{ID: sandbox.NewOrderedID("evt_"), Type: api.EventWebhookTest, Time: now,
		Message: "a test delivery of webhook " + w.ID, Data: map[string]any{"webhookId": w.ID}}
	dl := store.WebhookDelivery{ID: sandbox.NewID("dlv_"), WebhookID: w.ID, Tenant: tenant, EventID: ev.ID,
		EventType: ev.Type, Status: api.DeliveryPending, CreatedAt: now}
	if dl.Payload, err = json.Marshal(api.WebhookPayload{DeliveryID: dl.ID, WebhookID: w.ID, Event: ev}); err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("webhook %s: encode the test event: %w", w.ID, err)
	}
	r := d.attempt(ctx, h, dl)
	r.retry = false // a test is tried once
	d.settle(&dl, r, time.Now().UTC())
	ctx = context.WithoutCancel(ctx)
	if _, err := d.st.AddWebhookDeliveries(ctx, []store.WebhookDelivery{dl}, d.cfg.LogSize); err != nil {
		return api.WebhookDelivery{}, err
	}
	return apiDelivery(dl), nil
}

// outcome tells Config.OnDelivery.
func (d *Dispatcher) outcome(o string, n int) {
	if d.cfg.OnDelivery != nil {
		for range n {
			d.cfg.OnDelivery(o)
		}
	}
}

func apiWebhook(w store.Webhook) api.Webhook {
	return api.Webhook{ID: w.ID, URL: w.URL, Events: w.Events, Description: w.Description, CreatedAt: w.CreatedAt,
		Delivered: w.Delivered, Failed: w.Failed, Dropped: w.Dropped, Pending: w.Pending}
}

func apiDelivery(dl store.WebhookDelivery) api.WebhookDelivery {
	return api.WebhookDelivery{ID: dl.ID, WebhookID: dl.WebhookID, EventID: dl.EventID, EventType: dl.EventType, Status: dl.Status,
		Attempts: dl.Attempts, ResponseStatus: dl.ResponseStatus, Error: dl.Error, DurationMs: dl.DurationMs, CreatedAt: dl.CreatedAt,
		LastAttemptAt: timePtr(dl.LastAttemptAt), NextAttemptAt: timePtr(dl.NextAttemptAt), DeliveredAt: timePtr(dl.DeliveredAt)}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
