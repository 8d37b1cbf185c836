package driver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Registry maps level names to drivers. The daemon and CLI build one at start with the levels
// compiled in; it is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex // guards drivers
	drivers map[string]Driver
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{drivers: map[string]Driver{}} }

// Register adds d under d.Name(); registering a name twice is a programming error.
func (r *Registry) Register(d Driver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.drivers[d.Name()]; dup {
		panic(fmt.Sprintf("driver %q registered twice", d.Name()))
	}
	r.drivers[d.Name()] = d
}

// Lookup returns the driver for level if it is registered and available on this host. Otherwise
// the error wraps errdefs.ErrUnavailable and says why; a level is never silently replaced.
func (r *Registry) Lookup(level string) (Driver, error) {
	r.mu.RLock()
	d, ok := r.drivers[level]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("isolation level %q is not built into this airlock: %w", level, errdefs.ErrUnavailable)
	}
	if c := d.Capabilities(); !c.Available {
		msg := c.Reason
		if c.Fix != "" {
			msg += " (fix: " + c.Fix + ")"
		}
		return nil, fmt.Errorf("isolation level %q: %s: %w", level, msg, errdefs.ErrUnavailable)
	}
	return d, nil
}

// All returns every registered driver, sorted by name.
func (r *Registry) All() []Driver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Driver, 0, len(r.drivers))
	for _, d := range r.drivers {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Close closes every registered level that is a Closer, and reports what it could not.
func (r *Registry) Close(ctx context.Context) error {
	var errs []error
	for _, d := range r.All() {
		if c, ok := d.(Closer); ok {
			if err := c.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("level %s: %w", d.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Report returns the capabilities of every level of docs/levels.md#isolation-levels in order, built in or not: a level
// this airlock lacks is reported unavailable, saying so. Doctor and the API both show it.
func (r *Registry) Report() []Capabilities {
	out := make([]Capabilities, 0, len(sandbox.Levels))
	for _, l := range sandbox.Levels {
		r.mu.RLock()
		d, ok := r.drivers[l]
		r.mu.RUnlock()
		if !ok {
			out = append(out, Capabilities{Level: l, Reason: "not built into this version of airlock yet"})
			continue
		}
		out = append(out, d.Capabilities())
	}
	return out
}
