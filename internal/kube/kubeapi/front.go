package kubeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// What the front API (airlock serve --cluster kubernetes, docs/kubernetes.md#the-front-api)
// agrees on with the cluster and the nodes.
const (
	// LabelTenant on a Namespace makes it tenant VALUE's: the front puts the tenant's sandbox
	// Pods there, and a node started with --tenant-label makes its Pods' sandboxes that
	// tenant's. On a Secret of the front's namespace labelled LabelAPIKey it names the key's
	// tenant. Labelling namespaces is the cluster administrator's: nothing in a Pod chooses it.
	LabelTenant = "airlock.dev/tenant"
	// LabelAPIKey ("true") marks a Secret of the front's namespace as an API key: data
	// KeyTenant (the tenant) and KeyHash (the hex SHA-256 of the key; the key itself is never
	// stored).
	LabelAPIKey = "airlock.dev/api-key"
	KeyTenant   = "tenant"
	KeyHash     = "sha256"
	// LabelFront ("true") marks the Pods the front made.
	LabelFront = "airlock.dev/front"

	// FrontPrefix + a host's API path is that path on a node's kubelet port, for the front:
	// authenticated and authorized there as any kubelet API call (nodes/proxy), acting as the
	// tenant HeaderTenant names.
	FrontPrefix  = "/airlock"
	HeaderTenant = "Airlock-Tenant"
	// HeaderFrontScheme is the scheme (http or https) the front's client reached it by; the
	// Host header is the front's: a node makes the endpoints of its answers (a sandbox's exec,
	// logs, files and metrics URLs) and its same-origin check with them, as the client sees the
	// front.
	HeaderFrontScheme = "Airlock-Front-Scheme"

	// FrontRole names the ClusterRole of the front's identity; FrontGroup is the group a local
	// cluster's front certificate carries, bound to it.
	FrontRole  = "airlock:front"
	FrontGroup = "airlock:fronts"
)

var sandboxID = regexp.MustCompile(`^sbx_[0-9a-f]{20}$`)

// ValidSandboxID reports whether id is a sandbox ID as airlock makes them.
func ValidSandboxID(id string) bool { return sandboxID.MatchString(id) }

// HashKey is the hex SHA-256 of an API key, as a key Secret stores it.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// Quota is a tenant's bound in the cluster, a ResourceQuota of its namespace (the apiserver
// enforces it at each create, across every front replica).
type Quota struct {
	MaxSandboxes int
	MaxMemoryMB  int64 // total of the sandboxes' memory limits; 0: none
}

// TenantObjects are the Namespace ns of tenant and its ResourceQuota.
func TenantObjects(ns, tenant string, q Quota) (*corev1.Namespace, *corev1.ResourceQuota) {
	hard := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(q.MaxSandboxes), resource.DecimalSI)}
	if q.MaxMemoryMB > 0 {
		hard[corev1.ResourceLimitsMemory] = *resource.NewQuantity(q.MaxMemoryMB<<20, resource.BinarySI)
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{LabelTenant: tenant}}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "airlock", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
}

// APIKeySecret is the Secret name in the front's namespace ns that makes key an API key of
// tenant: only its hash is stored.
func APIKeySecret(ns, name, tenant, key string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelAPIKey: "true"}},
		StringData: map[string]string{KeyTenant: tenant, KeyHash: HashKey(key)},
	}
}

// FrontClusterRole is what the front does in the cluster: make and delete the tenants' sandbox
// Pods, mark those of a lost node failed (pods/status), read Nodes and their leases, the
// tenants' Namespaces, and reach the nodes' API (nodes/proxy). Its keys are read by a Role of
// its own namespace (EnsureFrontRBAC), not cluster-wide.
func FrontClusterRole() *rbacv1.ClusterRole {
	r := rule
	core, read := []string{""}, []string{"get", "list", "watch"}
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: FrontRole, Labels: map[string]string{"app.kubernetes.io/managed-by": "airlock"}},
		Rules: []rbacv1.PolicyRule{
			r(core, []string{"pods"}, []string{"get", "list", "watch", "create", "delete"}),
			r(core, []string{"pods/status"}, []string{"patch", "update"}),
			r(core, []string{"nodes", "namespaces"}, read),
			r(core, []string{"nodes/proxy"}, []string{"get", "create", "update", "patch", "delete"}),
			r([]string{"coordination.k8s.io"}, []string{"leases"}, read),
		},
	}
}

// EnsureFrontRBAC creates FrontClusterRole bound to group, and a Role of namespace ns (the
// front's, where its key Secrets are) that reads Secrets, bound to group. Existing ones are
// left alone.
func EnsureFrontRBAC(ctx context.Context, c kubernetes.Interface, group, ns string) error {
	managed := map[string]string{"app.kubernetes.io/managed-by": "airlock"}
	subj := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: "rbac.authorization.k8s.io", Name: group}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	steps := []func() error{
		func() error {
			_, err := c.RbacV1().ClusterRoles().Create(ctx, FrontClusterRole(), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: FrontRole, Labels: managed},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: FrontRole}, Subjects: subj}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: FrontRole, Labels: managed},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: FrontRole, Labels: managed},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: FrontRole}, Subjects: subj}, metav1.CreateOptions{})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("front RBAC: %w", err)
		}
	}
	return nil
}

// A sandbox whose node was lost is failed with ReasonNodeLost; its Pod with PodReasonNodeLost.
const (
	ReasonNodeLost    = "node_lost"
	PodReasonNodeLost = "NodeLost"
	// AnnotationRequest is the create request the front made a Pod of (JSON), which it answers
	// from while no node can.
	AnnotationRequest = "airlock.dev/request"
)

// Connect is a client of the cluster of kubeconfig, as userAgent, with client-go's logs in log;
// tune adjusts its configuration first (nil: none).
func Connect(kubeconfig, userAgent string, log *slog.Logger, tune func(*rest.Config)) (*rest.Config, *kubernetes.Clientset, error) {
	// client-go logs through klog: into the daemon's log, at its level.
	klog.SetSlogLogger(log.With("component", "client-go"))
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.UserAgent = userAgent
	if tune != nil {
		tune(rc)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return rc, client, nil
}

// rule is one rule of a role.
func rule(groups, resources, verbs []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}
