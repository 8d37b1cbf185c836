package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
)

// queued is an event on its way to one webhook.
type queued struct {
	hook *hook
	ev   api.Event
	at   time.Time
}

// flushBatch caps the deliveries recorded in one transaction.
const flushBatch = 1000

// Publish queues a delivery of each event to every webhook of its tenant that selects it, and
// returns at once: it only takes the dispatcher's mutex, never waits for the store or a
// receiver. Deliveries beyond QueueSize are dropped (recorded as such, and counted). It
// implements audit.Sink.
func (d *Dispatcher) Publish(evs []store.TenantEvent) {
	now := time.Now().UTC()
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, e := range evs {
		for _, h := range d.byTenant[e.Tenant] {
			if !matches(h.events, e.Type) {
				continue
			}
			q := queued{hook: h, ev: e.Event, at: now}
			switch {
			case d.state != stateStarted:
				d.lost++
			case len(d.queue) < d.cfg.QueueSize:
				d.queue = append(d.queue, q)
				n++
			case len(d.overflow) < d.cfg.QueueSize:
				d.overflow = append(d.overflow, q)
				n++
			default:
				d.lost++
				n++
			}
		}
	}
	if n > 0 {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// loop records queued deliveries until Close, then records what is left.
func (d *Dispatcher) loop() {
	defer close(d.loopDone)
	for {
		select {
		case <-d.wake:
			d.flush()
		case <-d.stop:
			d.flush()
			return
		}
	}
}

// flush records everything queued, a batch per transaction, and wakes the workers concerned.
func (d *Dispatcher) flush() {
	d.mu.Lock()
	queue, overflow, lost := d.queue, d.overflow, d.lost
	d.queue, d.overflow, d.lost = nil, nil, 0
	d.mu.Unlock()
	if lost > 0 || len(overflow) > 0 {
		d.log.Warn("webhook queue full: deliveries dropped", "dropped", lost+len(overflow), "queueSize", d.cfg.QueueSize)
		d.outcome(OutcomeDropped, lost)
	}
	full := fmt.Sprintf("dropped: the daemon's webhook queue was full (%d deliveries waiting)", d.cfg.QueueSize)
	for len(overflow) > 0 {
		n := min(len(overflow), flushBatch)
		d.record(overflow[:n], full)
		overflow = overflow[n:]
	}
	for len(queue) > 0 {
		n := min(len(queue), flushBatch)
		d.record(queue[:n], "")
		queue = queue[n:]
	}
}

// record writes a batch of deliveries: pending ones, or dropped ones with the reason dropped
// says. A webhook whose backlog is full gets its delivery recorded as dropped too.
func (d *Dispatcher) record(batch []queued, dropped string) {
	rows := make([]store.WebhookDelivery, len(batch))
	reserved := make([]bool, len(batch)) // counted in d.pending: to be given back unless recorded pending
	var drops, fails, backlog int
	for i, q := range batch {
		rows[i] = store.WebhookDelivery{ID: sandbox.NewID("dlv_"), WebhookID: q.hook.id, Tenant: q.hook.tenant, EventID: q.ev.ID,
			EventType: q.ev.Type, Status: api.DeliveryDropped, Error: dropped, Payload: []byte{}, CreatedAt: q.at}
	}
	d.mu.Lock() // Publish waits for it: only the bookkeeping under it
	for i, q := range batch {
		switch n := d.pending[q.hook.id]; {
		case dropped != "":
			drops++
		case n >= d.cfg.MaxPending:
			rows[i].Error = fmt.Sprintf("dropped: the webhook's backlog was full (%d deliveries pending)", n)
			drops++
			backlog++
		default:
			d.pending[q.hook.id]++
			reserved[i] = true
			rows[i].Status, rows[i].NextAttemptAt = api.DeliveryPending, q.at
		}
	}
	d.mu.Unlock()
	if backlog > 0 {
		d.log.Warn("webhook backlog full: deliveries dropped", "dropped", backlog, "maxPending", d.cfg.MaxPending)
	}
	for i := range rows {
		if !reserved[i] {
			continue
		}
		b, err := json.Marshal(api.WebhookPayload{DeliveryID: rows[i].ID, WebhookID: rows[i].WebhookID, Event: batch[i].ev})
		if err != nil { // Data that JSON cannot carry: there is nothing to send
			rows[i].Status, rows[i].Error, rows[i].NextAttemptAt = api.DeliveryFailed, "cannot encode the event: "+err.Error(), time.Time{}
			fails++
			continue
		}
		rows[i].Payload = b
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	added, err := d.st.AddWebhookDeliveries(ctx, rows, d.cfg.LogSize)
	cancel()
	if err != nil {
		d.log.Error("webhook deliveries not recorded: dropped", "deliveries", len(rows), "err", err)
	}
	d.mu.Lock()
	for i, r := range rows {
		if !reserved[i] {
			continue
		}
		if r.Status == api.DeliveryPending && added[i] {
			if w := d.workers[r.WebhookID]; w != nil {
				w.signal()
			}
			continue
		}
		// Final already, or not recorded: the webhook was deleted meanwhile (nothing to tell),
		// or the store failed (dropped).
		d.unreserve(r.WebhookID)
		if err != nil && r.Status == api.DeliveryPending {
			drops++
		}
	}
	d.mu.Unlock()
	d.outcome(OutcomeDropped, drops)
	d.outcome(OutcomeFailed, fails)
}

// unreserve gives back a delivery counted in webhook id's pending ones. d.mu must be held.
func (d *Dispatcher) unreserve(id string) {
	d.pending[id]--
	if d.pending[id] <= 0 && d.workers[id] == nil { // a webhook deleted meanwhile
		delete(d.pending, id)
	}
}
