package node

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/sandbox"
)

func pod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	rc := "airlock-process"
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RuntimeClassName: &rc,
			Containers:       []corev1.Container{{Name: "agent", Image: "python:3.12-slim", Command: []string{"python3"}, Args: []string{"-c", "print(1)"}}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestSpecOf(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		reason string // the PodError's, "" when the Pod is a sandbox
		check  func(*testing.T, sandbox.Spec)
	}{
		{name: "image and command", pod: pod(), check: func(t *testing.T, s sandbox.Spec) {
			if s.Isolation != "process" || s.Image != "python:3.12-slim" || s.Agent == nil || strings.Join(s.Agent.Command, " ") != "python3 -c print(1)" {
				t.Errorf("spec %+v", s)
			}
			if s.Metadata[MetaNamespace] != "ns" || s.Metadata[MetaPod] != "p" || s.Metadata[MetaUID] != "uid-1" || s.Metadata[MetaNode] != "n1" {
				t.Errorf("metadata %v", s.Metadata)
			}
		}},
		{name: "gvisor runtime", pod: pod(func(p *corev1.Pod) { rc := "airlock-gvisor"; p.Spec.RuntimeClassName = &rc }), check: func(t *testing.T, s sandbox.Spec) {
			if s.Isolation != "container" || s.Runtime != "runsc" {
				t.Errorf("level %q runtime %q", s.Isolation, s.Runtime)
			}
		}},
		{name: "host template", pod: pod(func(p *corev1.Pod) { p.Spec.Containers[0].Image = kubeapi.TemplateImagePrefix + "host" }), check: func(t *testing.T, s sandbox.Spec) {
			if s.Template != "host" || s.Image != "" {
				t.Errorf("template %q image %q", s.Template, s.Image)
			}
		}},
		{name: "limits", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"),
				corev1.ResourceMemory: resource.MustParse("300Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
		}), check: func(t *testing.T, s sandbox.Spec) {
			if s.Resources.CPU != 1.5 || s.Resources.MemoryMB != 300 || s.Resources.DiskMB != 1024 {
				t.Errorf("resources %+v", s.Resources)
			}
		}},
		{name: "network annotation", pod: pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{kubeapi.AnnotationNetwork: `{"egressPolicy":"restricted","allowedDomains":["pypi.org"]}`}
		}), check: func(t *testing.T, s sandbox.Spec) {
			if s.Network.EgressPolicy != "restricted" || len(s.Network.AllowedDomains) != 1 {
				t.Errorf("network %+v", s.Network)
			}
		}},
		{name: "env", pod: pod(func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} }), check: func(t *testing.T, s sandbox.Spec) {
			if s.Environment["A"] != "1" {
				t.Errorf("env %v", s.Environment)
			}
		}},
		{name: "no runtime class", pod: pod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = nil }), reason: "UnknownRuntimeClass"},
		{name: "another runtime class", pod: pod(func(p *corev1.Pod) { rc := "kata"; p.Spec.RuntimeClassName = &rc }), reason: "UnknownRuntimeClass"},
		{name: "two containers", pod: pod(func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) }), reason: "UnsupportedPod"},
		{name: "host network", pod: pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), reason: "UnsupportedPod"},
		{name: "host path", pod: pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}}}
		}), reason: "UnsupportedPod"},
		{name: "host port", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}), reason: "UnsupportedPod"},
		{name: "gpu", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}), reason: "UnsupportedResource"},
		{name: "sandbox ID not one", pod: pod(func(p *corev1.Pod) { p.Annotations = map[string]string{kubeapi.AnnotationSandbox: "sbx_../x"} }), reason: "InvalidAnnotation"},
		{name: "bad annotation", pod: pod(func(p *corev1.Pod) { p.Annotations = map[string]string{kubeapi.AnnotationNetwork: `{"egress":1}`} }), reason: "InvalidAnnotation"},
		{name: "spec annotation names the image", pod: pod(func(p *corev1.Pod) { p.Annotations = map[string]string{kubeapi.AnnotationSpec: `{"image":"x"}`} }), reason: "InvalidAnnotation"},
		{name: "spec annotation trailing data", pod: pod(func(p *corev1.Pod) { p.Annotations = map[string]string{kubeapi.AnnotationSpec: `{} {}`} }), reason: "InvalidAnnotation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := SpecOf(tc.pod, "n1")
			var pe *PodError
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("SpecOf: %v", err)
			case tc.reason != "" && !errors.As(err, &pe):
				t.Fatalf("SpecOf: %v, want a PodError %s", err, tc.reason)
			case tc.reason != "" && pe.Reason != tc.reason:
				t.Fatalf("SpecOf: %v, want reason %s", err, tc.reason)
			case tc.reason != "" && pe.Message == "":
				t.Fatalf("SpecOf: reason %s without a message", pe.Reason)
			}
			if tc.check != nil {
				tc.check(t, spec)
			}
		})
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb\n"},
		{"", 1, ""},
	}
	for _, tc := range tests {
		if got := string(tail([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestOfferedRuntimeClasses(t *testing.T) {
	tests := []struct {
		name   string
		levels []driver.Capabilities
		want   string
	}{
		{name: "none", want: ""},
		{name: "process and wasm", levels: []driver.Capabilities{{Level: "process", Available: true}, {Level: "wasm", Available: true}, {Level: "microvm"}},
			want: "airlock-process airlock-wasm"},
		{name: "container with runc only", levels: []driver.Capabilities{{Level: "container", Available: true, Features: []string{"runtime:runc"}}},
			want: "airlock-runc"},
		{name: "container with both", levels: []driver.Capabilities{{Level: "container", Available: true, Features: []string{"runtime:runsc", "runtime:runc"}}},
			want: "airlock-gvisor airlock-runc"},
		{name: "container unavailable", levels: []driver.Capabilities{{Level: "container", Features: []string{"runtime:runsc"}}}, want: ""},
	}
	for _, tc := range tests {
		if got := strings.Join(OfferedRuntimeClasses(tc.levels), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTenantsOf(t *testing.T) {
	tests := []struct {
		tenants Tenants
		ns      string
		want    string
		ok      bool
	}{
		{Tenants{Default: "a"}, "x", "a", true},
		{Tenants{Default: "a", ByNamespace: map[string]string{"x": "b"}}, "x", "b", true},
		{Tenants{ByNamespace: map[string]string{"x": "b"}}, "y", "", false},
		{Tenants{}, "x", "", false},
	}
	for _, tc := range tests {
		if got, ok := tc.tenants.Of(tc.ns); got != tc.want || ok != tc.ok {
			t.Errorf("%+v.Of(%q) = %q, %v; want %q, %v", tc.tenants, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}

// TestIgnoredOf: what a sandbox does without is listed, each field once; a plain Pod lists
// nothing.
func TestIgnoredOf(t *testing.T) {
	yes := true
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []string // a substring of each note, in order
	}{
		{name: "plain", pod: pod(func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever })},
		{name: "agent-sandbox's secure defaults", pod: pod(func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyAlways
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"8.8.8.8"}}
		}), want: []string{"restartPolicy Always", "dnsConfig"}},
		{name: "service account token", pod: pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}), want: []string{"volume kube-api-access-x (the service-account token", "volume scratch (not mounted"}},
		{name: "network and privileges", pod: pod(func(p *corev1.Pod) {
			p.Spec.Hostname = "h"
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes}
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			c := &p.Spec.Containers[0]
			c.Ports = []corev1.ContainerPort{{ContainerPort: 8888}}
			c.ReadinessProbe = &corev1.Probe{}
			c.SecurityContext = &corev1.SecurityContext{Privileged: &yes}
		}), want: []string{"hostname", "the Pod's securityContext", "imagePullSecrets", "container agent ports", "container agent probes", "container agent securityContext"}},
		{name: "empty pod securityContext", pod: pod(func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := IgnoredOf(tc.pod)
			if len(got) != len(tc.want) {
				t.Fatalf("IgnoredOf = %q, want %d notes with %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("note %d = %q, want one with %q", i, got[i], w)
				}
			}
		})
	}
}
