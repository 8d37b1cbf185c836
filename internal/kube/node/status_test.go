package node

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlockrun/airlock/api"
)

func TestStatusOf(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	sb := func(status string, ts ...api.Transition) api.Sandbox {
		return api.Sandbox{ID: "sbx_1", Status: status, CreatedAt: at, UpdatedAt: at, Transitions: ts}
	}
	ended := func(to, reason string) api.Transition { return api.Transition{To: to, Reason: reason, At: at} }
	tests := []struct {
		name     string
		sb       api.Sandbox
		exit     *exitInfo
		phase    corev1.PodPhase
		ready    bool
		reason   string // the container's terminated reason, "" when it is not terminated
		exitCode int32
	}{
		{name: "provisioning", sb: sb(api.StatusProvisioning), phase: corev1.PodPending},
		{name: "running", sb: sb(api.StatusRunning), phase: corev1.PodRunning, ready: true},
		{name: "paused", sb: sb(api.StatusPaused), phase: corev1.PodRunning},
		{name: "agent exited 0", sb: sb(api.StatusCompleted, ended(api.StatusCompleted, "agent_exit")), exit: &exitInfo{code: 0},
			phase: corev1.PodSucceeded, reason: "Completed"},
		{name: "agent exited 3", sb: sb(api.StatusFailed, ended(api.StatusFailed, "agent_exit")), exit: &exitInfo{code: 3},
			phase: corev1.PodFailed, reason: "Error", exitCode: 3},
		{name: "memory limit", sb: sb(api.StatusFailed, ended(api.StatusFailed, "agent_exit")), exit: &exitInfo{code: 137, oomKilled: true},
			phase: corev1.PodFailed, reason: "OOMKilled", exitCode: 137},
		{name: "timeout", sb: sb(api.StatusTerminated, ended(api.StatusTerminated, "timeout")),
			phase: corev1.PodFailed, reason: "DeadlineExceeded", exitCode: 1},
		{name: "completed, then terminated", sb: sb(api.StatusTerminated, ended(api.StatusCompleted, "agent_exit"), ended(api.StatusTerminated, "api")),
			exit: &exitInfo{code: 0}, phase: corev1.PodSucceeded, reason: "Completed"},
	}
	pod := pod(func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSBestEffort })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(pod, tc.sb, tc.exit, "127.0.0.1")
			if st.Phase != tc.phase || st.QOSClass != corev1.PodQOSBestEffort || len(st.ContainerStatuses) != 1 {
				t.Fatalf("phase %s qos %s, want %s %s: %+v", st.Phase, st.QOSClass, tc.phase, corev1.PodQOSBestEffort, st)
			}
			c := st.ContainerStatuses[0]
			if c.Ready != tc.ready || c.ContainerID != ContainerIDPrefix+"sbx_1" {
				t.Errorf("container ready %v id %q", c.Ready, c.ContainerID)
			}
			switch {
			case tc.reason == "" && c.State.Terminated != nil:
				t.Errorf("terminated: %+v", c.State.Terminated)
			case tc.reason != "" && (c.State.Terminated == nil || c.State.Terminated.Reason != tc.reason || c.State.Terminated.ExitCode != tc.exitCode):
				t.Errorf("terminated %+v, want reason %s exit %d", c.State.Terminated, tc.reason, tc.exitCode)
			}
			for _, cond := range st.Conditions {
				if cond.Type == corev1.PodReady && (cond.Status == corev1.ConditionTrue) != tc.ready {
					t.Errorf("Ready condition %s, want %v", cond.Status, tc.ready)
				}
			}
		})
	}
}

func TestFailedStatus(t *testing.T) {
	p := pod(func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSGuaranteed })
	st := failedStatus(p, &PodError{Reason: "InvalidSandbox", Message: "field resources.cpu: 9 is above 8"}, "127.0.0.1")
	if st.Phase != corev1.PodFailed || st.Reason != "InvalidSandbox" || st.Message == "" || st.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("%+v", st)
	}
}
