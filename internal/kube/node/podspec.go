package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Metadata keys a node puts on the sandboxes it makes of Pods: how it finds them again after a
// restart, and how a tenant's sandbox list says where one came from.
const (
	MetaNamespace = "kubernetes.namespace"
	MetaPod       = "kubernetes.pod"
	MetaUID       = "kubernetes.uid"
	MetaNode      = "kubernetes.node"
)

var snapshotID = regexp.MustCompile(`^snap_[0-9a-f]{20}$`)

// PodError is why a Pod cannot become a sandbox: the Pod fails with Reason and Message.
type PodError struct {
	Reason  string // CamelCase, as Kubernetes' reasons are
	Message string
}

func (e *PodError) Error() string { return e.Reason + ": " + e.Message }

func podErr(reason, format string, a ...any) *PodError {
	return &PodError{Reason: reason, Message: fmt.Sprintf(format, a...)}
}

// SpecOf translates pod into the spec of its sandbox (docs/kubernetes.md#pods): the runtime class
// is the level, the first container's image and command the root and agent, its limits the
// resources, its env the environment; the annotations carry the rest. What a Pod asks for that
// airlock cannot give (a second container, host namespaces, volumes that are not the service
// account's token) is refused, never ignored.
func SpecOf(pod *corev1.Pod, node string) (sandbox.Spec, error) {
	var spec sandbox.Spec
	rcName := ""
	if pod.Spec.RuntimeClassName != nil {
		rcName = *pod.Spec.RuntimeClassName
	}
	rc, ok := kubeapi.LookupRuntimeClass(rcName)
	if !ok {
		return spec, podErr("UnknownRuntimeClass", "an airlock node runs Pods of the runtime classes airlock-process, airlock-gvisor, airlock-runc, airlock-wasm and airlock-microvm; this one names %q", rcName)
	}
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0 || len(pod.Spec.EphemeralContainers) > 0 {
		return spec, podErr("UnsupportedPod", "an airlock sandbox is one container: the Pod has %d containers and %d init containers", len(pod.Spec.Containers), len(pod.Spec.InitContainers))
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		return spec, podErr("UnsupportedPod", "a sandbox never shares the host's network, process or IPC namespace")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil && v.EmptyDir == nil {
			return spec, podErr("UnsupportedPod", "volume %q: an airlock sandbox mounts only the operator's volumes (annotation %s, field volumes); Pod volumes other than emptyDir and the service account's token are refused", v.Name, kubeapi.AnnotationSpec)
		}
	}
	c := pod.Spec.Containers[0]
	if len(c.Ports) > 0 {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				return spec, podErr("UnsupportedPod", "container port %d: a sandbox has no host ports", p.ContainerPort)
			}
		}
	}

	// The annotations first: the Pod's own fields override what they say.
	if s := pod.Annotations[kubeapi.AnnotationSpec]; s != "" {
		if err := strictJSON(s, &spec); err != nil {
			return spec, podErr("InvalidAnnotation", "annotation %s: %v", kubeapi.AnnotationSpec, err)
		}
		if spec.Isolation != "" || spec.Runtime != "" || spec.Image != "" || spec.Agent != nil || spec.FromSnapshot != "" || spec.Start {
			return spec, podErr("InvalidAnnotation", "annotation %s: isolation, runtime, image, agent, start and fromSnapshot come from the Pod (runtime class, image, command)", kubeapi.AnnotationSpec)
		}
	}
	if s := pod.Annotations[kubeapi.AnnotationNetwork]; s != "" {
		var n api.Network
		if err := strictJSON(s, &n); err != nil {
			return spec, podErr("InvalidAnnotation", "annotation %s: %v", kubeapi.AnnotationNetwork, err)
		}
		spec.Network = n
	}
	spec.Isolation, spec.Runtime = rc.Isolation, rc.Runtime
	if name, ok := strings.CutPrefix(c.Image, kubeapi.TemplateImagePrefix); ok {
		spec.Template = name
	} else {
		spec.Image = c.Image
	}
	if cmd := append(append([]string{}, c.Command...), c.Args...); len(cmd) > 0 {
		spec.Agent = &api.Agent{Command: cmd}
	}
	if c.WorkingDir != "" {
		spec.Workdir = c.WorkingDir
	}
	if len(c.Env) > 0 {
		env := map[string]string{}
		maps.Copy(env, spec.Environment)
		for _, e := range c.Env {
			env[e.Name] = e.Value // the virtual kubelet resolved valueFrom already
		}
		spec.Environment = env
	}
	if err := limitsOf(c.Resources, &spec.Resources); err != nil {
		return spec, err
	}
	if spec.Name == "" {
		spec.Name = pod.Namespace + "/" + pod.Name
	}
	if id, ok := pod.Annotations[kubeapi.AnnotationSandbox]; ok {
		if !kubeapi.ValidSandboxID(id) {
			return spec, podErr("InvalidAnnotation", "annotation %s: %q is not a sandbox ID (sbx_ and 20 hex digits)", kubeapi.AnnotationSandbox, id)
		}
		spec.ID = id
	}
	if snap, ok := pod.Annotations[kubeapi.AnnotationFromSnapshot]; ok {
		if !snapshotID.MatchString(snap) {
			return spec, podErr("InvalidAnnotation", "annotation %s: %q is not a snapshot ID (snap_ and 20 hex digits)", kubeapi.AnnotationFromSnapshot, snap)
		}
		spec.FromSnapshot = snap
	}
	if of, ok := pod.Annotations[kubeapi.AnnotationForkOf]; ok && (!kubeapi.ValidSandboxID(of) || spec.FromSnapshot == "") {
		return spec, podErr("InvalidAnnotation", "annotation %s: %q must be a sandbox ID, beside annotation %s", kubeapi.AnnotationForkOf, of, kubeapi.AnnotationFromSnapshot)
	}
	md := map[string]string{}
	maps.Copy(md, spec.Metadata)
	md[MetaNamespace], md[MetaPod], md[MetaUID], md[MetaNode] = pod.Namespace, pod.Name, string(pod.UID), node
	spec.Metadata = md
	return spec, nil
}

