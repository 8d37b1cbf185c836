package cli

import (
	"flag"

	"github.com/airlockrun/airlock/internal/levels"
)

// hostFlags are the flags of the host-side verbs (serve, keys): where the configuration and the
// data live. Flags override the file.
type hostFlags struct {
	configFile, dataDir string
}

func (h *hostFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.configFile, "config", "", "configuration file (JSON; see docs/configuration.md)")
	fs.StringVar(&h.dataDir, "data-dir", "", "state directory (default /var/lib/airlock as root, ~/.local/share/airlock otherwise)")
}

// load returns the configuration: defaults, then the file, then the flags; apply sets more flags
// before validation.
func (h *hostFlags) load(apply func(*levels.Config)) (levels.Config, error) {
	c := levels.Default()
	if h.configFile != "" {
		var err error
		if c, err = levels.Load(h.configFile); err != nil {
			return c, err
		}
	}
	if h.dataDir != "" {
		c.DataDir = h.dataDir
	}
	if apply != nil {
		apply(&c)
	}
	return c, c.Validate()
}
