// Package levels builds the registry of the isolation levels compiled into airlock, from the
// configuration. The one-shot runner, the doctor and the daemon all use it, so they agree on what
// this host offers.
package levels

import (
	"log/slog"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/process"
)

// Registry probes the host and returns every compiled-in level.
func Registry(cfg config.Config, log *slog.Logger) *driver.Registry {
	r := driver.NewRegistry()
	r.Register(process.New(cfg.ProcessDriver(), log.With("level", "process")))
	return r
}
