package node

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlockrun/airlock/api"
)

// ContainerIDPrefix + a sandbox's ID is the container ID of a sandbox Pod's container: how
// kubectl, the front API and anyone reading the Pod find its sandbox.
const ContainerIDPrefix = "airlock://"

// exitInfo is how a sandbox's agent ended, for a terminal Pod status.
type exitInfo struct {
	code      int
	oomKilled bool
}

// podReason maps a sandbox's reason to a Pod's (CamelCase, as Kubernetes writes them).
func podReason(reason string) string {
	switch reason {
	case "":
		return ""
	case "agent_exit":
		return "Error"
	case "node_lost":
		return "NodeLost"
	case "timeout":
		return "DeadlineExceeded"
	}
	parts := strings.Split(reason, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// statusOf is the Pod status that sandbox sb of pod makes: Pending while provisioning, Running
// while it lives (Ready unless paused), Succeeded when its agent exited 0, Failed otherwise.
// exit is how its agent ended, when it has: its exit code, and OOMKilled when the memory limit
// killed it.
func statusOf(pod *corev1.Pod, sb api.Sandbox, exit *exitInfo, hostIP string) corev1.PodStatus {
	created := metav1.NewTime(sb.CreatedAt)
	st := corev1.PodStatus{
		HostIP:    hostIP,
		StartTime: &created,
		QOSClass:  pod.Status.QOSClass, // the apiserver's, immutable
	}
	if hostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: hostIP}}
		// A sandbox has no pod network: its Pod's IP is its node's, as a hostNetwork Pod's is
		// (agent-sandbox counts a Sandbox Ready only once its Pod has an IP). Nothing of the
		// sandbox listens there (docs/kubernetes.md#what-works-and-what-does-not).
		st.PodIP, st.PodIPs = hostIP, []corev1.PodIP{{IP: hostIP}}
	}
	cs := corev1.ContainerStatus{
		Name:        pod.Spec.Containers[0].Name,
		Image:       pod.Spec.Containers[0].Image,
		ImageID:     pod.Spec.Containers[0].Image,
		ContainerID: ContainerIDPrefix + sb.ID,
	}
	ready := false
	since := metav1.NewTime(sb.UpdatedAt)
	switch sb.Status {
	case api.StatusProvisioning:
		st.Phase = corev1.PodPending
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating", Message: "airlock is making the sandbox"}
	case api.StatusReady, api.StatusRunning, api.StatusPaused:
		st.Phase = corev1.PodRunning
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: readyAt(sb)}
		started := true
		cs.Started = &started
		ready = sb.Status != api.StatusPaused
	default: // completed, failed, terminated
		term := &corev1.ContainerStateTerminated{StartedAt: readyAt(sb), FinishedAt: since, ContainerID: cs.ContainerID}
		ended := endOf(sb)
		switch {
		case ended.To == api.StatusCompleted || (exit != nil && exit.code == 0 && ended.Reason == "agent_exit"):
			st.Phase = corev1.PodSucceeded
			term.Reason = "Completed"
		default:
			st.Phase = corev1.PodFailed
			term.Reason = podReason(ended.Reason)
			term.ExitCode = 1
			st.Reason, st.Message = term.Reason, "sandbox "+sb.ID+" ended: "+ended.Reason
		}
		if exit != nil {
			term.ExitCode = int32(exit.code)
			if exit.oomKilled {
				term.Reason = "OOMKilled"
				st.Reason = "OOMKilled"
			}
		}
		term.Message = "sandbox " + sb.ID + " " + sb.Status + " (" + sb.Reason + ")"
		cs.State.Terminated = term
	}
	cs.Ready = ready
	st.ContainerStatuses = []corev1.ContainerStatus{cs}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: since}
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true),
		cond(corev1.PodInitialized, true),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodReady, ready),
	}
	return st
}

// readyAt is when the sandbox became ready (its creation when the record does not say).
func readyAt(sb api.Sandbox) metav1.Time {
	for _, t := range sb.Transitions {
		if t.To == api.StatusReady {
			return metav1.NewTime(t.At)
		}
	}
	return metav1.NewTime(sb.CreatedAt)
}

// endOf is the transition that ended the sandbox: into completed or failed when it went
// through one, else into terminated.
func endOf(sb api.Sandbox) api.Transition {
	var last api.Transition
	for _, t := range sb.Transitions {
		switch t.To {
		case api.StatusCompleted, api.StatusFailed:
			return t
		case api.StatusTerminated:
			last = t
		}
	}
	if last.To == "" {
		last = api.Transition{To: sb.Status, Reason: sb.Reason, At: sb.UpdatedAt}
	}
	return last
}

// failedStatus is the status of a Pod that never became a sandbox.
func failedStatus(pod *corev1.Pod, perr *PodError, hostIP string) corev1.PodStatus {
	now := metav1.NewTime(time.Now())
	return corev1.PodStatus{
		QOSClass: pod.Status.QOSClass, // the apiserver's, immutable
		Phase:    corev1.PodFailed,
		Reason:   perr.Reason,
		Message:  perr.Message,
		HostIP:   hostIP,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: perr.Reason, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:  pod.Spec.Containers[0].Name,
			Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: perr.Reason, Message: perr.Message, FinishedAt: now}},
		}},
	}
}
