package levels

import (
	"errors"
	"fmt"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/tenancy"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Config is airlock's whole configuration file: the daemon's own settings (config.Config, whose
// fields sit at the top of the file) and one section per level and service, each its own
// package's type with its own defaults and checks. This is the one place that knows them all;
// package config knows none of them.
type Config struct {
	config.Config
	// Process configures the process isolation level.
	Process process.Settings `json:"process"`
	// HostTemplate configures the host template of the process and container levels.
	HostTemplate process.HostTemplateSettings `json:"hostTemplate"`
	// Container is the container level: OCI runtimes.
	Container container.Settings `json:"container"`
	// Wasm is the wasm level: where its interpreters are installed.
	Wasm wasm.Settings `json:"wasm"`
	// MicroVM is the microvm level: QEMU, the guest kernel, the accelerator.
	MicroVM microvm.Settings `json:"microvm"`
	// Images is the OCI image store under DataDir/images.
	Images image.Settings `json:"images"`
	// Network configures sandboxes' networks.
	Network egress.Settings `json:"network"`
}

// Default returns the configuration airlock runs with when nothing is set: every part's defaults.
func Default() Config {
	return Config{Config: config.Default(), Process: process.DefaultSettings(), Container: container.DefaultSettings(),
		Wasm: wasm.DefaultSettings(), MicroVM: microvm.DefaultSettings(), Images: image.DefaultSettings()}
}

// Load reads the configuration file at path over the defaults. The caller validates, once its
// flags are applied too.
func Load(path string) (Config, error) {
	c := Default()
	err := config.Read(path, &c)
	return c, err
}

// Validate checks the whole configuration once, at start: the daemon's part, each section, and
// what involves two of them.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	for _, s := range []struct {
		key string
		v   interface{ Validate() error }
	}{
		{"process", c.Process}, {"hostTemplate", c.HostTemplate}, {"container", c.Container},
		{"wasm", c.Wasm}, {"microvm", c.MicroVM}, {"images", c.Images}, {"network", c.Network},
	} {
		if err := s.v.Validate(); err != nil {
			// The section's errors begin with the field's path inside it.
			return fmt.Errorf("config: %s.%w", s.key, err)
		}
	}
	if c.Container.CgroupParent == c.Process.CgroupParent {
		return errors.New("config: container.cgroupParent must differ from process.cgroupParent")
	}
	if c.MicroVM.CgroupParent == c.Process.CgroupParent || c.MicroVM.CgroupParent == c.Container.CgroupParent {
		return errors.New("config: microvm.cgroupParent must differ from process.cgroupParent and container.cgroupParent")
	}
	return nil
}

// Grants returns what the operator lends tenants and their quotas, for the manager: the daemon's
// part's (volumes, templates, quotas) with the images and the secrets of the sections.
func (c Config) Grants() *tenancy.Grants {
	g := c.Config.Grants()
	g.Images = tenancy.Images{Allowed: c.Images.Allowed, Registries: c.Images.Registries}
	for n, s := range c.Network.Secrets {
		g.Secrets[n] = tenancy.Secret{Hosts: s.Hosts, Tenants: s.Tenants}
	}
	return g
}

// Instance names the airlock using this data dir among the airlocks of the host
// (uidalloc.InstanceOf): its sandboxes' cgroups are under <cgroupParent>/<instance> of each level,
// its container state under /run/airlock/container/<instance>, and its uid ranges are recorded
// with it. The data dir is locked by its daemon, so no two daemons share an instance; the
// one-shot `airlock run` on a data dir is the same airlock as its daemon.
func (c Config) Instance() string { return uidalloc.InstanceOf(c.DataDir) }

// ContainerStateDir is where the container level of the airlock using dataDir keeps its bundles
// and the runtimes' state (container.StateDirOf).
func ContainerStateDir(dataDir string) string {
	return container.StateDirOf(uidalloc.InstanceOf(dataDir))
}

// processConfig returns the process level's configuration.
func (c Config) processConfig() process.Config {
	return c.Process.Config(c.DataDir, c.Instance(), c.HostTemplate)
}

// containerConfig returns the container level's configuration (without network and images).
func (c Config) containerConfig() container.Config { return c.Container.Config(c.Instance()) }

// microvmConfig returns the microvm level's configuration (without network).
func (c Config) microvmConfig() microvm.Config { return c.MicroVM.Config(c.Instance()) }

// egressConfig returns the network service's configuration.
func (c Config) egressConfig() (egress.Config, error) {
	e, err := c.Network.Config()
	if err != nil {
		return e, fmt.Errorf("config: network.%w", err)
	}
	return e, nil
}
