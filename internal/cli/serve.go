package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/daemon"
	"github.com/airlockrun/airlock/internal/levels"
)

func serveCmd(e *env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	listen := fs.String("listen", "", "address to listen on (default 127.0.0.1:7070)")
	cert := fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM)")
	key := fs.String("tls-key", "", "the certificate's private key (PEM)")
	insecure := fs.Bool("insecure", false, "allow plain HTTP on a non-loopback address")
	var nf nodeFlags
	nf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "airlock serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := h.load(func(c *levels.Config) {
		if *listen != "" {
			c.Listen = *listen
		}
		if *cert != "" || *key != "" {
			c.TLS = config.TLSConfig{Cert: *cert, Key: *key}
		}
		c.Insecure = c.Insecure || *insecure
	})
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock serve:", err)
		return 2
	}
	if isFront, fo, err := nf.front(cfg.Listen, cfg.TLS.Cert, cfg.TLS.Key); isFront {
		if err != nil {
			fmt.Fprintln(e.stderr, "airlock serve:", err)
			return 2
		}
		return serveFront(e, args, fo)
	}
	nodeOpts, err := nf.options()
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock serve:", err)
		return 2
	}
	if nf.set() && e.kube == nil {
		fmt.Fprintln(e.stderr, "airlock serve:", execKube(args))
		return 1
	}
	if nf.set() {
		if err := e.kube.Check(nodeOpts); err != nil {
			fmt.Fprintln(e.stderr, "airlock serve:", err)
			return 2
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(e.stderr, "airlock serve: needs root (sandboxes are made of namespaces and cgroups); see `airlock doctor`")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := e.log
	if level := os.Getenv("AIRLOCK_LOG"); level == "" || cfg.LogFormat == "json" {
		log = newLoggerAt(e.stderr, cmp.Or(level, "info"), cfg.LogFormat)
	}
	d, err := daemon.Start(ctx, cfg, Version, log)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock serve:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve() }()
	// As a node, the daemon stops being one (its controllers end; the Node and its Pods stay
	// in the cluster, as a kubelet's do) before its sandboxes end.
	var kn Node
	nodeCtx, stopNode := context.WithCancel(context.Background())
	defer stopNode()
	if nf.set() {
		if kn, err = e.kube.Start(nodeCtx, d, nodeOpts, log.With("component", "node")); err != nil {
			kn = Node{}
			stop() // the daemon stops with the error
		}
	}
	select {
	case err = <-done:
	case <-ctx.Done():
	case <-kn.Done: // nil, and never ready, without a node
		err = fmt.Errorf("the Kubernetes node stopped: %w", kn.Err())
		stop()
	}
	if kn.Done != nil {
		stopNode()
		<-kn.Done
	}
	if ctx.Err() != nil {
		log.Info("stopping", "grace", d.Grace())
		err = errors.Join(err, d.Stop(), <-done)
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock serve:", err)
		return 1
	}
	return 0
}
