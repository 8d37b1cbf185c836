package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

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
}

// nodeFlags are the flags of NodeOptions.
type nodeFlags struct {
	kubeconfig, name, tenant  string
	namespaceTenants          listFlag
	listen, cert, key, client string
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
}

// set reports whether the daemon is to be a node.
func (f *nodeFlags) set() bool { return f.kubeconfig != "" }

// options are the node's options, checked as far as the flags go (the node checks the rest).
func (f *nodeFlags) options() (NodeOptions, error) {
	ns, err := keyValues("namespace-tenant", f.namespaceTenants)
	if err != nil {
		return NodeOptions{}, err
	}
	if f.kubeconfig == "" && (f.name != "" || f.tenant != "" || len(ns) > 0) {
		return NodeOptions{}, errors.New("--node-name, --pod-tenant and --namespace-tenant need --kubeconfig")
	}
	return NodeOptions{Kubeconfig: f.kubeconfig, Name: f.name, Tenant: f.tenant, NamespaceTenants: ns,
		Listen: f.listen, Cert: f.cert, Key: f.key, ClientCA: f.client}, nil
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
