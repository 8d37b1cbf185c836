package cli

import (
	"flag"
	"fmt"

	"github.com/airlockrun/airlock/internal/kube/node"
)

// nodeFlags are airlock serve's flags that make the daemon a Kubernetes node
// (docs/kubernetes.md#a-host-as-a-node).
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

// options are the node's options, checked as far as the flags go.
func (f *nodeFlags) options() (node.Options, error) {
	ns, err := keyValues("namespace-tenant", f.namespaceTenants)
	if err != nil {
		return node.Options{}, err
	}
	if f.kubeconfig == "" && (f.name != "" || f.tenant != "" || len(ns) > 0) {
		return node.Options{}, fmt.Errorf("--node-name, --pod-tenant and --namespace-tenant need --kubeconfig")
	}
	return node.Options{Kubeconfig: f.kubeconfig, Name: f.name, Tenants: node.Tenants{Default: f.tenant, ByNamespace: ns},
		KubeletListen: f.listen, TLSCert: f.cert, TLSKey: f.key, ClientCA: f.client}, nil
}
