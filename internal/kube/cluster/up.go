package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
)

// UpOptions is a whole local cluster: a control plane and airlock nodes.
type UpOptions struct {
	Options
	// Airlock is the airlock binary the nodes run.
	Airlock string
	// Nodes is how many airlock nodes to start (airlock-1, airlock-2, ...).
	Nodes int
}

// Up starts the control plane, prepares it for airlock nodes and starts opts.Nodes of them,
// each on its own data dir (so its own instance, cgroups, uids and network names). On error
// everything started is stopped again.
func Up(ctx context.Context, opts UpOptions, log *slog.Logger) (*Cluster, []*Node, error) {
	if opts.Nodes < 1 {
		return nil, nil, fmt.Errorf("a cluster needs at least one node, not %d", opts.Nodes)
	}
	if !filepath.IsAbs(opts.Airlock) {
		return nil, nil, fmt.Errorf("the airlock binary %q: give an absolute path", opts.Airlock)
	}
	c, err := Start(ctx, opts.Options, log)
	if err != nil {
		return nil, nil, err
	}
	if err := c.Prepare(ctx); err != nil {
		c.Stop()
		return nil, nil, err
	}
	nodes := make([]*Node, 0, opts.Nodes)
	for i := range opts.Nodes {
		n, err := c.StartNode(ctx, opts.Airlock, fmt.Sprintf("airlock-%d", i+1))
		if err != nil {
			c.Stop()
			return nil, nil, err
		}
		log.Info("airlock node ready", "node", n.Name, "api", n.API, "dataDir", n.DataDir)
		nodes = append(nodes, n)
	}
	return c, nodes, nil
}
