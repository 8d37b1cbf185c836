package kubeapi

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRuntimeClassObjects(t *testing.T) {
	for _, rc := range RuntimeClasses {
		o := RuntimeClassObject(rc)
		if o.Name != rc.Name || o.Handler != rc.Name {
			t.Errorf("%s: name %q handler %q", rc.Name, o.Name, o.Handler)
		}
		if o.Scheduling == nil || o.Scheduling.NodeSelector[RuntimeLabelPrefix+rc.Name] != "true" {
			t.Errorf("%s: its Pods are not sent to the nodes that offer it: %+v", rc.Name, o.Scheduling)
			continue
		}
		if !slices.ContainsFunc(o.Scheduling.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == TaintKey }) {
			t.Errorf("%s: its Pods do not tolerate the airlock taint", rc.Name)
		}
		if got, ok := LookupRuntimeClass(rc.Name); !ok || got != rc {
			t.Errorf("LookupRuntimeClass(%q) = %+v, %v", rc.Name, got, ok)
		}
	}
	if _, ok := LookupRuntimeClass("runc"); ok {
		t.Errorf("LookupRuntimeClass(runc): a class that is not airlock's")
	}
}

func TestNodeClusterRoleIsNarrow(t *testing.T) {
	for _, r := range NodeClusterRole().Rules {
		for _, res := range r.Resources {
			if res == "secrets" && slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
				t.Errorf("the node may %v secrets: it only reads them", r.Verbs)
			}
			if res == "*" || slices.Contains(r.Verbs, "*") {
				t.Errorf("a wildcard in the node's role: %+v", r)
			}
		}
	}
}
