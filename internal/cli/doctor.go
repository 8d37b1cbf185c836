package cli

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/airlockrun/airlock/internal/levels"
)

func doctorCmd(e *env, args []string) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, "print the capabilities as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := levels.Default()
	network, err := levels.Network(cfg, e.log)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock doctor:", err)
		return 1
	}
	images, _ := levels.Images(cfg, false, e.log) // why not is logged
	reg := levels.Registry(cfg, network, images, e.log)
	caps := reg.Report()
	netErr := network.Check()
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(caps) // stdout's errors go unchecked, as fmt's prints do
		return 0
	}
	for _, c := range caps {
		state := "available"
		if !c.Available {
			state = "unavailable: " + c.Reason
		}
		fmt.Fprintf(e.stdout, "%-10s %s\n", c.Level, state)
		for _, ch := range c.Checks {
			mark := "ok  "
			switch {
			case !ch.OK && ch.Required:
				mark = "FAIL"
			case !ch.OK:
				mark = "warn"
			}
			fmt.Fprintf(e.stdout, "  [%s] %-16s %s\n", mark, ch.Name, ch.Detail)
		}
		if c.Fix != "" && !c.Available {
			fmt.Fprintf(e.stdout, "  fix: %s\n", c.Fix)
		}
	}
	if netErr != nil {
		fmt.Fprintf(e.stdout, "%-10s unavailable (egress none only): %v\n", "network", netErr)
	} else {
		fmt.Fprintf(e.stdout, "%-10s available: restricted and open egress (pool %s; namespace, veth, nftables, tbf all work)\n", "network", network.Pool())
	}
	return 0
}
