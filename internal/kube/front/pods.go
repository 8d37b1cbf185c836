package front

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/kube/node"
)

// defaultMemoryMB is a sandbox's memory when the request leaves it out (docs/limits.md): the
// Pod says it, so that the tenant's ResourceQuota counts it.
const defaultMemoryMB = 2048

// runtimeClassOf is the runtime class of a create's level (and runtime): the container level
// is gVisor's unless runtime says runc, as on a host.
func runtimeClassOf(isolation, runtime string) (string, error) {
	if isolation == "" {
		isolation = "container"
	}
	if isolation == "container" && runtime == "" {
		runtime = "runsc"
	}
	for _, rc := range kubeapi.RuntimeClasses {
		if rc.Isolation == isolation && rc.Runtime == runtime {
			return rc.Name, nil
		}
	}
	if runtime != "" {
		return "", errdefs.Invalid("runtime", "runtime %q is not one of the %s level's", runtime, isolation)
	}
	return "", errdefs.Invalid("isolation", "isolation %q: the nodes offer process, container, wasm and microvm", isolation)
}

// podFor is the Pod of sandbox id of namespace ns made of spec (docs/kubernetes.md#pods read
// backwards): its level the runtime class, its root the image, its agent the command (started
// at once: a Pod's command runs when it starts), its limits the resources, and the rest in
// the airlock.dev/spec annotation, checked by the node as a host's API checks a create. It is
// never placed on a node in avoid (lost ones), and never evicted by the node's loss: the
// front fails its sandbox as node_lost instead, keeping its record.
func podFor(ns, id string, spec api.Spec, avoid []string) (*corev1.Pod, error) {
	switch {
	case spec.FromSnapshot != "":
		return nil, errdefs.Invalid("fromSnapshot", "the front API makes sandboxes on any node: a snapshot is one host's (create on that host's API)")
	case spec.ID != "" || len(spec.Binds) > 0 || spec.RootDir != "":
		return nil, errdefs.Invalid("", "host fields are not part of a create")
	}
	rcName, err := runtimeClassOf(spec.Isolation, spec.Runtime)
	if err != nil {
		return nil, err
	}
	request, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := corev1.Container{Name: "sandbox", WorkingDir: spec.Workdir}
	switch {
	case spec.Image != "":
		c.Image = spec.Image
	case spec.Template != "":
		c.Image = kubeapi.TemplateImagePrefix + spec.Template
	default:
		c.Image = kubeapi.TemplateImagePrefix + "host"
	}
	if spec.Agent != nil {
		c.Command = spec.Agent.Command
		for k, v := range spec.Agent.Env {
			c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	for k, v := range spec.Environment {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	mem := spec.Resources.MemoryMB
	if mem == 0 {
		mem = defaultMemoryMB
	}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(mem<<20, resource.BinarySI)}
	if spec.Resources.CPU > 0 {
		c.Resources.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(float64(spec.Resources.CPU)*1000), resource.DecimalSI)
	}
	if spec.Resources.DiskMB > 0 {
		c.Resources.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(spec.Resources.DiskMB<<20, resource.BinarySI)
	}
	annotations := map[string]string{kubeapi.AnnotationSandbox: id, kubeapi.AnnotationRequest: string(request)}
	if !networkEmpty(spec.Network) {
		b, err := json.Marshal(spec.Network)
		if err != nil {
			return nil, err
		}
		annotations[kubeapi.AnnotationNetwork] = string(b)
	}
	// The rest, as the node's annotation takes it: what the Pod's own fields say is left out.
	rest := spec
	rest.Isolation, rest.Runtime, rest.Image, rest.Template, rest.Agent, rest.Start = "", "", "", "", nil, false
	rest.Environment, rest.Workdir, rest.Network = nil, "", api.Network{}
	b, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	annotations[kubeapi.AnnotationSpec] = string(b)
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(id), Namespace: ns, Annotations: annotations,
			Labels: map[string]string{kubeapi.LabelFront: "true"}},
		Spec: corev1.PodSpec{
			RuntimeClassName:             &rcName,
			RestartPolicy:                corev1.RestartPolicyNever,
			Containers:                   []corev1.Container{c},
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
		},
	}
	if len(avoid) > 0 {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: avoid}},
			}}},
		}}
	}
	return pod, nil
}

// startsAgent says whether the node starts pod's agent at create: a container's command, or an
// image (its entrypoint), unless the Pod restores a snapshot.
func startsAgent(p *corev1.Pod) bool {
	c := p.Spec.Containers[0]
	if p.Annotations[kubeapi.AnnotationFromSnapshot] != "" {
		return false
	}
	return len(c.Command) > 0 || !strings.HasPrefix(c.Image, kubeapi.TemplateImagePrefix)
}

