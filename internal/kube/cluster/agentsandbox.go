package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed" // the controller's ClusterRoles
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// The agent-sandbox controller (kubernetes-sigs/agent-sandbox, pinned by scripts/k8s/build.sh)
// in a local cluster: its CRDs, its ClusterRoles bound to its own identity, and the controller
// with its extensions (SandboxTemplate, SandboxClaim, SandboxWarmPool) and its conversion
// webhook (docs/kubernetes.md#agent-sandbox).
//
// Its CRDs serve two versions whose schemas differ (v1alpha1's spec.replicas is v1beta1's
// spec.operatingMode, among others), stored as v1beta1, and convert between them through the
// controller's webhook: so the webhook is served, not switched off (conversion.strategy None
// would hand a v1alpha1 client a v1beta1 object relabelled, its fields pruned). Upstream reaches
// it through a Service; a local cluster has no kube-proxy, so each CRD's conversion names the
// webhook by url, https://127.0.0.1:PORT/convert, with the cluster's CA as its caBundle, and the
// controller serves a certificate that CA signed for 127.0.0.1 (--manage-webhook-certs=false:
// it neither makes its own CA nor patches the CRDs back to the Service). Its webhook server
// listens on every interface, so the controller runs in a network namespace whose only
// interface is its loopback (netns.go), reached from the host's.

// AgentSandboxController is the controller's binary in BinDir/bin.
const AgentSandboxController = "agent-sandbox-controller"

// AgentSandboxUser is the local cluster's identity of the agent-sandbox controller, bound to the
// ClusterRoles agent-sandbox ships (agentsandbox-rbac.yaml).
const AgentSandboxUser = "airlock:agent-sandbox-controller"

