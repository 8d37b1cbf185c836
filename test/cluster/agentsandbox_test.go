package cluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/kube/node"
)

// agent-sandbox's resources (kubernetes-sigs/agent-sandbox, the controller the cluster runs).
var (
	sandboxes        = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	sandboxesAlpha   = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1alpha1", Resource: "sandboxes"}
	sandboxTemplates = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	sandboxWarmPools = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	sandboxClaims    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

var kinds = map[string]string{"sandboxes": "Sandbox", "sandboxtemplates": "SandboxTemplate", "sandboxwarmpools": "SandboxWarmPool", "sandboxclaims": "SandboxClaim"}

// airlockPodTemplate is a Sandbox's (or SandboxTemplate's) podTemplate for an airlock node: the
// airlock-process runtime class, the host template, an agent that waits.
func airlockPodTemplate() map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"test": "agent-sandbox"}},
		"spec": map[string]any{
			"runtimeClassName": "airlock-process",
			"containers": []any{map[string]any{
				"name": "agent", "image": hostImage, "command": []any{"sleep", "infinity"},
				"resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "256Mi"}},
			}},
		},
	}
}

func dyn(t *testing.T) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// createObj creates obj of resource r in the default namespace; the test's end deletes it.
func createObj(t *testing.T, dc dynamic.Interface, r schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(r.GroupVersion().String())
	u.SetKind(kinds[r.Resource])
	out, err := dc.Resource(r).Namespace("default").Create(ctxFor(t, 30*time.Second), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", r.Resource, u.GetName(), err)
	}
	t.Cleanup(func() {
		_ = dc.Resource(r).Namespace("default").Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
	return out
}

// waitObj polls the object until ok says it is as wanted.
func waitObj(t *testing.T, dc dynamic.Interface, r schema.GroupVersionResource, name string, within time.Duration, what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(within)
	var last *unstructured.Unstructured
	for {
		u, err := dc.Resource(r).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = u
			if ok(u) {
				return u
			}
		}
		if time.Now().After(deadline) {
			status := "(none)"
			if last != nil {
				status = fmt.Sprint(last.Object["status"])
			}
			t.Fatalf("%s %s not %s within %s (last error %v); status: %s", r.Resource, name, what, within, err, status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readyCond says whether an agent-sandbox object's Ready condition is True.
func readyCond(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// sandboxOf is the airlock sandbox and node of a running Pod.
func sandboxOf(t *testing.T, p *corev1.Pod) (*cluster.Node, string) {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 || !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, node.ContainerIDPrefix+"sbx_") {
		t.Fatalf("pod %s is not an airlock sandbox: %s", p.Name, podText(p))
	}
	for _, n := range nodes {
		if n.Name == p.Spec.NodeName {
			return n, strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, node.ContainerIDPrefix)
		}
	}
	t.Fatalf("pod %s on %q, not an airlock node", p.Name, p.Spec.NodeName)
	return nil, ""
}

// execOut runs cmd in pod p through pods/exec and returns its stdout, failing on a non-zero exit.
func execOut(t *testing.T, p *corev1.Pod, cmd ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code, err := execIn(ctxFor(t, 60*time.Second), p, cmd, "", false, &stdout, &stderr)
	if err != nil || code != 0 {
		t.Fatalf("exec %v in %s: exit %d, err %v, stderr %q", cmd, p.Name, code, err, stderr.String())
	}
	return stdout.String()
}

// waitPodGone waits until pod name is out of the API, then until nothing of its sandbox id is
// left on node n.
func waitPodGone(t *testing.T, name string, n *cluster.Node, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still in the API 60 s after its owner was deleted (err %v)", name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	waitNoSandbox(t, n, id)
}

// TestAgentSandbox: an agent-sandbox Sandbox whose pod template names the airlock-process
// runtime class becomes Ready on an airlock node, takes an exec through its Pod, reads back at
// v1alpha1 through the controller's conversion webhook (and one made at v1alpha1 runs too), and
// when deleted leaves nothing on the node.
func TestAgentSandbox(t *testing.T) {
	dc := dyn(t)
	createObj(t, dc, sandboxes, map[string]any{
		"metadata": map[string]any{"name": "asb-direct"},
		"spec":     map[string]any{"podTemplate": airlockPodTemplate()},
	})
	start := time.Now()
	sb := waitObj(t, dc, sandboxes, "asb-direct", 90*time.Second, "Ready", readyCond)
	t.Logf("Sandbox Ready in %s", time.Since(start).Round(time.Millisecond))
	nodeName, _, _ := unstructured.NestedString(sb.Object, "status", "nodeName")
	p, err := cs.CoreV1().Pods("default").Get(ctxFor(t, 30*time.Second), "asb-direct", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Sandbox's Pod: %v", err)
	}
	n, id := sandboxOf(t, p)
	if nodeName != n.Name {
		t.Errorf("Sandbox status.nodeName %q, its Pod is on %q", nodeName, n.Name)
	}
	if got := execOut(t, p, "python3", "-c", "print(6*7)"); got != "42\n" {
		t.Errorf("exec python3: %q, want \"42\\n\"", got)
	}
	// The service-account token Kubernetes added is not mounted, and the Pod's event says so.
	if got := execOut(t, p, "sh", "-c", "test -e /var/run/secrets/kubernetes.io && echo token || echo none"); got != "none\n" {
		t.Errorf("the service-account token in the sandbox: %q", got)
	}
	waitEvent(t, "asb-direct", node.ReasonIgnored, "service-account token")

	// The stored v1beta1 object read at v1alpha1: the apiserver asks the controller's webhook.
	alpha, err := dc.Resource(sandboxesAlpha).Namespace("default").Get(ctxFor(t, 30*time.Second), "asb-direct", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the Sandbox at v1alpha1 (conversion webhook): %v", err)
	}
	if replicas, _, _ := unstructured.NestedInt64(alpha.Object, "spec", "replicas"); alpha.GetAPIVersion() != "agents.x-k8s.io/v1alpha1" || replicas != 1 {
		t.Errorf("v1alpha1 view: apiVersion %s, spec.replicas %d; want agents.x-k8s.io/v1alpha1 and 1 (operatingMode Running)", alpha.GetAPIVersion(), replicas)
	}

	// And the other way: a v1alpha1 client's Sandbox (spec.replicas) is stored as v1beta1
	// (spec.operatingMode) and runs as any other.
	createObj(t, dc, sandboxesAlpha, map[string]any{
		"metadata": map[string]any{"name": "asb-alpha"},
		"spec":     map[string]any{"replicas": int64(1), "podTemplate": airlockPodTemplate()},
	})
	beta := waitObj(t, dc, sandboxes, "asb-alpha", 90*time.Second, "Ready", readyCond)
	if mode, _, _ := unstructured.NestedString(beta.Object, "spec", "operatingMode"); mode != "Running" {
		t.Errorf("a v1alpha1 Sandbox with replicas 1 read at v1beta1: operatingMode %q, want Running", mode)
	}
	pa, err := cs.CoreV1().Pods("default").Get(ctxFor(t, 30*time.Second), "asb-alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the v1alpha1 Sandbox's Pod: %v", err)
	}
	na, ida := sandboxOf(t, pa)

	for _, name := range []string{"asb-direct", "asb-alpha"} {
		if err := dc.Resource(sandboxes).Namespace("default").Delete(ctxFor(t, 30*time.Second), name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete the Sandbox %s: %v", name, err)
		}
	}
	start = time.Now()
	waitPodGone(t, "asb-direct", n, id)
	t.Logf("Pod and sandbox gone %s after the Sandbox's delete", time.Since(start).Round(time.Millisecond))
	waitPodGone(t, "asb-alpha", na, ida)
}

// TestAgentSandboxWarmPool: a SandboxWarmPool of an airlock SandboxTemplate keeps two sandboxes
// Ready on airlock nodes; a SandboxClaim binds one of them (no cold start), which takes execs,
// and the pool makes another; deleting the claim, the pool and the template leaves nothing on
// the nodes.
func TestAgentSandboxWarmPool(t *testing.T) {
	dc := dyn(t)
	const replicas = 2
	createObj(t, dc, sandboxTemplates, map[string]any{
		"metadata": map[string]any{"name": "airlock-python"},
		"spec":     map[string]any{"podTemplate": airlockPodTemplate()},
	})
	createObj(t, dc, sandboxWarmPools, map[string]any{
		"metadata": map[string]any{"name": "airlock-pool"},
		"spec":     map[string]any{"replicas": int64(replicas), "sandboxTemplateRef": map[string]any{"name": "airlock-python"}},
	})
	readyReplicas := func(u *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return n == replicas
	}
	waitObj(t, dc, sandboxWarmPools, "airlock-pool", 2*time.Minute, fmt.Sprintf("%d ready", replicas), readyReplicas)
	warm := poolSandboxes(t, dc)
	if len(warm) != replicas {
		t.Fatalf("the pool has %d sandboxes %v, want %d", len(warm), warm, replicas)
	}
	// Every warm sandbox is an airlock sandbox, and the pods all this test made are remembered
	// for the leak check at its end.
	made := map[string]sandboxAt{}
	remember := func(name string) *corev1.Pod {
		p := waitPod(t, "default", name, 90*time.Second, "Running and Ready", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
		})
		n, id := sandboxOf(t, p)
		made[name] = sandboxAt{n, id}
		return p
	}
	for _, name := range warm {
		remember(name)
	}
	// The template's secure defaults (dnsConfig with public resolvers, restartPolicy Always): the
	// sandbox does without them and its Pod's event says so.
	waitEvent(t, warm[0], node.ReasonIgnored, "dnsConfig")

	createObj(t, dc, sandboxClaims, map[string]any{
		"metadata": map[string]any{"name": "claim-1"},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": "airlock-pool"}},
	})
	claim := waitObj(t, dc, sandboxClaims, "claim-1", 90*time.Second, "Ready", readyCond)
	bound, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name")
	if !slices.Contains(warm, bound) {
		t.Fatalf("claim-1 bound sandbox %q, not one of the warm pool's %v (a cold start)", bound, warm)
	}
	p := remember(bound)
	if got := execOut(t, p, "sh", "-c", "echo claimed by $(hostname)"); !strings.HasPrefix(got, "claimed by") {
		t.Errorf("exec in the claimed sandbox: %q", got)
	}
	// The pool refills: two ready again, the claimed one no longer among them.
	waitObj(t, dc, sandboxWarmPools, "airlock-pool", 2*time.Minute, fmt.Sprintf("%d ready again", replicas), readyReplicas)
	refilled := poolSandboxes(t, dc)
	if slices.Contains(refilled, bound) || len(refilled) != replicas {
		t.Errorf("after the claim the pool holds %v; want %d sandboxes without %s", refilled, replicas, bound)
	}
	for _, name := range refilled {
		if _, ok := made[name]; !ok {
			remember(name)
		}
	}

	for _, del := range []struct {
		r    schema.GroupVersionResource
		name string
	}{{sandboxClaims, "claim-1"}, {sandboxWarmPools, "airlock-pool"}, {sandboxTemplates, "airlock-python"}} {
		if err := dc.Resource(del.r).Namespace("default").Delete(ctxFor(t, 30*time.Second), del.name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s %s: %v", del.r.Resource, del.name, err)
		}
	}
	for name, at := range made {
		waitPodGone(t, name, at.node, at.id)
	}
}

// waitEvent waits for an event of reason on pod name whose message has want.
func waitEvent(t *testing.T, name, reason, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + name + ",reason=" + reason})
		if err == nil {
			for _, e := range evs.Items {
				if strings.Contains(e.Message, want) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event on pod %s with %q within 30 s (err %v, events %v)", reason, name, want, err, evs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

type sandboxAt struct {
	node *cluster.Node
	id   string
}

// poolSandboxes names the Sandboxes airlock-pool holds (owned by it, not yet claimed).
func poolSandboxes(t *testing.T, dc dynamic.Interface) []string {
	t.Helper()
	list, err := dc.Resource(sandboxes).Namespace("default").List(ctxFor(t, 30*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		for _, o := range u.GetOwnerReferences() {
			if o.Kind == "SandboxWarmPool" && o.Name == "airlock-pool" && u.GetDeletionTimestamp() == nil {
				out = append(out, u.GetName())
			}
		}
	}
	slices.Sort(out)
	return out
}