// snapshotPod is the Pod of sandbox id of namespace ns restored from snapshot sn, which node
// holds; src is the record of the sandbox sn was taken of. The Pod has src's level, root and
// limits unless spec gives them (the node then checks they are the snapshot's, as a host's
// create does), carries the snapshot's ID for the node (and forkOf, the sandbox it forks, when
// it is a fork), and is placed on node only: by node affinity, so that the scheduler still
// counts the node's capacity (a full node leaves it unschedulable, never over-committed).
func snapshotPod(ns, id string, spec api.Spec, node string, sn api.Snapshot, src api.Sandbox, forkOf string) (*corev1.Pod, error) {
	request, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	s := spec
	s.FromSnapshot = ""
	s.Isolation, s.Runtime = cmp.Or(s.Isolation, sn.Isolation), cmp.Or(s.Runtime, sn.Runtime)
	if s.Image == "" && s.Template == "" {
		s.Image, s.Template = src.Image, src.Template
	}
	r := &s.Resources
	// cpu and memory as the Pod counts them (a memory the Pod left out would be the front's
	// default, not the snapshot's); the rest a node fills in with the snapshot's.
	r.CPU, r.MemoryMB = cmp.Or(r.CPU, src.Resources.CPU), cmp.Or(r.MemoryMB, src.Resources.MemoryMB)
	pod, err := podFor(ns, id, s, nil)
	if err != nil {
		return nil, err
	}
	pod.Annotations[kubeapi.AnnotationRequest] = string(request)
	pod.Annotations[kubeapi.AnnotationFromSnapshot] = sn.ID
	if forkOf != "" {
		pod.Annotations[kubeapi.AnnotationForkOf] = forkOf
	}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	return pod, nil
}

// networkEmpty reports whether n says nothing (every field its zero).
func networkEmpty(n api.Network) bool {
	b, _ := json.Marshal(n)
	var zero api.Network
	z, _ := json.Marshal(zero)
	return string(b) == string(z)
}

// containerID is the sandbox ID a node reported for pod ("" before it made one).
func containerID(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if id, ok := strings.CutPrefix(cs.ContainerID, node.ContainerIDPrefix); ok {
			return id
		}
	}
	return ""
}

// podView is the sandbox as its Pod tells it: the request it was made of, and a status
// from the Pod's phase.
func podView(p *corev1.Pod) api.Sandbox {
	sb := api.Sandbox{ID: p.Annotations[kubeapi.AnnotationSandbox], CreatedAt: p.CreationTimestamp.UTC(), UpdatedAt: p.CreationTimestamp.UTC()}
	_ = json.Unmarshal([]byte(p.Annotations[kubeapi.AnnotationRequest]), &sb.Spec) // the front wrote it
	switch p.Status.Phase {
	case corev1.PodRunning:
		sb.Status, sb.Reason = api.StatusReady, "ready"
	case corev1.PodSucceeded:
		sb.Status, sb.Reason = api.StatusCompleted, "agent_exit"
	case corev1.PodFailed:
		sb.Status, sb.Reason = api.StatusFailed, snake(p.Status.Reason)
	default:
		sb.Status, sb.Reason = api.StatusProvisioning, "created"
	}
	for _, c := range p.Status.Conditions {
		if c.LastTransitionTime.After(sb.UpdatedAt) {
			sb.UpdatedAt = c.LastTransitionTime.UTC()
		}
	}
	return sb
}

