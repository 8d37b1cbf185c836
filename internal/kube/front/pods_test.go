package front

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/kube/node"
)

const testID = "sbx_0123456789abcdef0123"

func TestPodFor(t *testing.T) {
	tests := []struct {
		name  string
		spec  api.Spec
		rc    string // the runtime class; "" when refused
		field string // the refused field
		check func(*testing.T, *corev1.Pod)
		avoid []string
	}{
		{name: "defaults", spec: api.Spec{}, rc: "airlock-gvisor", check: func(t *testing.T, p *corev1.Pod) {
			c := p.Spec.Containers[0]
			if c.Image != kubeapi.TemplateImagePrefix+"host" || c.Resources.Limits.Memory().Value() != defaultMemoryMB<<20 {
				t.Errorf("image %q, memory %v", c.Image, c.Resources.Limits.Memory())
			}
		}},
		{name: "runc", spec: api.Spec{Isolation: "container", Runtime: "runc"}, rc: "airlock-runc"},
		{name: "process with limits and agent", spec: api.Spec{Isolation: "process", Template: "py", Agent: &api.Agent{Command: api.Command{"python3", "-V"}},
			Resources: api.Resources{CPU: 0.5, MemoryMB: 256, DiskMB: 100}, Environment: map[string]string{"A": "1"}}, rc: "airlock-process",
			check: func(t *testing.T, p *corev1.Pod) {
				c := p.Spec.Containers[0]
				if c.Image != kubeapi.TemplateImagePrefix+"py" || len(c.Command) != 2 || c.Resources.Limits.Cpu().MilliValue() != 500 ||
					c.Resources.Limits.Memory().Value() != 256<<20 || c.Resources.Limits.StorageEphemeral().Value() != 100<<20 || len(c.Env) != 1 {
					t.Errorf("container %+v", c)
				}
				// The node reads the rest from the spec annotation, which must not name what the Pod says.
				var rest api.Spec
				if err := json.Unmarshal([]byte(p.Annotations[kubeapi.AnnotationSpec]), &rest); err != nil || rest.Isolation != "" || rest.Agent != nil || rest.Template != "" {
					t.Errorf("spec annotation %s (%v)", p.Annotations[kubeapi.AnnotationSpec], err)
				}
				if _, ok := p.Annotations[kubeapi.AnnotationNetwork]; ok {
					t.Errorf("a network annotation for no network")
				}
			}},
		{name: "network", spec: api.Spec{Isolation: "wasm", Network: api.Network{EgressPolicy: "none"}}, rc: "airlock-wasm", check: func(t *testing.T, p *corev1.Pod) {
			if p.Annotations[kubeapi.AnnotationNetwork] == "" {
				t.Errorf("no network annotation")
			}
		}},
		{name: "lost nodes avoided", spec: api.Spec{Isolation: "process"}, rc: "airlock-process", avoid: []string{"n1"}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n1" {
				t.Errorf("affinity %+v", p.Spec.Affinity)
			}
		}},
		{name: "unknown level", spec: api.Spec{Isolation: "enclave"}, field: "isolation"},
		{name: "unknown runtime", spec: api.Spec{Isolation: "container", Runtime: "kata"}, field: "runtime"},
		{name: "from a snapshot", spec: api.Spec{FromSnapshot: "snap_1"}, field: "fromSnapshot"},
	}
	for _, tc := range tests {
		p, err := podFor("tenant-a", testID, tc.spec, tc.avoid)
		if tc.rc == "" {
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok || fe.Field != tc.field || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("%s: %v, want invalid %s", tc.name, err, tc.field)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if *p.Spec.RuntimeClassName != tc.rc || p.Name != "sbx-0123456789abcdef0123" || p.Namespace != "tenant-a" ||
			p.Annotations[kubeapi.AnnotationSandbox] != testID || p.Labels[kubeapi.LabelFront] != "true" {
			t.Errorf("%s: pod %s/%s class %s annotations %v", tc.name, p.Namespace, p.Name, *p.Spec.RuntimeClassName, p.Annotations)
		}
		// What the node makes of it: the same level, the front's ID.
		ns, err := node.SpecOf(p, "n")
		if err != nil || ns.ID != testID {
			t.Errorf("%s: the node's spec: %+v, %v", tc.name, ns, err)
		}
		if tc.check != nil {
			tc.check(t, p)
		}
	}
}

func TestPodView(t *testing.T) {
	base := func(phase corev1.PodPhase, reason string) *corev1.Pod {
		p, _ := podFor("ns", testID, api.Spec{Name: "x", Isolation: "process"}, nil)
		p.Status.Phase, p.Status.Reason = phase, reason
		return p
	}
	tests := []struct {
		pod            *corev1.Pod
		status, reason string
	}{
		{base(corev1.PodPending, ""), api.StatusProvisioning, "created"},
		{base(corev1.PodRunning, ""), api.StatusReady, "ready"},
		{base(corev1.PodSucceeded, ""), api.StatusCompleted, "agent_exit"},
		{base(corev1.PodFailed, kubeapi.PodReasonNodeLost), api.StatusFailed, kubeapi.ReasonNodeLost},
		{base(corev1.PodFailed, "InvalidSandbox"), api.StatusFailed, "invalid_sandbox"},
		{base(corev1.PodFailed, ""), api.StatusFailed, "pod_failed"},
	}
	for _, tc := range tests {
		sb := podView(tc.pod)
		if sb.ID != testID || sb.Status != tc.status || sb.Reason != tc.reason || sb.Name != "x" || sb.Isolation != "process" {
			t.Errorf("%s/%s: %+v", tc.pod.Status.Phase, tc.pod.Status.Reason, sb)
		}
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{errdefs.Invalid("isolation", "no"), http.StatusBadRequest, api.CodeInvalidArgument},
		{errdefs.New(errdefs.ErrUnauthenticated, "no key"), http.StatusUnauthorized, api.CodeUnauthorized},
		{errdefs.New(errdefs.ErrNotFound, "no sandbox"), http.StatusNotFound, api.CodeNotFound},
		{errdefs.New(errdefs.ErrQuota, "full"), http.StatusTooManyRequests, api.CodeQuotaExceeded},
		{&conflict{status: api.StatusFailed, msg: "lost"}, http.StatusConflict, api.CodeConflict},
		{errdefs.New(errdefs.ErrServiceUnavailable, "node down"), http.StatusServiceUnavailable, api.CodeUnavailable},
		{errors.New("boom"), http.StatusInternalServerError, api.CodeInternal},
	}
	for _, tc := range tests {
		w := httptest.NewRecorder()
		writeError(w, tc.err)
		var env api.Response[any]
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || w.Code != tc.status || env.OK || env.Error.Code != tc.code {
			t.Errorf("%v: %d %s (%v), want %d %s", tc.err, w.Code, w.Body, err, tc.status, tc.code)
		}
	}
}

func TestUntilLost(t *testing.T) {
	f := &Front{lost: map[string]time.Time{}, lostCtx: map[string]context.Context{}, inflight: map[string]context.CancelFunc{}}
	ctx, stop := f.untilLost(context.Background(), "n1")
	defer stop()
	other, stopOther := f.untilLost(context.Background(), "n2")
	defer stopOther()
	f.mu.Lock()
	f.lostLocked("n1", time.Now())
	f.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("a call in flight to a lost node did not end")
	}
	if other.Err() != nil {
		t.Error("a call to another node ended")
	}
	if _, ok := f.lost["n1"]; !ok {
		t.Error("n1 not held lost")
	}
}
