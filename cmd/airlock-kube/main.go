// Command airlock-kube is airlock with the Kubernetes node in it (docs/kubernetes.md):
// `airlock serve --kubeconfig ...` runs it. It is a binary of its own so that airlock, every
// sandbox's init, does not carry the Kubernetes client libraries (internal/cli/servenode.go).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/airlockrun/airlock/internal/cli"
	"github.com/airlockrun/airlock/internal/daemon"
	"github.com/airlockrun/airlock/internal/entry"
	"github.com/airlockrun/airlock/internal/kube/front"
	"github.com/airlockrun/airlock/internal/kube/node"
)

func main() {
	// The sandboxes of a node's daemon start this binary as their init, as airlock's do.
	entry.Roles()
	os.Exit(cli.MainKube(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cli.KubeNode{Check: checkNode, Start: startNode, Front: serveFront}))
}

func options(o cli.NodeOptions) node.Options {
	return node.Options{Kubeconfig: o.Kubeconfig, Name: o.Name, Tenants: node.Tenants{Default: o.Tenant, ByNamespace: o.NamespaceTenants},
		KubeletListen: o.Listen, TLSCert: o.Cert, TLSKey: o.Key, ClientCA: o.ClientCA, TenantLabel: o.TenantLabel}
}

// checkNode refuses options a node cannot start with, before the daemon starts.
func checkNode(o cli.NodeOptions) error { return options(o).Validate() }

// startNode registers the daemon d as a Kubernetes node.
func startNode(ctx context.Context, d *daemon.Daemon, o cli.NodeOptions, log *slog.Logger) (cli.Node, error) {
	opts := options(o)
	opts.Levels = d.Levels()
	opts.API = d.API() // the front API's route to this node's sandboxes
	n, err := node.Start(ctx, d.Manager(), opts, log)
	if err != nil {
		return cli.Node{}, err
	}
	return cli.Node{Done: n.Done(), Err: n.Err}, nil
}

// serveFront serves the front API of the cluster's airlock nodes (airlock serve --cluster
// kubernetes) until ctx ends.
func serveFront(ctx context.Context, o cli.FrontOptions, log *slog.Logger) error {
	f, err := front.Start(ctx, front.Options{Kubeconfig: o.Kubeconfig, Listen: o.Listen, TLSCert: o.Cert, TLSKey: o.Key,
		Namespace: o.Namespace, NodeLostGrace: o.NodeLostGrace}, log)
	if err != nil {
		return err
	}
	return f.Serve(ctx)
}
