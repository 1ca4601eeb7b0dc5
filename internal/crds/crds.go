// Package crds gives access to the operator's embedded CustomResourceDefinitions:
// listing, lookup by kind, rendering and installing them with server-side apply.
package crds

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	crdbases "github.com/polycrate/polycrate-operator/config/crd"
)

// kindOrder is the order of the seed's CRD table; listings and output follow it.
var kindOrder = []string{
	"OperatorConfig", "K8sCluster", "Endpoint", "Host", "K8sApp",
	"K8sVolume", "Backup", "BackupSchedule", "Certificate", "S3Bucket",
}

// CRD is one embedded CustomResourceDefinition with its source file.
type CRD struct {
	// FileName is the file's base name in config/crd/bases.
	FileName string
	// Raw is the file as generated.
	Raw []byte
	// Object is the decoded definition.
	Object *apiextensionsv1.CustomResourceDefinition
}

// Kind is the CRD's kind, e.g. OperatorConfig.
func (c CRD) Kind() string { return c.Object.Spec.Names.Kind }

// Plural is the CRD's plural resource name.
func (c CRD) Plural() string { return c.Object.Spec.Names.Plural }

// ShortNames are the CRD's short names.
func (c CRD) ShortNames() []string { return c.Object.Spec.Names.ShortNames }

// Scope is Namespaced or Cluster.
func (c CRD) Scope() string { return string(c.Object.Spec.Scope) }

// All returns every embedded CRD in the seed's order.
func All() ([]CRD, error) {
	return load(crdbases.Bases, "bases")
}

func load(fsys fs.FS, dir string) ([]CRD, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading embedded CRDs: %w", err)
	}
	var out []CRD
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading embedded CRD %s: %w", e.Name(), err)
		}
		obj := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(bytes.TrimPrefix(raw, []byte("---\n")), obj); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD %s: %w", e.Name(), err)
		}
		out = append(out, CRD{FileName: e.Name(), Raw: raw, Object: obj})
	}
	slices.SortStableFunc(out, func(a, b CRD) int { return rank(a.Kind()) - rank(b.Kind()) })
	return out, nil
}

func rank(kind string) int {
	if i := slices.Index(kindOrder, kind); i >= 0 {
		return i
	}
	return len(kindOrder)
}

// UnknownKindError is returned by Lookup for a name that matches no kind.
type UnknownKindError struct {
	Name  string
	Valid []string
}

func (e *UnknownKindError) Error() string {
	return fmt.Sprintf("unknown kind %q; valid kinds are: %s", e.Name, strings.Join(e.Valid, ", "))
}

// Lookup finds a CRD by kind, plural, singular or short name, case-insensitively.
func Lookup(all []CRD, name string) (CRD, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, c := range all {
		names := c.Object.Spec.Names
		if n == strings.ToLower(names.Kind) || n == names.Plural || n == names.Singular ||
			slices.Contains(names.ShortNames, n) || n == c.Object.Name {
			return c, nil
		}
	}
	valid := make([]string, 0, len(all))
	for _, c := range all {
		valid = append(valid, c.Kind())
	}
	return CRD{}, &UnknownKindError{Name: name, Valid: valid}
}

// Render writes the given CRDs as one multi-document YAML stream, each document
// exactly as generated.
func Render(list []CRD) []byte {
	var b bytes.Buffer
	for _, c := range list {
		raw := c.Raw
		if !bytes.HasPrefix(raw, []byte("---")) {
			b.WriteString("---\n")
		}
		b.Write(raw)
		if !bytes.HasSuffix(raw, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
