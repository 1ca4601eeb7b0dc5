//go:build tools

// Package tools pins the build tools (controller-gen) in their own module, so that
// their dependencies never change the operator's own Kubernetes versions.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
