// Package front is the front API of a cluster of airlock nodes (airlock serve --cluster
// kubernetes, docs/kubernetes.md#the-front-api): the host's /api/v1 for many hosts at once.
// A create makes a Pod that the scheduler places on an airlock node; the calls on a sandbox
// go to the node that runs it, over its authenticated kubelet port, acting as the sandbox's
// tenant. Tenants are Namespaces labelled airlock.dev/tenant, their quotas ResourceQuotas,
// their API keys Secrets holding a hash: the front keeps nothing of its own, so that any number
// of replicas can serve.
package front

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
)

// Options say how the front reaches the cluster and where it listens.
type Options struct {
	// Kubeconfig is the front's credential (docs/kubernetes.md says what it must be allowed):
	// for the apiserver, and for the nodes' kubelet ports, whose CA it trusts too.
	Kubeconfig string
	// Listen is the API's address (host:port); TLSCert and TLSKey make it HTTPS.
	Listen          string
	TLSCert, TLSKey string
	// Namespace holds the API keys (Secrets labelled airlock.dev/api-key).
	Namespace string
	// NodeLostGrace is how long a node may miss renewing its lease before its sandboxes are
	// failed with reason node_lost.
	NodeLostGrace time.Duration
}

// DefaultNamespace is where the front reads its keys when Options.Namespace is empty.
const DefaultNamespace = "airlock-system"

// Validate says what is wrong with o before the front starts.
func (o Options) Validate() error {
	switch {
	case o.Kubeconfig == "":
		return errors.New("the front API needs --kubeconfig")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case o.NodeLostGrace < 0:
		return errors.New("--node-lost-grace must not be negative")
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	}
	return nil
}

// Front is a running front API.
type Front struct {
	opts    Options
	log     *slog.Logger
	client  kubernetes.Interface
	nodeRT  http.RoundTripper // to the nodes' kubelet ports
	pods    corev1listers.PodLister
	nodes   corev1listers.NodeLister
	nsL     corev1listers.NamespaceLister
	keys    cache.Indexer // the key Secrets, by hash
	leaseOf func(node string) (time.Time, bool)

	mu       sync.Mutex           // guards lost, lostCtx and inflight
	lost     map[string]time.Time // lost nodes: when they were last seen
	lostCtx  map[string]context.Context
	inflight map[string]context.CancelFunc // ends lostCtx[node] when node is lost
}

const byHash = "hash"

// Start connects to the cluster and waits until the front's view of it is in step; Serve
// then answers requests until ctx ends.
func Start(ctx context.Context, o Options, log *slog.Logger) (*Front, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.NodeLostGrace == 0 {
		o.NodeLostGrace = 40 * time.Second
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rc, client, err := kubeapi.Connect(o.Kubeconfig, "airlock-front", log, func(rc *rest.Config) {
		rc.QPS, rc.Burst = 200, 400 // creates come in bursts; the apiserver's own limits apply
	})
	if err != nil {
		return nil, err
	}
	nodeRT, err := nodeTransport(rc)
	if err != nil {
		return nil, err
	}
	f := &Front{opts: o, log: log, client: client, nodeRT: nodeRT, lost: map[string]time.Time{},
		lostCtx: map[string]context.Context{}, inflight: map[string]context.CancelFunc{}}

	all := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute)
	front := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = kubeapi.LabelFront + "=true" }))
	keys := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = kubeapi.LabelAPIKey + "=true" }))
	leases := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute, informers.WithNamespace(corev1.NamespaceNodeLease))

	f.pods = front.Core().V1().Pods().Lister()
	f.nodes = all.Core().V1().Nodes().Lister()
	f.nsL = all.Core().V1().Namespaces().Lister()
	keyInf := keys.Core().V1().Secrets().Informer()
	if err := keyInf.AddIndexers(cache.Indexers{byHash: func(obj any) ([]string, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return nil, nil
		}
		return []string{strings.ToLower(strings.TrimSpace(string(s.Data[kubeapi.KeyHash])))}, nil
	}}); err != nil {
		return nil, err
	}
	f.keys = keyInf.GetIndexer()
	leaseL := leases.Coordination().V1().Leases().Lister()
	f.leaseOf = func(node string) (time.Time, bool) {
		l, err := leaseL.Leases(corev1.NamespaceNodeLease).Get(node)
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}, false
		}
		return l.Spec.RenewTime.Time, true
	}
	for _, fac := range []informers.SharedInformerFactory{all, front, keys, leases} {
		fac.Start(ctx.Done())
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, fac := range []informers.SharedInformerFactory{all, front, keys, leases} {
		for typ, ok := range fac.WaitForCacheSync(sctx.Done()) {
			if !ok {
				return nil, fmt.Errorf("read %v from the cluster: does the front's identity have the airlock:front role? (docs/kubernetes.md)", typ)
			}
		}
	}
	go f.watchNodes(ctx)
	return f, nil
}

// nodeTransport reaches the nodes' kubelet ports with the front's own credential (client
// certificate or token) and CA, over HTTP/1.1 so that a WebSocket exec passes through.
func nodeTransport(rc *rest.Config) (http.RoundTripper, error) {
	c := rest.CopyConfig(rc)
	c.NextProtos = []string{"http/1.1"}
	c.ServerName = "" // the apiserver's; a node's certificate names the node's address
	tlsc, err := rest.TLSConfigFor(c)
	if err != nil {
		return nil, fmt.Errorf("the front's TLS configuration for the nodes: %w", err)
	}
	base := &http.Transport{
		TLSClientConfig:     tlsc,
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	return rest.HTTPWrappersForConfig(c, base)
}

// Serve answers the API on the front's address until ctx ends.
func (f *Front) Serve(ctx context.Context) error {
	srv := &http.Server{Addr: f.opts.Listen, Handler: f.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(f.log.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", f.opts.Listen)
	if err != nil {
		return fmt.Errorf("front API: %w", err)
	}
	f.log.Info("front API listening", "addr", ln.Addr().String(), "keys", f.opts.Namespace, "nodeLostGrace", f.opts.NodeLostGrace)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // then Serve returns
	}()
	if f.opts.TLSCert != "" {
		err = srv.ServeTLS(ln, f.opts.TLSCert, f.opts.TLSKey)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// tenantNamespace is the namespace of tenant ten's Pods: the one labelled for it.
func (f *Front) tenantNamespace(ten string) (string, error) {
	sel := labels.SelectorFromSet(labels.Set{kubeapi.LabelTenant: ten})
	nss, err := f.nsL.List(sel)
	if err != nil {
		return "", err
	}
	switch len(nss) {
	case 0:
		return "", fmt.Errorf("tenant %q has no namespace labelled %s=%s: the cluster's administrator makes one (docs/kubernetes.md#tenants)", ten, kubeapi.LabelTenant, ten)
	case 1:
		return nss[0].Name, nil
	}
	return "", fmt.Errorf("tenant %q has %d namespaces labelled %s=%s: give it one", ten, len(nss), kubeapi.LabelTenant, ten)
}