// IgnoredOf lists what pod asks for that its sandbox does without, each with why: fields that
// give the sandbox nothing it could use against the host, so that refusing them would only
// turn away Pods made by controllers that set them (agent-sandbox's SandboxTemplate sets
// dnsConfig, a Pod's template restartPolicy Always). The node reports them in one Pod event at
// create (docs/kubernetes.md#what-a-node-ignores); what would give a sandbox more than airlock
// grants (host paths and namespaces, host ports, other volumes) is refused by SpecOf instead.
func IgnoredOf(pod *corev1.Pod) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	s := pod.Spec
	if s.RestartPolicy != "" && s.RestartPolicy != corev1.RestartPolicyNever {
		add("restartPolicy %s (a sandbox is not restarted: its agent's exit ends the Pod)", s.RestartPolicy)
	}
	if s.DNSConfig != nil || s.DNSPolicy == corev1.DNSNone {
		add("dnsConfig (a sandbox's DNS is its network policy's, annotation %s)", kubeapi.AnnotationNetwork)
	}
	if len(s.HostAliases) > 0 || s.Hostname != "" || s.Subdomain != "" {
		add("hostAliases, hostname and subdomain (a sandbox has no pod network)")
	}
	if s.SecurityContext != nil && !reflect.DeepEqual(*s.SecurityContext, corev1.PodSecurityContext{}) {
		add("the Pod's securityContext (a sandbox runs as airlock's unprivileged user, annotation %s field user)", kubeapi.AnnotationSpec)
	}
	if len(s.ImagePullSecrets) > 0 {
		add("imagePullSecrets (images come from the registries the operator approved)")
	}
	for _, v := range s.Volumes {
		switch {
		case v.Projected != nil:
			add("volume %s (the service-account token is not mounted: nothing in a sandbox talks to the apiserver)", v.Name)
		case v.EmptyDir != nil:
			add("volume %s (not mounted: the sandbox's own filesystem is writable, within its ephemeral-storage)", v.Name)
		}
	}
	for _, c := range s.Containers {
		if len(c.Ports) > 0 {
			add("container %s ports (a sandbox has no pod network)", c.Name)
		}
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil || c.Lifecycle != nil {
			add("container %s probes and lifecycle hooks (a sandbox is ready while it lives)", c.Name)
		}
		if c.SecurityContext != nil {
			add("container %s securityContext (a sandbox runs unprivileged, with airlock's seccomp and no capabilities on the host)", c.Name)
		}
	}
	return out
}

// limitsOf sets r from a container's limits (its requests when it has no limit): cpu in
// vCPUs, memory in MiB, ephemeral-storage as the writable layer's size. Above airlock's maxima
// the create is refused with the field named, and the Pod fails with it.
func limitsOf(req corev1.ResourceRequirements, r *api.Resources) error {
	pick := func(name corev1.ResourceName) (q int64, milli int64, ok bool) {
		v, ok := req.Limits[name]
		if !ok {
			v, ok = req.Requests[name]
		}
		if !ok {
			return 0, 0, false
		}
		return v.Value(), v.MilliValue(), true
	}
	if _, m, ok := pick(corev1.ResourceCPU); ok {
		r.CPU = api.VCPU(float64(m) / 1000)
	}
	if b, _, ok := pick(corev1.ResourceMemory); ok {
		r.MemoryMB = mib(b)
	}
	if b, _, ok := pick(corev1.ResourceEphemeralStorage); ok {
		r.DiskMB = mib(b)
	}
	for name := range req.Limits {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		default:
			return podErr("UnsupportedResource", "resource %s: an airlock sandbox is limited in cpu, memory and ephemeral-storage", name)
		}
	}
	return nil
}

// mib rounds bytes up to MiB.
func mib(b int64) int64 { return (b + (1<<20 - 1)) >> 20 }

// strictJSON decodes s into v, refusing unknown fields and trailing data.
func strictJSON(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}
