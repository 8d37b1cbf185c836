// Package node makes an airlock daemon a Kubernetes node, with the virtual-kubelet library
// (docs/kubernetes.md): the Pods scheduled to it that name an airlock runtime class become
// sandboxes of the tenant their namespace is mapped to, their status follows the sandbox, and
// kubectl logs, exec and delete reach it through the node's kubelet API.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	vkerrdefs "github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// statusEvery is how often a node reads its sandboxes' status into their Pods'.
const statusEvery = 500 * time.Millisecond

// Provider is the virtual kubelet's provider: Pods in, sandboxes out.
type Provider struct {
	m       *manager.Manager
	node    string
	hostIP  string
	tenants Tenants
	log     *slog.Logger
	lister  corev1listers.PodLister // the API's view of the node's Pods
	client  kubernetes.Interface    // nil in tests without an apiserver
	events  record.EventRecorder    // the Pods' events; nil in tests without an apiserver

	mu     sync.Mutex // guards pods and notify
	pods   map[string]*podState
	notify func(*corev1.Pod)
}

// podState is one Pod the node holds.
type podState struct {
	pod    *corev1.Pod // as last given (or rebuilt from the sandbox's metadata after a restart)
	tenant string
	id     string    // its sandbox; "" when it never became one
	failed *PodError // why it never became one
	exit   *exitInfo // how its agent ended, once read
	status corev1.PodStatus
	sent   bool // status was handed to the virtual kubelet
}

var _ nodeutil.Provider = (*Provider)(nil)

// Tenants says which tenant owns the sandbox of a Pod, by the Pod's namespace
// (docs/kubernetes.md#who-may-do-what): the operator's choice, never the Pod's.
type Tenants struct {
	// Default owns the sandboxes of Pods of every namespace not in ByNamespace ("": none).
	Default string
	// ByNamespace maps a namespace to its tenant.
	ByNamespace map[string]string
	// Labelled, when set, is the tenant a namespace's label airlock.dev/tenant names
	// (--tenant-label): after ByNamespace, before Default.
	Labelled func(ns string) (string, bool)
}

// Of is the tenant of namespace ns, if it has one.
func (t Tenants) Of(ns string) (string, bool) {
	if ten, ok := t.ByNamespace[ns]; ok {
		return ten, true
	}
	if t.Labelled != nil {
		if ten, ok := t.Labelled(ns); ok {
			return ten, true
		}
	}
	return t.Default, t.Default != ""
}

func key(ns, name string) string { return ns + "/" + name }

// newProvider indexes the sandboxes this node made before a restart (the daemon's recovery
// adopted or ended them already), so that their Pods find them again.
func newProvider(ctx context.Context, m *manager.Manager, node, hostIP string, tenants Tenants, client kubernetes.Interface, lister corev1listers.PodLister, log *slog.Logger) (*Provider, error) {
	p := &Provider{m: m, node: node, hostIP: hostIP, tenants: tenants, log: log, client: client, lister: lister, pods: map[string]*podState{}}
	sbs, err := m.List(ctx, manager.ListOptions{Status: sandbox.LiveStatuses, Metadata: map[string]string{MetaNode: node}})
	if err != nil {
		return nil, fmt.Errorf("list the node's sandboxes: %w", err)
	}
	for _, sb := range sbs {
		ns, name := sb.Metadata[MetaNamespace], sb.Metadata[MetaPod]
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(sb.Metadata[MetaUID])},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "sandbox", Image: sb.Image}}},
		}
		// Its tenant as configured now; none (the host's view) if the mapping changed since.
		ten, _ := tenants.Of(ns)
		if _, err := m.Get(tenant.With(ctx, ten), sb.ID); err != nil {
			ten = ""
		}
		p.pods[key(ns, name)] = &podState{pod: pod, tenant: ten, id: sb.ID}
		log.Info("found the sandbox of a Pod", "pod", key(ns, name), "sandbox", sb.ID, "status", sb.Status)
	}
	return p, nil
}

