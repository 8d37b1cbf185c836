package front

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
)

// lostEvery is how often the front looks for lost nodes.
const lostEvery = time.Second

// watchNodes finds the airlock nodes that stopped renewing their lease for longer than the
// grace, and fails their live sandbox Pods with reason NodeLost (sandbox node_lost), and the
// Pods no node has room for with reason Unschedulable (sandbox unschedulable), which every
// replica of the front and the node, should it come back, read from the Pod: the node then
// ends what it still runs of them. Replicas doing it at once write the same status; the
// apiserver takes the first.
func (f *Front) watchNodes(ctx context.Context) {
	t := time.NewTicker(lostEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.findLost()
		pods, err := f.pods.List(labels.Everything())
		if err != nil {
			continue
		}
		for _, p := range pods {
			switch {
			case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			case unschedulable(p, unschedulableFor):
				// A create answered 202 whose sandbox no node has room for: failed, with the
				// scheduler's reason, rather than provisioning for ever. A waiting create
				// removes its Pod at the same point (waitReady).
				f.markFailed(ctx, p, corev1.PodReasonUnschedulable, fmt.Sprintf("no airlock node has room for the sandbox (the scheduler, for %s: %s)", unschedulableFor, scheduledCondition(p).Message))
			case p.Spec.NodeName != "" && f.isLost(p.Spec.NodeName):
				f.mu.Lock()
				since := f.lost[p.Spec.NodeName]
				f.mu.Unlock()
				f.markFailed(ctx, p, kubeapi.PodReasonNodeLost, fmt.Sprintf("node %s stopped renewing its lease at %s; its sandbox is lost (grace %s)", p.Spec.NodeName, since.UTC().Format(time.RFC3339), f.opts.NodeLostGrace))
			}
		}
	}
}

// findLost updates the set of lost nodes: an airlock node whose lease (or, without one, whose
// Ready heartbeat) is older than the grace, or one that is gone.
func (f *Front) findLost() {
	nodes, err := f.nodes.List(labels.SelectorFromSet(labels.Set{kubeapi.NodeLabel: "true"}))
	if err != nil {
		return
	}
	now := time.Now()
	seen := map[string]bool{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		seen[n.Name] = true
		last, ok := f.leaseOf(n.Name)
		if !ok {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					last = c.LastHeartbeatTime.Time
				}
			}
		}
		_, was := f.lost[n.Name]
		switch lost := now.Sub(last) > f.opts.NodeLostGrace; {
		case lost && !was:
			f.lostLocked(n.Name, last)
			f.log.Warn("node lost: its sandboxes fail as node_lost", "node", n.Name, "lastSeen", last, "grace", f.opts.NodeLostGrace)
		case !lost && was:
			delete(f.lost, n.Name)
			f.log.Info("node back", "node", n.Name)
		}
	}
	for n := range f.lost {
		if !seen[n] {
			delete(f.lost, n) // its Node object is gone: isLost says so without the map
		}
	}
}

// lostLocked holds node lost, last seen at last, and ends the calls in flight to it. f.mu is
// held.
func (f *Front) lostLocked(node string, last time.Time) {
	f.lost[node] = last
	if cancel, ok := f.inflight[node]; ok {
		cancel()
		delete(f.inflight, node)
		delete(f.lostCtx, node)
	}
}

// untilLost is ctx, ended also when node is found lost: a call in flight to a node that stops
// answering (a frozen host keeps its connections open) ends with the node's loss, never hangs.
func (f *Front) untilLost(ctx context.Context, node string) (context.Context, context.CancelFunc) {
	f.mu.Lock()
	lostCtx, ok := f.lostCtx[node]
	if !ok {
		var cancel context.CancelFunc
		lostCtx, cancel = context.WithCancel(context.Background())
		f.lostCtx[node], f.inflight[node] = lostCtx, cancel
	}
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(lostCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// isLost says whether the front holds node lost (or the Node is gone).
func (f *Front) isLost(node string) bool {
	if node == "" {
		return false
	}
	f.mu.Lock()
	_, lost := f.lost[node]
	f.mu.Unlock()
	if lost {
		return true
	}
	_, err := f.nodes.Get(node)
	return apierrors.IsNotFound(err)
}

// lostNodes are the nodes a new sandbox is not placed on.
func (f *Front) lostNodes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.lost))
	for n := range f.lost {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// markFailed fails pod with reason (NodeLost: its node is lost; Unschedulable: no node has room
// for it) and message.
func (f *Front) markFailed(ctx context.Context, p *corev1.Pod, reason, message string) {
	q := p.DeepCopy()
	now := metav1.Now()
	q.Status.Phase = corev1.PodFailed
	q.Status.Reason = reason
	q.Status.Message = message
	for i := range q.Status.Conditions {
		if q.Status.Conditions[i].Type == corev1.PodReady || q.Status.Conditions[i].Type == corev1.ContainersReady {
			q.Status.Conditions[i].Status, q.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	for i := range q.Status.ContainerStatuses {
		cs := &q.Status.ContainerStatuses[i]
		cs.Ready = false
		if cs.State.Terminated == nil {
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reason,
				Message: q.Status.Message, FinishedAt: now, ContainerID: cs.ContainerID}}
		}
	}
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := f.client.CoreV1().Pods(p.Namespace).UpdateStatus(uctx, q, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			f.log.Warn("mark a sandbox's Pod failed", "pod", p.Namespace+"/"+p.Name, "reason", reason, "err", err)
		}
		return
	}
	f.log.Info("sandbox failed", "sandbox", p.Annotations[kubeapi.AnnotationSandbox], "reason", reason, "node", p.Spec.NodeName, "pod", p.Namespace+"/"+p.Name)
}
