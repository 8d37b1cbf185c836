package cluster

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/kube/node"
)

// TestNodeRestart kills one node's daemon with SIGKILL, as a host that crashes, and starts it
// again: the Pod it ran is found again, Running, and takes execs; nothing of its sandbox leaks.
func TestNodeRestart(t *testing.T) {
	n := nodes[1]
	p := create(t, sandboxPod("survivor", []string{"sleep", "600"}, func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n.Name}
	}))
	ready := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	}
	p = waitPod(t, p.Namespace, p.Name, 60*time.Second, "Running and Ready", ready)
	before := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, node.ContainerIDPrefix)

	if err := n.Kill(); err != nil {
		t.Fatalf("kill node %s: %v", n.Name, err)
	}
	if err := kc.Restart(ctxFor(t, 2*time.Minute), n); err != nil {
		t.Fatalf("restart node %s: %v", n.Name, err)
	}
	// The Pod is Running on its sandbox again: the one it had (adopted), or a new one (the old
	// one ended by the restarted daemon's recovery, leaving nothing).
	var stdout, stderr bytes.Buffer
	deadline := time.Now().Add(90 * time.Second)
	for {
		p = waitPod(t, p.Namespace, p.Name, 90*time.Second, "Running and Ready after the restart", ready)
		stdout.Reset()
		stderr.Reset()
		code, err := execIn(ctxFor(t, 30*time.Second), p, []string{"echo", "alive"}, "", false, &stdout, &stderr)
		if err == nil && code == 0 && stdout.String() == "alive\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec after the restart: exit %d, err %v, stdout %q, stderr %q; pod %s", code, err, stdout.String(), stderr.String(), podText(p))
		}
		time.Sleep(500 * time.Millisecond)
	}
	after := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, node.ContainerIDPrefix)
	t.Logf("sandbox before the restart %s, after %s", before, after)
	if after != before {
		waitNoSandbox(t, n, before)
	}
}

// waitNoSandbox waits until nothing of sandbox id is left on node n.
func waitNoSandbox(t *testing.T, n *cluster.Node, id string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; {
		leaks := sandboxLeaks(n, id)
		if len(leaks) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s left on node %s: %v", id, n.Name, leaks)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
