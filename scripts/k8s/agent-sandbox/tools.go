//go:build tools

// Package tools pins the agent-sandbox controller that scripts/k8s/build.sh builds.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