//go:embed agentsandbox-rbac.yaml
var agentSandboxRBAC []byte

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// StartAgentSandbox installs agent-sandbox's CRDs (from BinDir/crds) with their conversion webhook
// on loopback, its ClusterRoles bound to AgentSandboxUser, and starts the controller with its
// extensions; it returns once the CRDs are served and the webhook answers. Stop ends the
// controller with the rest of the cluster.
func (c *Cluster) StartAgentSandbox(ctx context.Context) error {
	bin := filepath.Join(c.opts.BinDir, "bin", AgentSandboxController)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("agent-sandbox: %w (run scripts/k8s/build.sh)", err)
	}
	dir := filepath.Join(c.opts.Dir, "agent-sandbox")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	// The controller runs in a network namespace of its own (netns.go): the webhook listens on
	// every interface of it, one loopback; the host's 127.0.0.1:port leads there, and there
	// 127.0.0.1:APISERVER-PORT leads to the apiserver.
	ns, err := newLoopNetns()
	if err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	c.mu.Lock()
	c.atStop = append(c.atStop, ns.close)
	c.mu.Unlock()
	outer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	port := outer.Addr().(*net.TCPAddr).Port
	inAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	go forward(outer, func() (conn net.Conn, err error) {
		if derr := ns.do(func() { conn, err = net.DialTimeout("tcp", inAddr, 5*time.Second) }); derr != nil {
			return nil, derr
		}
		return conn, err
	})
	apiAddr := strings.TrimPrefix(c.Server, "https://")
	var inner net.Listener
	if derr := ns.do(func() { inner, err = net.Listen("tcp", apiAddr) }); derr != nil || err != nil {
		outer.Close()
		return fmt.Errorf("agent-sandbox: the apiserver's address in its namespace: %w", errors.Join(derr, err))
	}
	go forward(inner, func() (net.Conn, error) { return net.DialTimeout("tcp", apiAddr, 5*time.Second) })
	c.mu.Lock()
	c.atStop = append(c.atStop, func() { outer.Close(); inner.Close() })
	c.mu.Unlock()
	serving, err := c.ca.Issue("agent-sandbox-webhook", nil, "127.0.0.1")
	if err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	if _, _, err := serving.Write(dir, "tls"); err != nil { // tls.crt, tls.key: the controller's defaults
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("agent-sandbox: kubeconfig: %w", err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/convert"
	crds, err := c.installAgentSandboxCRDs(ctx, dc, url)
	if err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	if err := c.bindAgentSandboxRBAC(ctx); err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	kubeconfig, err := c.WriteKubeconfig("agent-sandbox-controller", AgentSandboxUser, nil)
	if err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	// Before the controller: it gives up at start on a kind the apiserver does not serve yet.
	if err := c.waitServed(ctx, dc, crds, time.Minute); err != nil {
		return fmt.Errorf("agent-sandbox: %w", err)
	}
	if derr := ns.do(func() {
		err = c.start(AgentSandboxController, "--kubeconfig="+kubeconfig, "--extensions",
			// One controller: no lease to hold. No metrics or probe listeners.
			"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--webhook-port="+strconv.Itoa(port), "--webhook-cert-dir="+dir, "--manage-webhook-certs=false")
	}); derr != nil || err != nil {
		return errors.Join(derr, err)
	}
	return c.waitWebhook(ctx, port, time.Minute)
}

// installAgentSandboxCRDs creates the CRDs of BinDir/crds, their webhook conversion pointed at
// url with the cluster's CA, and returns their names.
func (c *Cluster) installAgentSandboxCRDs(ctx context.Context, dc dynamic.Interface, url string) ([]string, error) {
	files, _ := filepath.Glob(filepath.Join(c.opts.BinDir, "crds", "*.yaml"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s (run scripts/k8s/build.sh)", filepath.Join(c.opts.BinDir, "crds"))
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&obj.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: a %s, not a CustomResourceDefinition", f, obj.GetKind())
		}
		if s, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy"); s == "Webhook" {
			cc := map[string]any{"url": url, "caBundle": base64.StdEncoding.EncodeToString(c.ca.CertPEM)}
			if err := unstructured.SetNestedMap(obj.Object, cc, "spec", "conversion", "webhook", "clientConfig"); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		if _, err := dc.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	return names, nil
}

// bindAgentSandboxRBAC creates the controller's ClusterRoles and binds them to AgentSandboxUser.
func (c *Cluster) bindAgentSandboxRBAC(ctx context.Context) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(agentSandboxRBAC), 4096)
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("agentsandbox-rbac.yaml: %w", err)
		}
		if role.Name == "" {
			continue // an empty document
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
		}
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: AgentSandboxUser}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
}

// waitServed waits until every CRD of names is Established and the apiserver's discovery lists
// its resource in each version it serves.
func (c *Cluster) waitServed(ctx context.Context, dc dynamic.Interface, names []string, within time.Duration) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	served := func(name string) error {
		obj, err := dc.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !conditionTrue(obj, "Established") {
			return errors.New("not established")
		}
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		for _, v := range versions {
			m, _ := v.(map[string]any)
			if m["served"] != true {
				continue
			}
			gv := group + "/" + fmt.Sprint(m["name"])
			list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
				return fmt.Errorf("%s not in the discovery of %s", plural, gv)
			}
		}
		return nil
	}
	deadline := time.Now().Add(within)
	for _, name := range names {
		for {
			err := served(name)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not served within %s: %w", name, within, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// conditionTrue says whether obj's status has condition typ True.
func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// waitWebhook waits until the controller's webhook answers TLS on 127.0.0.1:port with the
// certificate the cluster's CA signed, as the apiserver will reach it.
func (c *Cluster) waitWebhook(ctx context.Context, port int, within time.Duration) error {
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(within)
	for {
		if name := c.Exited(); name != "" {
			return fmt.Errorf("%s exited at start; its log ends:\n%s", name, tailFile(filepath.Join(c.opts.Dir, "logs", name+".log"), 3000))
		}
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent-sandbox's webhook not serving on %s within %s (last: %w); see %s", addr, within, err,
				filepath.Join(c.opts.Dir, "logs", AgentSandboxController+".log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
