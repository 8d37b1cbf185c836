// Package kubeapi names what airlock's Kubernetes integration agrees on with the cluster: the
// runtime classes a Pod names to become an airlock sandbox, the labels and taint of an airlock
// node, the annotations that carry airlock's own fields, and the RuntimeClass objects that tie
// them together (docs/kubernetes.md).
package kubeapi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// TaintKey is the taint of every airlock node (effect NoSchedule): only Pods that tolerate it
	// land there, which the airlock runtime classes add to the Pods that name them.
	TaintKey = "airlock.dev/sandbox"
	// RuntimeLabelPrefix + a runtime class's name labels a node that offers it ("true").
	RuntimeLabelPrefix = "runtime.airlock.dev/"
	// NodeLabel marks an airlock node ("true").
	NodeLabel = "airlock.dev/node"

	// AnnotationNetwork is a Pod's network policy: the JSON of the API's network field
	// (egressPolicy, allowedDomains, blockLocalNetwork, credentials by the operator's secret name).
	AnnotationNetwork = "airlock.dev/network"
	// AnnotationSpec is the rest of a create request's fields as JSON (timeout, filesystem,
	// volumes, template, user, workdir, metadata, resources beyond cpu/memory/disk, name,
	// agentId); the Pod's own fields (image, command, runtime class, limits, env) win.
	AnnotationSpec = "airlock.dev/spec"
	// AnnotationSandbox is the ID a Pod's sandbox is made with (sbx_ and 20 hex digits): the
	// front API chooses it, so that it can answer a create at once; a node makes one otherwise.
	AnnotationSandbox = "airlock.dev/sandbox-id"

	// AnnotationFromSnapshot names the snapshot (snap_...) a Pod's sandbox is restored from:
	// one of its tenant's, on the node the Pod is pinned to (the front API pins it there).
	// AnnotationForkOf names the live sandbox it is a fork of: its network policy, credentials
	// included, is the new one's, as a fork's on a host.
	AnnotationFromSnapshot = "airlock.dev/from-snapshot"
	AnnotationForkOf       = "airlock.dev/fork-of"

	// TemplateImagePrefix + NAME as a container's image names the operator's root filesystem
	// template NAME instead of an OCI image: airlock.dev/template/host is the host template.
	TemplateImagePrefix = "airlock.dev/template/"
)

// RuntimeClass is one airlock runtime class: what it makes of a Pod.
type RuntimeClass struct {
	Name      string
	Isolation string // the sandbox's level
	Runtime   string // the container level's runtime
}

// RuntimeClasses are the runtime classes an airlock node serves, by name.
var RuntimeClasses = []RuntimeClass{
	{Name: "airlock-process", Isolation: "process"},
	{Name: "airlock-gvisor", Isolation: "container", Runtime: "runsc"},
	{Name: "airlock-runc", Isolation: "container", Runtime: "runc"},
	{Name: "airlock-wasm", Isolation: "wasm"},
	{Name: "airlock-microvm", Isolation: "microvm"},
}

// LookupRuntimeClass returns the airlock runtime class name, if it is one.
func LookupRuntimeClass(name string) (RuntimeClass, bool) {
	for _, rc := range RuntimeClasses {
		if rc.Name == name {
			return rc, true
		}
	}
	return RuntimeClass{}, false
}

// Toleration is what a Pod needs to land on an airlock node; the runtime classes add it.
func Toleration() corev1.Toleration {
	return corev1.Toleration{Key: TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// RuntimeClassObject is the RuntimeClass object of rc: its handler is its name, and its
// scheduling sends its Pods to the nodes labelled as offering it, tolerating their taint.
func RuntimeClassObject(rc RuntimeClass) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: rc.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "airlock"}},
		Handler:    rc.Name,
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{RuntimeLabelPrefix + rc.Name: "true"},
			Tolerations:  []corev1.Toleration{Toleration()},
		},
	}
}

// EnsureRuntimeClasses creates the RuntimeClass objects that do not exist yet. Those that do are
// left alone: the cluster's administrator may have changed them.
func EnsureRuntimeClasses(ctx context.Context, c kubernetes.Interface) error {
	for _, rc := range RuntimeClasses {
		_, err := c.NodeV1().RuntimeClasses().Create(ctx, RuntimeClassObject(rc), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("runtime class %s: %w", rc.Name, err)
		}
	}
	return nil
}

// NodeRole names the ClusterRole an airlock node's identity needs (docs/kubernetes.md#rbac),
// and NodeGroup the group a local cluster's node certificates carry, bound to it.
const (
	NodeRole  = "airlock:node"
	NodeGroup = "airlock:nodes"
)

// NodeClusterRole is what an airlock node does with the apiserver: keep its Node, its lease and
// its Pods' status; read the Pods bound to it and what they reference (the virtual kubelet's
// informers resolve env from Secrets, ConfigMaps and Services); record events; create the airlock
// RuntimeClasses; and ask the apiserver who a client of its kubelet API is and whether it may
// (TokenReview, SubjectAccessReview), as a kubelet does.
func NodeClusterRole() *rbacv1.ClusterRole {
	r := rule
	core, read := []string{""}, []string{"get", "list", "watch"}
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: NodeRole, Labels: map[string]string{"app.kubernetes.io/managed-by": "airlock"}},
		Rules: []rbacv1.PolicyRule{
			r(core, []string{"nodes"}, []string{"get", "list", "watch", "create", "update", "patch"}),
			r(core, []string{"nodes/status"}, []string{"update", "patch"}),
			r([]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "list", "watch", "create", "update", "patch"}),
			r(core, []string{"pods"}, []string{"get", "list", "watch", "delete"}),
			r(core, []string{"pods/status"}, []string{"update", "patch"}),
			r(core, []string{"secrets", "configmaps", "services"}, read),
			r(core, []string{"namespaces"}, read), // their tenant label (--tenant-label)
			r(core, []string{"events"}, []string{"create", "update", "patch"}),
			r([]string{"events.k8s.io"}, []string{"events"}, []string{"create", "update", "patch"}),
			r([]string{"node.k8s.io"}, []string{"runtimeclasses"}, []string{"get", "list", "watch", "create"}),
			r([]string{"authentication.k8s.io"}, []string{"tokenreviews"}, []string{"create"}),
			r([]string{"authorization.k8s.io"}, []string{"subjectaccessreviews"}, []string{"create"}),
		},
	}
}

// EnsureNodeRBAC creates NodeClusterRole and binds it to group (a local cluster's nodes). An
// existing role or binding is left alone.
func EnsureNodeRBAC(ctx context.Context, c kubernetes.Interface, group string) error {
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, NodeClusterRole(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster role %s: %w", NodeRole, err)
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: NodeRole, Labels: map[string]string{"app.kubernetes.io/managed-by": "airlock"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: NodeRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: "rbac.authorization.k8s.io", Name: group}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster role binding %s: %w", NodeRole, err)
	}
	return nil
}
