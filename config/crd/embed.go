// Package crd embeds the generated CustomResourceDefinitions of config/crd/bases,
// so the binary carries exactly what `make manifests` generated: one source of truth.
package crd

import "embed"

// Bases holds config/crd/bases/*.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS
