//go:build tools

// Package tools pins the Kubernetes control plane that scripts/k8s/build.sh builds: the
// replaces in go.mod point k8s.io/kubernetes's staging modules at their published versions.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