// CreatePod makes pod's sandbox, ready (and its agent started) before it returns. A Pod that
// cannot be one fails with the reason; CreatePod returns an error only for what a retry may mend.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	if st, ok := p.pods[k]; ok && st.pod.UID == pod.UID {
		st.pod = pod.DeepCopy() // one found after a restart: adopted
		p.mu.Unlock()
		return nil
	}
	st := &podState{pod: pod.DeepCopy()}
	p.pods[k] = st
	p.mu.Unlock()

	ten, ok := p.tenants.Of(pod.Namespace)
	if !ok {
		p.fail(st, podErr("NoTenant", "namespace %s is not mapped to an airlock tenant on node %s (airlock serve --pod-tenant TENANT or --namespace-tenant %s=TENANT)", pod.Namespace, p.node, pod.Namespace))
		return nil
	}
	st.tenant = ten
	spec, err := SpecOf(pod, p.node)
	if err != nil {
		var pe *PodError
		if errors.As(err, &pe) {
			p.fail(st, pe)
			return nil
		}
		return err
	}
	tctx := tenant.With(ctx, ten)
	if of := pod.Annotations[kubeapi.AnnotationForkOf]; of != "" {
		// A fork's network policy is its parent's, credentials included (Manager.Fork's).
		n, err := p.m.ForkNetwork(tctx, of)
		if err != nil {
			p.fail(st, podErr("ForkSourceGone", "the sandbox %s this Pod forks: %v", of, err))
			return nil
		}
		spec.Network = n
	}
	sb, err := p.m.Create(tctx, spec)
	if err != nil {
		p.fail(st, createErr(err))
		return nil
	}
	p.mu.Lock()
	st.id = sb.ID
	p.mu.Unlock()
	p.log.Info("sandbox for a Pod", "pod", k, "sandbox", sb.ID, "tenant", ten)
	if ignored := IgnoredOf(pod); len(ignored) > 0 && p.events != nil {
		p.events.Eventf(pod, corev1.EventTypeNormal, ReasonIgnored, "sandbox %s does without: %s", sb.ID, strings.Join(ignored, "; "))
	}
	// A Pod's container starts with it; a sandbox restored from a snapshot is as the snapshot's
	// was (its agent is started only through the API, as on a host).
	if spec.FromSnapshot == "" && (spec.Agent != nil || spec.Image != "") {
		if _, err := p.m.Start(tctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrConflict) {
			p.log.Warn("start a Pod's agent", "pod", k, "sandbox", sb.ID, "err", err)
		}
	}
	p.refresh(ctx, k)
	p.flush() // Running now, not at the next tick: the front API waits for it
	return nil
}

// ReasonIgnored is the reason of the Pod event that lists what a sandbox does without (IgnoredOf).
const ReasonIgnored = "FieldsIgnored"

// createErr is the Pod failure a refused create makes.
func createErr(err error) *PodError {
	reason := "SandboxCreateFailed"
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		reason = "InvalidSandbox"
	case errors.Is(err, errdefs.ErrQuota):
		reason = "QuotaExceeded"
	case errors.Is(err, errdefs.ErrUnavailable):
		reason = "IsolationUnavailable"
	case errors.Is(err, errdefs.ErrPermissionDenied):
		reason = "Forbidden"
	}
	msg := err.Error()
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok && fe.Field != "" {
		msg = "field " + fe.Field + ": " + msg
	}
	return &PodError{Reason: reason, Message: msg}
}

func (p *Provider) fail(st *podState, perr *PodError) {
	p.mu.Lock()
	st.failed = perr
	st.status = failedStatus(st.pod, perr, p.hostIP)
	st.sent = false
	p.mu.Unlock()
	p.log.Warn("a Pod cannot be a sandbox", "pod", key(st.pod.Namespace, st.pod.Name), "reason", perr.Reason, "message", perr.Message)
	p.flush()
}

