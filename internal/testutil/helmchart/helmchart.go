// Package helmchart renders the operator's Helm chart with Helm's Go library, as
// `helm template` would, for the chart tests (test/chart) and the alert and
// dashboard tests (test/promql).
package helmchart

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// Release and Namespace are the release the tests render.
const (
	Release   = "polycrate-operator"
	Namespace = "polycrate"
)

// Load reads the chart from config/helm/polycrate-operator.
func Load() (*chart.Chart, error) {
	return loader.Load(filepath.Join(testutil.RepoRoot(), "config", "helm", "polycrate-operator"))
}

// Files renders every template of ch with values (validated against
// values.schema.json), by template path.
func Files(ch *chart.Chart, values map[string]any) (map[string]string, error) {
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: Release, Namespace: Namespace, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}

// Objects renders ch with values and decodes every YAML document, in template order.
func Objects(ch *chart.Chart, values map[string]any) ([]*unstructured.Unstructured, error) {
	files, err := Files(ch, values)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[n], "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
				continue
			}
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				return nil, err
			}
			if len(m) == 0 {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

// OperatorSA is the chart's ServiceAccount as the API server sees the operator
// running under it (for impersonation: what the chart's RBAC grants is then all
// the operator may do).
var OperatorSA = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + Namespace + ":" + Release,
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"}}

// ApplyRBAC creates the roles and bindings among objs (a namespaced one without
// namespace in Namespace) and returns how many.
func ApplyRBAC(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (int, error) {
	n := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if o.GetNamespace() == "" && (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") {
				o.SetNamespace(Namespace)
			}
			if err := c.Create(ctx, o); err != nil {
				return n, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			n++
		}
	}
	return n, nil
}
