// Package levels builds the registry of the isolation levels compiled into airlock, from the
// configuration. The one-shot runner, the doctor and the daemon all use it, so they agree on what
// this host offers.
package levels

import (
	"log/slog"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
)

// Registry probes the host and returns every compiled-in level, attached to the network service
// (nil: only egress "none" is offered).
func Registry(cfg config.Config, network *egress.Service, log *slog.Logger) *driver.Registry {
	r := driver.NewRegistry()
	p := cfg.ProcessDriver()
	p.Network = network
	r.Register(process.New(p, log.With("level", "process")))
	return r
}

// Network returns the network service of cfg (validated already by cfg.Validate).
func Network(cfg config.Config, log *slog.Logger) (*egress.Service, error) {
	ec, err := cfg.Egress()
	if err != nil {
		return nil, err
	}
	return egress.New(ec, log.With("component", "network"))
}
