// Package metasecret reads the meta-Secrets the Polycrate CLI writes after an
// action (seed 002 "K8sApp Discovery: Deployed Blocks → API").
//
// Neither the seeds nor the published API documents show the Secret's own layout.
// What this package accepts is the project's reading of the CLI's format, written
// down in docs/k8sapps.md ("The meta-Secret"); if the CLI writes it differently,
// this file is the one place to change. Parsing is strict: a missing or unknown
// field, a wrong enum value or a bad timestamp is an error naming the problem, and
// the caller creates nothing from such a Secret.
package metasecret

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Suffix marks a meta-Secret's name: "<block>.poly".
const Suffix = ".poly"

// Key is the one data key of a meta-Secret: a YAML (or JSON) document.
const Key = "block.poly"

// MaxSize bounds the document (a block's metadata is a few hundred bytes).
const MaxSize = 64 * 1024

// Meta is a parsed meta-Secret.
type Meta struct {
	Block     Block     `json:"block"`
	Workspace Workspace `json:"workspace"`
	Action    Action    `json:"action"`
}

// Block is the deployed block.
type Block struct {
	Name        string `json:"name"`
	DisplayName string `json:"display_name,omitempty"`
	// Kind is the app kind in the API: helm or polycrate.
	Kind       string `json:"kind"`
	Version    string `json:"version,omitempty"`
	AppVersion string `json:"app_version,omitempty"`
	From       string `json:"from,omitempty"`
	Type       string `json:"type,omitempty"`
	Flavor     string `json:"flavor,omitempty"`
	Chart      *Chart `json:"chart,omitempty"`
}

// Chart is the Helm chart the block installs.
type Chart struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	RepoURL string `json:"repo_url,omitempty"`
}

// Workspace is the Polycrate workspace the block belongs to.
type Workspace struct {
	Name         string `json:"name"`
	Organization string `json:"organization"`
}

// Action is the last action the CLI ran for the block.
type Action struct {
	Name           string    `json:"name"`
	Status         string    `json:"status"`
	LastExecutedAt time.Time `json:"last_executed_at"`
}

// Kinds and action statuses the format allows.
var (
	Kinds          = []string{"helm", "polycrate"}
	ActionStatuses = []string{"success", "running", "failed"}
	dns1123Label   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	errNotMeta     = errors.New("not a meta-Secret")
)

// IsMetaSecret reports whether a Secret's name marks it as a meta-Secret.
func IsMetaSecret(name string) bool {
	return strings.HasSuffix(name, Suffix) && len(name) > len(Suffix)
}

// AppName is the K8sApp a meta-Secret describes: its name without ".poly".
func AppName(secretName string) string { return strings.TrimSuffix(secretName, Suffix) }

// SecretName is the meta-Secret of an app.
func SecretName(app string) string { return app + Suffix }

// Parse reads a meta-Secret's data strictly.
func Parse(secretName string, data map[string][]byte) (*Meta, error) {
	if !IsMetaSecret(secretName) {
		return nil, fmt.Errorf("%w: the name %q does not end in %q", errNotMeta, secretName, Suffix)
	}
	raw, ok := data[Key]
	if !ok {
		return nil, fmt.Errorf("data key %q is missing", Key)
	}
	for k := range data {
		if k != Key {
			return nil, fmt.Errorf("unexpected data key %q (a meta-Secret holds only %q)", k, Key)
		}
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("data key %q is empty", Key)
	}
	if len(raw) > MaxSize {
		return nil, fmt.Errorf("data key %q is %d bytes, more than %d", Key, len(raw), MaxSize)
	}
	m := &Meta{}
	if err := yaml.UnmarshalStrict(raw, m); err != nil {
		return nil, fmt.Errorf("%s is not a valid document: %v", Key, err)
	}
	if err := m.validate(AppName(secretName)); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Meta) validate(app string) error {
	var problems []string
	req := func(field, v string) {
		if strings.TrimSpace(v) == "" {
			problems = append(problems, field+" is required")
		}
	}
	req("block.name", m.Block.Name)
	if m.Block.Name != "" && m.Block.Name != app {
		problems = append(problems, fmt.Sprintf("block.name %q does not match the Secret's name (%q)", m.Block.Name, SecretName(app)))
	}
	if m.Block.Name != "" && !dns1123Label.MatchString(m.Block.Name) {
		problems = append(problems, fmt.Sprintf("block.name %q is not a DNS-1123 label", m.Block.Name))
	}
	if !oneOf(m.Block.Kind, Kinds) {
		problems = append(problems, fmt.Sprintf("block.kind %q is not one of %s", m.Block.Kind, strings.Join(Kinds, ", ")))
	}
	if m.Block.Chart != nil {
		req("block.chart.name", m.Block.Chart.Name)
	}
	req("workspace.name", m.Workspace.Name)
	req("workspace.organization", m.Workspace.Organization)
	req("action.name", m.Action.Name)
	if !oneOf(m.Action.Status, ActionStatuses) {
		problems = append(problems, fmt.Sprintf("action.status %q is not one of %s", m.Action.Status, strings.Join(ActionStatuses, ", ")))
	}
	if m.Action.LastExecutedAt.IsZero() {
		problems = append(problems, "action.last_executed_at is required (RFC 3339)")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// Installation is the installation state the seed's table derives from the last
// action; an action other than install/uninstall, or a combination the table does
// not list, sets no flag.
type Installation struct {
	Installed, Running, Failed, Uninstalled bool
}

// InstallationOf derives it (seed 002 "Installation-Status Ableitung").
func InstallationOf(a Action) Installation {
	switch {
	case a.Name == "install" && a.Status == "success":
		return Installation{Installed: true}
	case a.Name == "install" && a.Status == "running":
		return Installation{Running: true}
	case a.Name == "install" && a.Status == "failed":
		return Installation{Failed: true}
	case a.Name == "uninstall" && a.Status == "success":
		return Installation{Uninstalled: true}
	}
	return Installation{}
}
