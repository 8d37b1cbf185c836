package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/kube/node"
)

// hostImage is the operator's host template as a Pod's image: python3 is the host's.
const hostImage = kubeapi.TemplateImagePrefix + "host"

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sandboxPod is a Pod of the airlock-process runtime class running cmd on the host template.
func sandboxPod(name string, cmd []string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	rcName := "airlock-process"
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"test": name}},
		Spec: corev1.PodSpec{
			RuntimeClassName: &rcName,
			RestartPolicy:    corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "agent", Image: hostImage, Command: cmd,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
			}},
			AutomountServiceAccountToken: new(bool),
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func create(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := cs.CoreV1().Pods(p.Namespace).Create(ctxFor(t, 30*time.Second), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return out
}

// waitPod polls pod ns/name until ok says it is as wanted.
func waitPod(t *testing.T, ns, name string, within time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(within)
	var last *corev1.Pod
	for {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s not %s within %s; last: %s", ns, name, what, within, podText(last))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func phaseIs(phases ...corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return slices.Contains(phases, p.Status.Phase) }
}

func podText(p *corev1.Pod) string {
	if p == nil {
		return "(none)"
	}
	s := fmt.Sprintf("phase=%s reason=%q message=%q node=%s", p.Status.Phase, p.Status.Reason, p.Status.Message, p.Spec.NodeName)
	for _, c := range p.Status.ContainerStatuses {
		s += fmt.Sprintf(" container=%s id=%s state=%+v", c.Name, c.ContainerID, c.State)
	}
	return s
}

func logsOf(t *testing.T, ns, name string) string {
	t.Helper()
	b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).Do(ctxFor(t, 30*time.Second)).Raw()
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return string(b)
}

// TestPodsSpreadAndRun: three Pods that must spread over the three nodes each run python3 in a
// sandbox; each Succeeds and kubectl logs shows its output.
func TestPodsSpreadAndRun(t *testing.T) {
	var names []string
	for i := range 3 {
		name := fmt.Sprintf("six-by-seven-%d", i)
		names = append(names, name)
		create(t, sandboxPod(name, []string{"python3", "-c", "print(6*7)"}, func(p *corev1.Pod) {
			p.Labels["app"] = "six-by-seven"
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "six-by-seven"}}}}
		}))
	}
	on := map[string]bool{}
	for _, name := range names {
		p := waitPod(t, "default", name, 90*time.Second, "Succeeded", phaseIs(corev1.PodSucceeded, corev1.PodFailed))
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s: %s", name, podText(p))
			continue
		}
		on[p.Spec.NodeName] = true
		if !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, node.ContainerIDPrefix+"sbx_") {
			t.Errorf("pod %s: container ID %q does not name its sandbox", name, p.Status.ContainerStatuses[0].ContainerID)
		}
		if got := logsOf(t, "default", name); got != "42\n" {
			t.Errorf("logs of %s: %q, want \"42\\n\"", name, got)
		}
	}
	if len(on) != 3 {
		t.Errorf("the pods ran on %d nodes (%v), want all three", len(on), on)
	}
}

// TestRuntimeClasses: a Pod of each other airlock runtime class runs python3 in its level (the
// container level under runc and gVisor, the wasm level's CPython), where a node offers it.
// airlock-microvm is left out: under TCG (no KVM here) a VM takes most of a minute to boot.
func TestRuntimeClasses(t *testing.T) {
	for _, rc := range []string{"airlock-runc", "airlock-gvisor", "airlock-wasm"} {
		t.Run(rc, func(t *testing.T) {
			t.Parallel()
			offered, err := cs.CoreV1().Nodes().List(ctxFor(t, 30*time.Second), metav1.ListOptions{LabelSelector: kubeapi.RuntimeLabelPrefix + rc + "=true"})
			if err != nil {
				t.Fatal(err)
			}
			if len(offered.Items) == 0 {
				t.Skipf("no node offers %s on this host (airlock doctor says why)", rc)
			}
			name := "six-by-seven-" + strings.TrimPrefix(rc, "airlock-")
			create(t, sandboxPod(name, []string{"python3", "-c", "print(6*7)"}, func(p *corev1.Pod) { p.Spec.RuntimeClassName = &rc }))
			p := waitPod(t, "default", name, 2*time.Minute, "over", phaseIs(corev1.PodSucceeded, corev1.PodFailed))
			if p.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("%s", podText(p))
			}
			if got := logsOf(t, "default", name); got != "42\n" {
				t.Errorf("logs: %q, want \"42\\n\"", got)
			}
		})
	}
}

