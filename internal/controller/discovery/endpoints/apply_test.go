package endpoints

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
)

// upToDate decides whether an apply is skipped: only when the cached Endpoint is
// exactly what the apply would declare.
func TestUpToDate(t *testing.T) {
	src := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "ing-uid"}}
	gvk := networkingv1.SchemeGroupVersion.WithKind("Ingress")
	check := annotations.Settings{}.For("shop.example.com", annotations.Source{})
	want := desiredEndpoint(src, gvk, v1.LabelEndpointSourceIngress, check, annotations.Settings{K8sAppName: "shop"})
	if want.Spec.Path != "/" || want.Spec.RemotePort != 443 || *want.Spec.TLS != true || len(want.Spec.ExpectedStatusCodes) != 1 {
		t.Fatalf("desired spec without the defaults: %+v", want.Spec)
	}
	cases := map[string]struct {
		edit func(e *v1.Endpoint)
		want bool
	}{
		"identical":               {func(*v1.Endpoint) {}, true},
		"a foreign label is kept": {func(e *v1.Endpoint) { e.Labels["team"] = "a" }, true},
		"spec differs":            {func(e *v1.Endpoint) { e.Spec.Path = "/health" }, false},
		"app name differs":        {func(e *v1.Endpoint) { e.Spec.K8sAppName = "" }, false},
		"finalizer missing":       {func(e *v1.Endpoint) { e.Finalizers = nil }, false},
		"owned by another source": {func(e *v1.Endpoint) { e.OwnerReferences[0].Name = "other" }, false},
		"other source's label":    {func(e *v1.Endpoint) { e.Labels[v1.LabelEndpointSourceHTTPRoute] = "route" }, false},
		"source label missing":    {func(e *v1.Endpoint) { delete(e.Labels, v1.LabelEndpointSourceIngress) }, false},
	}
	for name, c := range cases {
		have := want.DeepCopy()
		c.edit(have)
		if got := upToDate(have, want, v1.LabelEndpointSourceIngress); got != c.want {
			t.Errorf("%s: upToDate = %v, want %v", name, got, c.want)
		}
	}
}
