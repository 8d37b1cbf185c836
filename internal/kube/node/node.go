package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/manager"
)

// Options says which Kubernetes node an airlock daemon is and how it reaches the cluster
// (airlock serve --kubeconfig, docs/kubernetes.md#a-host-as-a-node).
type Options struct {
	// Kubeconfig is the node's credential for the apiserver (docs/kubernetes.md says what it
	// must be allowed to do).
	Kubeconfig string
	// Name is the Node's name.
	Name string
	// Tenants own the Pods' sandboxes.
	Tenants Tenants
	// KubeletListen is where the node's kubelet API listens (host:port): the apiserver reaches
	// it there for logs and exec. Its host is the node's InternalIP.
	KubeletListen string
	// TLSCert and TLSKey are the kubelet API's serving certificate; without them it serves a
	// self-signed one, which an apiserver started with --kubelet-certificate-authority refuses.
	TLSCert, TLSKey string
	// ClientCA verifies the clients of the kubelet API (the apiserver's kubelet client
	// certificate); each request is then authorized by the apiserver (SubjectAccessReview on
	// nodes/proxy, nodes/log), as a kubelet's are.
	ClientCA string
	// Levels are the host's levels (driver.Registry.Report): the runtime classes it offers.
	Levels []driver.Capabilities
	// TenantLabel makes a namespace labelled airlock.dev/tenant=T hold tenant T's Pods
	// (--tenant-label; the front API's tenants are such namespaces).
	TenantLabel bool
	// API is the daemon's own API, served to the front API under /airlock on the kubelet port
	// (front.go); nil: not served.
	API http.Handler
}

// Validate says what is wrong with o, as far as it can be told before the node starts: the
// flag that is missing or malformed.
func (o Options) Validate() error {
	switch {
	case o.Kubeconfig == "":
		return errors.New("a node needs --kubeconfig")
	case o.Name == "":
		return errors.New("a node needs --node-name")
	case o.Tenants.Default == "" && len(o.Tenants.ByNamespace) == 0 && !o.TenantLabel:
		return errors.New("a node needs the tenant its Pods' sandboxes belong to: --pod-tenant TENANT (or --namespace-tenant NS=TENANT, or --tenant-label)")
	case o.ClientCA == "":
		return errors.New("a node needs --kubelet-client-ca: the CA of the apiserver's kubelet client certificate")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return errors.New("--kubelet-tls-cert and --kubelet-tls-key go together")
	}
	host, port, err := net.SplitHostPort(o.KubeletListen)
	if err != nil {
		return fmt.Errorf("--kubelet-listen %q: %w", o.KubeletListen, err)
	}
	if net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
		return fmt.Errorf("--kubelet-listen %q: give the IP address the apiserver reaches the node at (it becomes the node's InternalIP)", o.KubeletListen)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("--kubelet-listen %q: a port between 1 and 65535", o.KubeletListen)
	}
	return nil
}

// Node is an airlock daemon registered as a Kubernetes node.
type Node struct {
	vk       *nodeutil.Node
	provider *Provider
	log      *slog.Logger
}

// Start registers the node (or takes its Node object over again after a restart), starts its
// kubelet API and the controllers that keep its lease, its status and its Pods, and returns once
// the node is Ready. The node runs until ctx ends; Wait says how it ended.
func Start(ctx context.Context, m *manager.Manager, o Options, log *slog.Logger) (*Node, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	_, client, err := kubeapi.Connect(o.Kubeconfig, "airlock-node/"+o.Name, log, nil)
	if err != nil {
		return nil, err
	}
	if err := kubeapi.EnsureRuntimeClasses(ctx, client); err != nil {
		// A node without the right to create them works where the administrator did.
		log.Warn("the airlock runtime classes could not be created; the cluster's administrator creates them (docs/kubernetes.md)", "err", err)
	}
	spec, err := nodeObject(ctx, m, o)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(o.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("kubelet client CA: %w", err)
	}
	caContent, err := dynamiccertificates.NewStaticCAContent("airlock-kubelet-client-ca", caPEM)
	if err != nil {
		return nil, fmt.Errorf("kubelet client CA %s: %w", o.ClientCA, err)
	}
	auth, err := nodeutil.WebhookAuth(client, o.Name, func(c *nodeutil.WebhookAuthConfig) error {
		c.AuthnConfig.ClientCertificateCAContentProvider = caContent
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kubelet API authorization: %w", err)
	}
	serving, err := servingCert(o)
	if err != nil {
		return nil, err
	}
	if o.TenantLabel {
		if o.Tenants.Labelled, err = labelledTenants(ctx, client); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	if o.API != nil {
		mux.Handle(kubeapi.FrontPrefix+"/", frontRoute(o.API))
	}
	n := &Node{log: log}
	// The Pods' events, the virtual kubelet's and the provider's (which it makes before its own
	// recorder): one recorder, sent to the apiserver while the node runs.
	eb := record.NewBroadcaster()
	events := eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: path.Join(o.Name, "pod-controller"), Host: o.Name})
	vk, err := nodeutil.NewNode(o.Name, func(pc nodeutil.ProviderConfig) (nodeutil.Provider, vknode.NodeProvider, error) {
		p, err := newProvider(ctx, m, o.Name, hostOf(o.KubeletListen), o.Tenants, client, pc.Pods, log)
		if p != nil {
			p.events = events
		}
		n.provider = p
		return p, nil, err
	},
		nodeutil.WithClient(client),
		nodeutil.AttachProviderRoutes(mux),
		func(c *nodeutil.NodeConfig) error {
			c.NodeSpec = spec
			c.HTTPListenAddr = o.KubeletListen
			c.Handler = nodeutil.WithAuth(auth, mux)
			c.NumWorkers = max(16, 4*runtime.NumCPU()) // each create waits for its sandbox: many at once, as on the API
			c.InformerResyncPeriod = time.Minute
			c.StreamIdleTimeout = 4 * time.Hour // an idle kubectl exec -it session
			c.StreamCreationTimeout = 30 * time.Second
			c.EventRecorder = events
			return nil
		},
		nodeutil.WithTLSConfig(func(c *tls.Config) error {
			c.Certificates = []tls.Certificate{serving}
			c.ClientAuth = tls.RequestClientCert // verified by the authenticator, against ClientCA
			c.MinVersion = tls.VersionTLS12
			return nil
		}),
	)
	if err != nil {
		eb.Shutdown()
		return nil, fmt.Errorf("node %s: %w", o.Name, err)
	}
	n.vk = vk
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(metav1.NamespaceAll)})
	go func() {
		defer eb.Shutdown()
		if err := vk.Run(withLogger(ctx, log)); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("the node stopped", "node", o.Name, "err", err)
		}
	}()
	if err := vk.WaitReady(ctx, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("node %s did not become ready: %w", o.Name, err)
	}
	log.Info("registered as a Kubernetes node", "node", o.Name, "kubeletAPI", o.KubeletListen,
		"runtimeClasses", OfferedRuntimeClasses(o.Levels), "pods", spec.Status.Capacity.Pods().String())
	return n, nil
}