// UpdatePod takes the Pod's new metadata; a running sandbox's shape does not change.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[key(pod.Namespace, pod.Name)]; ok {
		st.pod = pod.DeepCopy()
	}
	return nil
}

// DeletePod terminates the Pod's sandbox and reports the Pod terminal; the virtual kubelet then
// removes it from the API.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	st, ok := p.pods[k]
	p.mu.Unlock()
	if !ok {
		return vkerrdefs.NotFoundf("pod %s is not on node %s", k, p.node)
	}
	if st.id != "" {
		if _, err := p.m.Terminate(p.ctxOf(ctx, st), st.id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("terminate sandbox %s of pod %s: %w", st.id, k, err)
		}
		p.refresh(ctx, k)
	}
	p.mu.Lock()
	final := st.pod.DeepCopy()
	final.Status = st.status
	if final.Status.Phase != corev1.PodFailed && final.Status.Phase != corev1.PodSucceeded {
		final.Status.Phase = corev1.PodSucceeded
	}
	delete(p.pods, k)
	notify := p.notify
	p.mu.Unlock()
	if notify != nil {
		notify(final)
	}
	// As a kubelet does once a Pod's containers are stopped: the Pod leaves the API now, not
	// after its grace period (the virtual kubelet would wait for it: a status change alone does
	// not make it look at the Pod again).
	if p.client != nil {
		zero := int64(0)
		err := p.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			p.log.Warn("remove a deleted Pod from the API; it goes after its grace period", "pod", k, "err", err)
		}
	}
	p.log.Info("Pod deleted, its sandbox terminated", "pod", k, "sandbox", st.id)
	return nil
}

// ctxOf is ctx acting as the tenant that owns st's sandbox (the host's, when a restart lost it).
func (p *Provider) ctxOf(ctx context.Context, st *podState) context.Context {
	if st.tenant == "" {
		return ctx
	}
	return tenant.With(ctx, st.tenant)
}

// GetPod returns the Pod with its current status.
func (p *Provider) GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[key(ns, name)]
	if !ok {
		return nil, vkerrdefs.NotFoundf("pod %s/%s is not on node %s", ns, name, p.node)
	}
	pod := st.pod.DeepCopy()
	pod.Status = *st.status.DeepCopy()
	return pod, nil
}

// GetPodStatus returns the Pod's current status.
func (p *Provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every Pod the node holds.
func (p *Provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, st := range p.pods {
		pod := st.pod.DeepCopy()
		pod.Status = *st.status.DeepCopy()
		out = append(out, pod)
	}
	return out, nil
}

// NotifyPods registers the virtual kubelet's callback for status changes.
func (p *Provider) NotifyPods(ctx context.Context, fn func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = fn
	p.mu.Unlock()
	go p.watch(ctx)
}

// watch reads every sandbox's status into its Pod's, and ends the sandboxes whose Pods the API
// says are over (a Pod failed as node_lost while this node was away).
func (p *Provider) watch(ctx context.Context) {
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		keys := make([]string, 0, len(p.pods))
		for k, st := range p.pods {
			if st.id != "" {
				keys = append(keys, k)
			}
		}
		p.mu.Unlock()
		for _, k := range keys {
			p.reclaimIfOver(ctx, k)
			p.refresh(ctx, k)
		}
		p.flush()
	}
}

// reclaimIfOver terminates the live sandbox of a Pod that the API has as Failed or Succeeded.
func (p *Provider) reclaimIfOver(ctx context.Context, k string) {
	p.mu.Lock()
	st, ok := p.pods[k]
	p.mu.Unlock()
	if !ok || p.lister == nil {
		return
	}
	pod, err := p.lister.Pods(st.pod.Namespace).Get(st.pod.Name)
	if err != nil || pod.UID != st.pod.UID {
		return // gone: the virtual kubelet deletes it as dangling; another Pod of the name: not ours
	}
	if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
		return
	}
	sb, err := p.m.Get(p.ctxOf(ctx, st), st.id)
	if err != nil || !sandbox.Live(sb.Status) {
		return
	}
	p.log.Info("the Pod is over in the API: its sandbox is reclaimed", "pod", k, "sandbox", st.id, "phase", pod.Status.Phase, "reason", pod.Status.Reason)
	if _, err := p.m.Terminate(p.ctxOf(ctx, st), st.id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		p.log.Warn("reclaim a sandbox", "sandbox", st.id, "err", err)
	}
}

