// Package levels composes airlock's configuration file from the daemon's part (package config)
// and the sections the levels, the image store and the network own, and builds from it the
// registry of the isolation levels compiled into airlock. The one-shot runner, the doctor and the
// daemon all use it, so they agree on what this host offers.
package levels

import (
	"log/slog"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
)

// Registry probes the host and returns every compiled-in level, attached to the network service
// (nil: only egress "none" is offered) and to the image store (nil: sandboxes from images are
// refused).
func Registry(cfg Config, network *egress.Service, images *image.Store, log *slog.Logger) *driver.Registry {
	r := driver.NewRegistry()
	p := cfg.processConfig()
	p.Network = network
	if images != nil { // not a typed nil in the interface
		p.Images = images
	}
	proc := process.New(p, log.With("level", "process"))
	r.Register(proc)
	c := cfg.containerConfig()
	c.Network = network
	if images != nil {
		c.Images = images
	}
	r.Register(container.New(c, proc.Runtime(), log.With("level", "container")))
	r.Register(wasm.New(cfg.Wasm.Config(cfg.DataDir), proc, log.With("level", "wasm")))
	m := cfg.microvmConfig()
	m.Network = network
	if images != nil {
		m.Images = images
	}
	r.Register(microvm.New(m, proc.Runtime(), log.With("level", "microvm")))
	return r
}

// Images opens the image store of cfg. When it cannot, it logs why and returns the error (with
// no store, sandboxes from images are refused, and the daemon's image API answers 503 with it).
//
// A daemon's store (forTenants) pulls only from the registries the operator allowed, over
// connections that never reach loopback, private, link-local or metadata addresses (unless
// images.allowPrivateNetworks): what tenants send cannot make it dial into its own network. The
// operator's own commands (airlock run, pull) are not so bound.
func Images(cfg Config, forTenants bool, log *slog.Logger) (*image.Store, error) {
	dir, opts := cfg.Images.Store(cfg.DataDir)
	if forTenants {
		g := cfg.Grants().Images
		opts.AllowRegistry = g.RegistryAllowed
		opts.Guard = &netpolicy.Guard{AllowPrivate: cfg.Images.AllowPrivateNetworks, What: "image pulls", Setting: "images.allowPrivateNetworks"}
	}
	s, err := image.Open(dir, opts, log.With("component", "images"))
	if err != nil {
		log.Warn("image store unavailable", "dir", dir, "err", err)
		return nil, err
	}
	return s, nil
}

// Network returns the network service of cfg (validated already by cfg.Validate).
func Network(cfg Config, log *slog.Logger) (*egress.Service, error) {
	ec, err := cfg.egressConfig()
	if err != nil {
		return nil, err
	}
	return egress.New(ec, log.With("component", "network"))
}