// Done is closed once the node has stopped (its ctx ended, or it failed).
func (n *Node) Done() <-chan struct{} { return n.vk.Done() }

// Err is why the node stopped, after Done.
func (n *Node) Err() error { return n.vk.Err() }

// nodeObject is the Node the daemon registers: its capacity from the host and the tenant's
// quota, labels naming the runtime classes it offers, the airlock taint, its kubelet endpoint.
func nodeObject(ctx context.Context, m *manager.Manager, o Options) (corev1.Node, error) {
	host := hostOf(o.KubeletListen)
	_, portS, _ := net.SplitHostPort(o.KubeletListen)
	port, _ := strconv.Atoi(portS)
	labels := map[string]string{
		"type":                   "virtual-kubelet",
		"kubernetes.io/role":     "agent",
		"kubernetes.io/hostname": o.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     runtime.GOARCH,
		kubeapi.NodeLabel:        "true",
	}
	classes := OfferedRuntimeClasses(o.Levels)
	for _, rc := range classes {
		labels[kubeapi.RuntimeLabelPrefix+rc] = "true"
	}
	capacity, err := capacityOf(ctx, m, o)
	if err != nil {
		return corev1.Node{}, err
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: kubeapi.TaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodePending,
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: host},
				{Type: corev1.NodeHostName, Address: o.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				KubeletVersion:          "airlock",
				ContainerRuntimeVersion: "airlock://" + strings.Join(classes, ","),
			},
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionFalse, "Starting", "airlock is registering the node"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "each sandbox has its own network"),
			},
		},
	}
	return n, nil
}

// OfferedRuntimeClasses are the airlock runtime classes whose level (and runtime) is available
// on a host with levels.
func OfferedRuntimeClasses(levels []driver.Capabilities) []string {
	var out []string
	for _, rc := range kubeapi.RuntimeClasses {
		i := slices.IndexFunc(levels, func(c driver.Capabilities) bool { return c.Level == rc.Isolation })
		if i < 0 || !levels[i].Available {
			continue
		}
		if rc.Runtime != "" && !slices.Contains(levels[i].Features, "runtime:"+rc.Runtime) {
			continue
		}
		out = append(out, rc.Name)
	}
	return out
}

// capacityOf is what the node offers: the host's CPUs and memory, bounded by the tenant's quota
// where it sets one (memory, disk), and as many Pods as the tenant may have sandboxes.
func capacityOf(ctx context.Context, m *manager.Manager, o Options) (corev1.ResourceList, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return nil, fmt.Errorf("host memory: %w", err)
	}
	memMB := int64(si.Totalram) * int64(si.Unit) >> 20
	pods := 0
	var diskMB int64
	names := []string{o.Tenants.Default}
	for _, t := range o.Tenants.ByNamespace {
		names = append(names, t)
	}
	for _, t := range m.Tenants(ctx, slices.DeleteFunc(names, func(s string) bool { return s == "" })) {
		pods += t.Quota.MaxSandboxes
		if q := t.Quota.MaxMemoryMB; q > 0 && q < memMB {
			memMB = q
		}
		if q := t.Quota.MaxDiskMB; q > 0 {
			diskMB = max(diskMB, q)
		}
	}
	if pods == 0 {
		pods = 110 // a kubelet's default
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memMB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	if diskMB > 0 {
		rl[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(diskMB<<20, resource.BinarySI)
	}
	return rl, nil
}

// hostOf is the host of a host:port.
func hostOf(hostport string) string {
	h, _, _ := net.SplitHostPort(hostport)
	return h
}

// servingCert is the kubelet API's certificate: the operator's, or one made for this run,
// self-signed for the node's address.
func servingCert(o Options) (tls.Certificate, error) {
	if o.TLSCert != "" {
		c, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return c, fmt.Errorf("kubelet API certificate: %w", err)
		}
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: o.Name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(hostOf(o.KubeletListen))},
		DNSNames:     []string{o.Name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed kubelet API certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
