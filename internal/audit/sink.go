package audit

import "github.com/airlockrun/airlock/internal/store"

// Sink receives events once they are in the log, in the log's order, each with its sequence
// number. Publish is called from the log's writer: it must not block (queue and return).
type Sink interface {
	Publish(evs []store.TenantEvent)
}

// SinkFunc is a function that is a Sink.
type SinkFunc func(evs []store.TenantEvent)

// Publish calls f.
func (f SinkFunc) Publish(evs []store.TenantEvent) { f(evs) }