// refresh recomputes the status of the Pod at k from its sandbox.
func (p *Provider) refresh(ctx context.Context, k string) {
	p.mu.Lock()
	st, ok := p.pods[k]
	p.mu.Unlock()
	if !ok || st.id == "" {
		return
	}
	sb, err := p.m.Get(p.ctxOf(ctx, st), st.id)
	if errors.Is(err, errdefs.ErrNotFound) {
		sb = api.Sandbox{ID: st.id, Status: api.StatusTerminated, Reason: "not_found"}
	} else if err != nil {
		p.log.Warn("read a Pod's sandbox", "pod", k, "sandbox", st.id, "err", err)
		return
	}
	var exit *exitInfo
	if !sandbox.Live(sb.Status) {
		if exit = st.exit; exit == nil {
			exit = p.exitOf(p.ctxOf(ctx, st), st.id)
		}
	}
	status := statusOf(st.pod, sb, exit, p.hostIP)
	p.mu.Lock()
	defer p.mu.Unlock()
	st.exit = exit
	if !statusEqual(st.status, status) {
		st.status, st.sent = status, false
	}
}

// exitOf reads how a sandbox's agent ended from its events: its exit code, and whether the
// memory limit killed it (a limit.memory event).
func (p *Provider) exitOf(ctx context.Context, id string) *exitInfo {
	page, err := p.m.Events(ctx, store.EventFilter{SandboxID: id, Limit: 10000})
	if err != nil {
		return nil
	}
	var ex *exitInfo
	oom := false
	for _, e := range page.Events {
		switch e.Type {
		case api.EventAgentExited:
			code, _ := e.Data["exitCode"].(float64)
			if c, ok := e.Data["exitCode"].(int); ok {
				code = float64(c)
			}
			ex = &exitInfo{code: int(code)}
			if b, _ := e.Data["oomKilled"].(bool); b {
				oom = true
			}
		case sandbox.EventLimitMemory:
			oom = true
		}
	}
	if ex != nil {
		ex.oomKilled = oom && ex.code == 137
	}
	return ex
}

// flush hands the changed statuses to the virtual kubelet.
func (p *Provider) flush() {
	p.mu.Lock()
	notify := p.notify
	var out []*corev1.Pod
	for _, st := range p.pods {
		if st.sent || (st.id == "" && st.failed == nil) {
			continue
		}
		pod := st.pod.DeepCopy()
		pod.Status = *st.status.DeepCopy()
		out = append(out, pod)
		st.sent = notify != nil
	}
	p.mu.Unlock()
	if notify == nil {
		return
	}
	for _, pod := range out {
		notify(pod)
	}
}

// statusEqual compares what a status says, not when it was computed.
func statusEqual(a, b corev1.PodStatus) bool {
	if a.Phase != b.Phase || a.Reason != b.Reason || len(a.ContainerStatuses) != len(b.ContainerStatuses) {
		return false
	}
	for i := range a.ContainerStatuses {
		x, y := a.ContainerStatuses[i], b.ContainerStatuses[i]
		if x.Ready != y.Ready || (x.State.Running == nil) != (y.State.Running == nil) ||
			(x.State.Terminated == nil) != (y.State.Terminated == nil) || (x.State.Waiting == nil) != (y.State.Waiting == nil) {
			return false
		}
		if x.State.Terminated != nil && (x.State.Terminated.ExitCode != y.State.Terminated.ExitCode || x.State.Terminated.Reason != y.State.Terminated.Reason) {
			return false
		}
	}
	return true
}
