package crds

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	polycratev1alpha1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// The seed's CRD table: kind → short names.
var seedKinds = map[string][]string{
	"OperatorConfig": {"oc", "opcfg"},
	"K8sCluster":     {"k8sc"},
	"Endpoint":       {"ep", "pep"},
	"Host":           nil,
	"K8sApp":         {"app", "pca"},
	"K8sVolume":      {"vol", "pvol"},
	"Backup":         {"backup"},
	"BackupSchedule": {"bs"},
	"Certificate":    {"cert", "pcert"},
	"S3Bucket":       {"s3"},
}

func TestEmbeddedCRDsMatchSeedAndScheme(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(seedKinds) {
		t.Fatalf("embedded %d CRDs, want %d", len(all), len(seedKinds))
	}
	// Every kind registered in the Go scheme has an embedded CRD and vice versa:
	// a new type without `make manifests` fails here.
	s := runtime.NewScheme()
	if err := polycratev1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var schemeKinds []string
	ours := reflect.TypeFor[polycratev1alpha1.Endpoint]().PkgPath()
	for gvk, typ := range s.AllKnownTypes() {
		if typ.PkgPath() == ours && !strings.HasSuffix(gvk.Kind, "List") {
			schemeKinds = append(schemeKinds, gvk.Kind)
		}
	}
	slices.Sort(schemeKinds)

	var embedded []string
	for i, c := range all {
		embedded = append(embedded, c.Kind())
		want, ok := seedKinds[c.Kind()]
		if !ok {
			t.Errorf("embedded CRD %s is not one of the seed's kinds", c.Kind())
			continue
		}
		if kindOrder[i] != c.Kind() {
			t.Errorf("position %d: %s, want the seed's order (%s)", i, c.Kind(), kindOrder[i])
		}
		if !slices.Equal(c.ShortNames(), want) {
			t.Errorf("%s short names %v, want %v", c.Kind(), c.ShortNames(), want)
		}
		if !slices.Contains(c.Object.Spec.Names.Categories, "polycrate") {
			t.Errorf("%s is not in category polycrate", c.Kind())
		}
		if c.Object.Spec.Group != "polycrate.io" || len(c.Object.Spec.Versions) != 1 || c.Object.Spec.Versions[0].Name != "v1alpha1" {
			t.Errorf("%s: want exactly polycrate.io/v1alpha1", c.Kind())
		}
		v := c.Object.Spec.Versions[0]
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s has no status subresource", c.Kind())
		}
		if len(v.AdditionalPrinterColumns) == 0 {
			t.Errorf("%s has no printer columns", c.Kind())
		}
		wantScope := apiextensionsv1.NamespaceScoped
		if c.Kind() == "Host" || c.Kind() == "K8sVolume" {
			wantScope = apiextensionsv1.ClusterScoped
		}
		if c.Object.Spec.Scope != wantScope {
			t.Errorf("%s scope %s, want %s", c.Kind(), c.Object.Spec.Scope, wantScope)
		}
		status := v.Schema.OpenAPIV3Schema.Properties["status"]
		conds, ok := status.Properties["conditions"]
		if !ok {
			t.Errorf("%s status has no conditions", c.Kind())
		} else if conds.XListType == nil || *conds.XListType != "map" {
			t.Errorf("%s status.conditions is not a map list keyed by type", c.Kind())
		}
	}
	slices.Sort(embedded)
	if !slices.Equal(embedded, schemeKinds) {
		t.Errorf("embedded CRDs %v differ from the scheme's kinds %v: run 'make manifests'", embedded, schemeKinds)
	}
}

func TestPrinterColumnsFollowSeed(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	// From the seed's kubectl outputs.
	want := map[string][]string{
		"K8sApp":      {"Block", "Version", "Artifacts", "Phase", "Age"},
		"Certificate": {"Issuer", "Ready", "Status", "Sync", "API_ID"},
		"K8sCluster":  {"Phase"},
	}
	for kind, cols := range want {
		c, err := Lookup(all, kind)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, col := range c.Object.Spec.Versions[0].AdditionalPrinterColumns {
			names = append(names, col.Name)
		}
		for _, w := range cols {
			if !slices.Contains(names, w) {
				t.Errorf("%s printer columns %v lack %s", kind, names, w)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"OperatorConfig", "OperatorConfig"},
		{"operatorconfig", "OperatorConfig"},
		{"operatorconfigs", "OperatorConfig"},
		{"oc", "OperatorConfig"},
		{"opcfg", "OperatorConfig"},
		{"pep", "Endpoint"},
		{"endpoints.polycrate.io", "Endpoint"},
		{"pcert", "Certificate"},
		{"s3", "S3Bucket"},
		{" Host ", "Host"},
		{"bs", "BackupSchedule"},
	} {
		c, err := Lookup(all, tc.in)
		if err != nil {
			t.Errorf("Lookup(%q): %v", tc.in, err)
			continue
		}
		if c.Kind() != tc.want {
			t.Errorf("Lookup(%q) = %s, want %s", tc.in, c.Kind(), tc.want)
		}
	}
	for _, bad := range []string{"Organization", "", "ingress", "polycrate"} {
		_, err := Lookup(all, bad)
		var uk *UnknownKindError
		if !errors.As(err, &uk) {
			t.Fatalf("Lookup(%q) error %v, want UnknownKindError", bad, err)
		}
		for k := range seedKinds {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("error for %q does not list valid kind %s: %v", bad, k, err)
			}
		}
	}
}

func TestRenderRoundTrips(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(Render(all), []byte("\n---\n"))
	if len(docs) != len(all) {
		t.Fatalf("rendered %d documents, want %d", len(docs), len(all))
	}
	for i, d := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(bytes.TrimPrefix(d, []byte("---\n")), crd); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if crd.Name != all[i].Object.Name {
			t.Errorf("document %d is %s, want %s", i, crd.Name, all[i].Object.Name)
		}
	}
}

// Discovery leaves a spec field at its default out of its applies
// (appliedSpec): the Go constants must be the defaults the CRD declares, or the
// API server would fill in another value than discovery means.
func TestEndpointDefaultsAreTheCRDs(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := Lookup(all, "Endpoint")
	if err != nil {
		t.Fatal(err)
	}
	spec := ep.Object.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for field, want := range map[string]string{
		"remotePort":          fmt.Sprint(polycratev1alpha1.DefaultEndpointPort),
		"kind":                fmt.Sprintf("%q", polycratev1alpha1.DefaultEndpointKind),
		"tls":                 fmt.Sprint(polycratev1alpha1.DefaultEndpointTLS),
		"path":                fmt.Sprintf("%q", polycratev1alpha1.DefaultEndpointPath),
		"timeout":             fmt.Sprint(polycratev1alpha1.DefaultEndpointTimeout),
		"interval":            fmt.Sprint(polycratev1alpha1.DefaultEndpointInterval),
		"expectedStatusCodes": fmt.Sprintf("[%d]", polycratev1alpha1.DefaultEndpointStatusCode),
	} {
		d := spec[field].Default
		if d == nil || string(d.Raw) != want {
			t.Errorf("the CRD's default of spec.%s is %v, the Go constant %s", field, d, want)
		}
	}
}