// snake is a Pod's CamelCase reason as a sandbox's: NodeLost → node_lost.
func snake(reason string) string {
	if reason == "" {
		return "pod_failed"
	}
	var b strings.Builder
	for i, r := range reason {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// podFailure is the error of a create whose Pod the node refused: the node's reason, mapped
// to the status a host's create answers with.
func podFailure(p *corev1.Pod) error {
	msg := fmt.Sprintf("%s: %s", p.Status.Reason, p.Status.Message)
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.Message != "" && p.Status.Message == "" {
			msg = fmt.Sprintf("%s: %s", t.Reason, t.Message)
		}
	}
	kind := errdefs.ErrSetup
	switch p.Status.Reason {
	case "InvalidSandbox", "InvalidAnnotation", "UnknownRuntimeClass", "UnsupportedPod", "UnsupportedResource":
		kind = errdefs.ErrInvalidArgument
	case "QuotaExceeded":
		kind = errdefs.ErrQuota
	case "IsolationUnavailable":
		kind = errdefs.ErrUnavailable
	case "Forbidden":
		kind = errdefs.ErrPermissionDenied
	case kubeapi.PodReasonNodeLost, corev1.PodReasonUnschedulable:
		kind = errdefs.ErrServiceUnavailable
	}
	return errdefs.New(kind, "the sandbox could not be made: %s", msg)
}

// apiError is the API's error for the apiserver's: a ResourceQuota's refusal is the tenant's
// quota (429).
func apiError(err error) error {
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return errdefs.New(errdefs.ErrQuota, "the tenant's quota (its namespace's ResourceQuota): %v", err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return errdefs.New(errdefs.ErrInvalidArgument, "%v", err)
	case apierrors.IsNotFound(err):
		return errdefs.New(errdefs.ErrNotFound, "%v", err)
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return errdefs.New(errdefs.ErrConflict, "%v", err)
	}
	return errdefs.New(errdefs.ErrServiceUnavailable, "the cluster: %v", err)
}

// conflict is a call on a sandbox in a status that cannot take it (409, with the status).
type conflict struct{ status, msg string }

func (c *conflict) Error() string { return c.msg }

// writeError maps err to its status and the error envelope: the one place the front's errors
// become HTTP statuses.
func writeError(w http.ResponseWriter, err error) { writeErrorAs(w, err, false) }

// writeErrorAs is writeError; bare writes seed 002's error body, {"error": {...}}, instead of
// the envelope.
func writeErrorAs(w http.ResponseWriter, err error, bare bool) {
	status, e := errorStatus(err)
	var body any = api.Response[any]{Error: &e}
	if bare {
		body = api.CompatError{Error: e}
	}
	writeBody(w, status, body)
}

// statuses are the error kinds' HTTP statuses and codes, both ways: the front's errors to its
// answers (errorStatus), a node's answers back to kinds (nodeError).
var statuses = []struct {
	kind   error
	status int
	code   string
}{
	{errdefs.ErrInvalidArgument, http.StatusBadRequest, api.CodeInvalidArgument},
	{errdefs.ErrUnauthenticated, http.StatusUnauthorized, api.CodeUnauthorized},
	{errdefs.ErrPermissionDenied, http.StatusForbidden, api.CodeForbidden},
	{errdefs.ErrNotFound, http.StatusNotFound, api.CodeNotFound},
	{errdefs.ErrConflict, http.StatusConflict, api.CodeConflict},
	{errdefs.ErrQuota, http.StatusTooManyRequests, api.CodeQuotaExceeded},
	{errdefs.ErrUnavailable, http.StatusUnprocessableEntity, api.CodeIsolationUnavailable},
	{errdefs.ErrServiceUnavailable, http.StatusServiceUnavailable, api.CodeUnavailable},
	{errdefs.ErrNotImplemented, http.StatusNotImplemented, api.CodeNotImplemented},
}

// errorStatus is err's HTTP status and the API's error.
func errorStatus(err error) (int, api.Error) {
	status, code := http.StatusInternalServerError, api.CodeInternal
	e := api.Error{Message: err.Error()}
	for _, m := range statuses {
		if errors.Is(err, m.kind) {
			status, code = m.status, m.code
			break
		}
	}
	if c, ok := errors.AsType[*conflict](err); ok {
		status, code, e.Status = http.StatusConflict, api.CodeConflict, c.status
	}
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok {
		e.Field, e.Message = fe.Field, fe.Message
		if fe.Code != "" {
			code = fe.Code
		}
	}
	e.Code = code
	return status, e
}

// nodeError is the error a node answered with status: its kind, code, field and message, so
// that the front answers as the node did. What is the node's own trouble (a 5xx, or its refusal
// of the front's identity) is the front's 503.
func nodeError(node string, status int, e *api.Error) error {
	if e == nil {
		return errdefs.New(errdefs.ErrServiceUnavailable, "node %s answered %d without an error", node, status)
	}
	if e.Status != "" {
		return &conflict{status: e.Status, msg: e.Message}
	}
	fe := &errdefs.FieldError{Field: e.Field, Message: e.Message, Kind: errdefs.ErrServiceUnavailable, Code: e.Code}
	for _, m := range statuses {
		if m.status == status && status < 500 && status != http.StatusUnauthorized {
			fe.Kind = m.kind
			break
		}
	}
	if errors.Is(fe.Kind, errdefs.ErrServiceUnavailable) {
		fe.Code, fe.Message = "", fmt.Sprintf("node %s: %s", node, e.Message)
	}
	return fe
}

func writeJSON(w http.ResponseWriter, status int, data any) {
	writeBody(w, status, api.Response[any]{OK: true, Data: data})
}

// writeBare writes v as it is, without the envelope: seed 002's answers; a 204 has no body.
func writeBare(w http.ResponseWriter, status int, v any) {
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	writeBody(w, status, v)
}

func writeBody(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"ok":false,"error":{"code":"internal","message":"encode the answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // the client gone: nothing to answer
}