// TestExecAndDelete: a long-running Pod takes kubectl exec with stdin, reports a command's exit
// code, and on delete its sandbox is terminated and nothing of it is left on its node.
func TestExecAndDelete(t *testing.T) {
	// No limits: a BestEffort Pod, the sandbox gets airlock's defaults.
	p := create(t, sandboxPod("exec-target", []string{"sleep", "600"}, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }))
	p = waitPod(t, p.Namespace, p.Name, 60*time.Second, "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	})
	sandboxID := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, node.ContainerIDPrefix)

	tests := []struct {
		name     string
		cmd      []string
		stdin    string
		tty      bool
		stdout   string
		exitCode int
	}{
		{name: "stdin to stdout", cmd: []string{"cat"}, stdin: "hello from client-go\n", stdout: "hello from client-go\n"},
		{name: "python", cmd: []string{"python3", "-c", "import sys; print(sum(int(x) for x in sys.stdin.read().split()))"}, stdin: "40 2", stdout: "42\n"},
		{name: "exit code", cmd: []string{"sh", "-c", "echo out; exit 3"}, stdout: "out\n", exitCode: 3},
		{name: "tty", cmd: []string{"sh", "-c", "test -t 0 && echo tty"}, tty: true, stdin: "", stdout: "tty\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, err := execIn(ctxFor(t, 60*time.Second), p, tc.cmd, tc.stdin, tc.tty, &stdout, &stderr)
			if err != nil {
				t.Fatalf("exec %v: %v (stderr %q)", tc.cmd, err, stderr.String())
			}
			if code != tc.exitCode || stdout.String() != tc.stdout {
				t.Errorf("exec %v: exit %d, stdout %q; want exit %d, stdout %q (stderr %q)", tc.cmd, code, stdout.String(), tc.exitCode, tc.stdout, stderr.String())
			}
		})
	}

	var n *cluster.Node
	for _, nd := range nodes {
		if nd.Name == p.Spec.NodeName {
			n = nd
		}
	}
	if n == nil {
		t.Fatalf("pod on unknown node %q", p.Spec.NodeName)
	}
	if leaks := sandboxLeaks(n, sandboxID); len(leaks) == 0 {
		t.Fatalf("sandbox %s: no uid range or cgroup found while it runs: the leak check below would prove nothing", sandboxID)
	}
	if err := cs.CoreV1().Pods(p.Namespace).Delete(ctxFor(t, 30*time.Second), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := cs.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod still in the API 60 s after delete (err %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		leaks := sandboxLeaks(n, sandboxID)
		if len(leaks) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s left on node %s after its Pod was deleted: %v", sandboxID, n.Name, leaks)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// execIn runs cmd in pod through the apiserver's pods/exec, as kubectl exec does; it returns the
// command's exit code.
func execIn(ctx context.Context, p *corev1.Pod, cmd []string, stdin string, tty bool, stdout, stderr io.Writer) (int, error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: p.Spec.Containers[0].Name, Command: cmd, Stdin: true, Stdout: true, Stderr: !tty, TTY: tty}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		return -1, err
	}
	opts := remotecommand.StreamOptions{Stdin: strings.NewReader(stdin), Stdout: stdout, Tty: tty}
	if !tty {
		opts.Stderr = stderr
	}
	err = ex.StreamWithContext(ctx, opts)
	if ee, ok := errors.AsType[utilexec.ExitError](err); ok && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// TestPodFailures: what a Pod asks for that airlock refuses, or that its limits stop, is in its
// status: a memory bomb is OOMKilled (exit 137); limits over airlock's maxima and a host path
// fail the Pod with the reason; a denied host is unreachable from a restricted sandbox.
func TestPodFailures(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		reason string // the Pod's (or its container's) reason
		msg    string // in the Pod's message
		exit   int32
		logs   []string // lines the logs must have
	}{
		{name: "memory bomb", pod: sandboxPod("memory-bomb", []string{"python3", "-c", "b = bytearray(1 << 30); print(len(b))"}, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Mi")
		}), reason: "OOMKilled", exit: 137},
		{name: "over the maxima", pod: sandboxPod("too-many-cpus", []string{"true"}, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("9")
		}), reason: "InvalidSandbox", msg: "cpu"},
		{name: "host path", pod: sandboxPod("host-path", []string{"cat", "/host/etc/shadow"}, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		}), reason: "UnsupportedPod", msg: "volume \"host\""},
		{name: "denied host", pod: sandboxPod("denied-host", []string{"python3", "-c", deniedScript}, func(p *corev1.Pod) {
			p.Annotations = map[string]string{kubeapi.AnnotationNetwork: `{"egressPolicy":"restricted","allowedDomains":["allowed.test"]}`}
		}), reason: "Completed", logs: []string{"dns: refused", "http: denied"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			create(t, tc.pod)
			p := waitPod(t, tc.pod.Namespace, tc.pod.Name, 90*time.Second, "over", phaseIs(corev1.PodSucceeded, corev1.PodFailed))
			reason, exit := p.Status.Reason, int32(0)
			if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
				exit = cs[0].State.Terminated.ExitCode
				if reason == "" {
					reason = cs[0].State.Terminated.Reason
				}
			}
			if reason != tc.reason || !strings.Contains(p.Status.Message, tc.msg) || (tc.exit != 0 && exit != tc.exit) {
				t.Errorf("want reason %q, message with %q, exit %d; got %s", tc.reason, tc.msg, tc.exit, podText(p))
			}
			if len(tc.logs) > 0 {
				logs := logsOf(t, p.Namespace, p.Name)
				for _, l := range tc.logs {
					if !strings.Contains(logs, l+"\n") {
						t.Errorf("logs lack %q:\n%s", l, logs)
					}
				}
			}
		})
	}
}

// deniedScript tries a name outside the sandbox's allowlist by DNS and through the egress proxy.
const deniedScript = `
import os, socket, urllib.request
try:
    socket.getaddrinfo("evil.test", 443)
    print("dns: resolved")
except OSError:
    print("dns: refused")
try:
    urllib.request.urlopen("http://evil.test/", timeout=10)
    print("http: reached")
except urllib.error.HTTPError as e:
    print("http: denied" if e.code == 403 else "http: %d" % e.code)
except Exception as e:
    print("http: denied" if not os.environ.get("http_proxy") else "http: failed %r" % e)
`
