package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/internal/daemon"
)

// KubeBinary is the binary, installed beside airlock, whose serve can be a Kubernetes node
// (docs/kubernetes.md). The node is not in airlock itself: airlock is also every sandbox's init
// (cmd/airlock), and the Kubernetes client libraries' package initialisation would add about
// 50 ms and 45 MB to each sandbox's start.
const KubeBinary = "airlock-kube"

// NodeOptions are airlock serve's flags that make the daemon a Kubernetes node
// (docs/kubernetes.md#a-host-as-a-node), as given.
type NodeOptions struct {
	Kubeconfig, Name, Tenant string
	NamespaceTenants         map[string]string
	Listen, Cert, Key        string
	ClientCA                 string
	// TenantLabel: a namespace labelled airlock.dev/tenant=T holds tenant T's Pods.
	TenantLabel bool
}

// FrontOptions are airlock serve --cluster kubernetes's: the front API of a cluster of airlock
// nodes (docs/kubernetes.md#the-front-api).
type FrontOptions struct {
	Kubeconfig, Listen, Cert, Key string
	Namespace                     string
	NodeLostGrace                 time.Duration
}

// Node is a running Kubernetes node: Done is closed once it stopped, Err says why.
type Node struct {
	Done <-chan struct{}
	Err  func() error
}

// KubeNode is how airlock-kube's serve is a Kubernetes node (cmd/airlock-kube gives it): Check
// refuses bad options before the daemon starts, Start makes the started daemon a node until ctx
// ends.
type KubeNode struct {
	Check func(NodeOptions) error
	Start func(ctx context.Context, d *daemon.Daemon, o NodeOptions, log *slog.Logger) (Node, error)
	// Front serves the front API until ctx ends.
	Front func(ctx context.Context, o FrontOptions, log *slog.Logger) error
}

// nodeFlags are the flags of NodeOptions.
type nodeFlags struct {
	kubeconfig, name, tenant  string
	namespaceTenants          listFlag
	listen, cert, key, client string
	tenantLabel               bool
	cluster, frontNamespace   string
	nodeLostGrace             time.Duration
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "join the Kubernetes cluster of this kubeconfig as a node (docs/kubernetes.md)")
	fs.StringVar(&f.name, "node-name", "", "the node's name (with --kubeconfig)")
	fs.StringVar(&f.tenant, "pod-tenant", "", "the tenant whose sandboxes the node's Pods become, bounded by its quota")
	fs.Var(&f.namespaceTenants, "namespace-tenant", "NS=TENANT: Pods of namespace NS become sandboxes of TENANT (repeatable)")
	fs.StringVar(&f.listen, "kubelet-listen", "127.0.0.1:10250", "the node's kubelet API address (IP:port; the IP is the node's InternalIP)")
	fs.StringVar(&f.cert, "kubelet-tls-cert", "", "the kubelet API's serving certificate (PEM; default self-signed)")
	fs.StringVar(&f.key, "kubelet-tls-key", "", "its private key (PEM)")
	fs.StringVar(&f.client, "kubelet-client-ca", "", "the CA that signed the apiserver's kubelet client certificate (PEM)")
	fs.BoolVar(&f.tenantLabel, "tenant-label", false, "a namespace labelled airlock.dev/tenant=T holds tenant T's Pods (the front API's tenants)")
	fs.StringVar(&f.cluster, "cluster", "", "kubernetes: serve the front API of the airlock nodes of --kubeconfig's cluster, no sandboxes here (docs/kubernetes.md)")
	fs.StringVar(&f.frontNamespace, "front-namespace", "airlock-system", "with --cluster: the namespace of the API key Secrets")
	fs.DurationVar(&f.nodeLostGrace, "node-lost-grace", 40*time.Second, "with --cluster: how long a node may miss its lease before its sandboxes fail as node_lost")
}

// front reports whether the daemon is the front API, and its options.
func (f *nodeFlags) front(listen, cert, key string) (bool, FrontOptions, error) {
	switch {
	case f.cluster == "":
		return false, FrontOptions{}, nil
	case f.cluster != "kubernetes":
		return true, FrontOptions{}, fmt.Errorf("--cluster %q: the one cluster engine is kubernetes", f.cluster)
	case f.kubeconfig == "":
		return true, FrontOptions{}, errors.New("--cluster kubernetes needs --kubeconfig: the front's credential")
	case f.name != "" || f.tenant != "" || len(f.namespaceTenants) > 0 || f.tenantLabel:
		return true, FrontOptions{}, errors.New("--cluster is the front API, not a node: --node-name, --pod-tenant, --namespace-tenant and --tenant-label are a node's")
	}
	return true, FrontOptions{Kubeconfig: f.kubeconfig, Listen: listen, Cert: cert, Key: key, Namespace: f.frontNamespace, NodeLostGrace: f.nodeLostGrace}, nil
}

// set reports whether the daemon is to be a node.
func (f *nodeFlags) set() bool { return f.kubeconfig != "" }

// options are the node's options, checked as far as the flags go (the node checks the rest).
func (f *nodeFlags) options() (NodeOptions, error) {
	ns, err := keyValues("namespace-tenant", f.namespaceTenants)
	if err != nil {
		return NodeOptions{}, err
	}
	if f.kubeconfig == "" && (f.name != "" || f.tenant != "" || len(ns) > 0 || f.tenantLabel) {
		return NodeOptions{}, errors.New("--node-name, --pod-tenant, --namespace-tenant and --tenant-label need --kubeconfig")
	}
	return NodeOptions{Kubeconfig: f.kubeconfig, Name: f.name, Tenant: f.tenant, NamespaceTenants: ns,
		Listen: f.listen, Cert: f.cert, Key: f.key, ClientCA: f.client, TenantLabel: f.tenantLabel}, nil
}

// execKube replaces this process with airlock-kube serve ARGS, found beside this binary. It
// returns only with the reason it could not.
func execKube(args []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find %s: %w", KubeBinary, err)
	}
	kube := filepath.Join(filepath.Dir(self), KubeBinary)
	if _, err := os.Stat(kube); err != nil {
		return fmt.Errorf("--kubeconfig: the Kubernetes node is in %s, installed beside airlock (make build builds it): %w", KubeBinary, err)
	}
	return fmt.Errorf("run %s: %w", kube, syscall.Exec(kube, append([]string{kube, "serve"}, args...), os.Environ()))
}

// serveFront is airlock serve --cluster kubernetes: the front API, in airlock-kube (like the
// node: client-go stays out of airlock). It keeps no state and makes no sandbox, so it needs
// no root and no data dir.
func serveFront(e *env, args []string, o FrontOptions) int {
	if e.kube == nil || e.kube.Front == nil {
		fmt.Fprintln(e.stderr, "airlock serve:", execKube(args))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := e.log
	if level := os.Getenv("AIRLOCK_LOG"); level != "" {
		log = newLoggerAt(e.stderr, level, "")
	}
	if err := e.kube.Front(ctx, o, log.With("component", "front")); err != nil {
		fmt.Fprintln(e.stderr, "airlock serve:", err)
		return 1
	}
	return 0
}
