package endpoints

import (
	"testing"
	"time"

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

// settled holds a source's id annotation back while a new Endpoint's first
// sync is under way, so the ids of its hosts go in one patch.
func TestSettled(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ep := func(name string, age time.Duration, id string, ready bool) v1.Endpoint {
		e := v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		e.Status.APIID = id
		if ready {
			e.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: "APIUnavailable"}}
		}
		return e
	}
	both := map[string]bool{"a": true, "b": true}
	cases := map[string]struct {
		owned  []v1.Endpoint
		wanted map[string]bool
		want   bool
	}{
		"every host synced":                       {[]v1.Endpoint{ep("a", time.Second, "id-a", false), ep("b", time.Second, "id-b", false)}, both, true},
		"one host's first sync under way":         {[]v1.Endpoint{ep("a", time.Second, "id-a", false), ep("b", time.Second, "", false)}, both, false},
		"one host failed: it says why, it counts": {[]v1.Endpoint{ep("a", time.Second, "id-a", false), ep("b", time.Second, "", true)}, both, true},
		"one host not in the cache yet":           {[]v1.Endpoint{ep("a", time.Second, "id-a", false)}, both, false},
		"an untouched host past the window":       {[]v1.Endpoint{ep("a", time.Second, "id-a", false), ep("b", 2*settleWindow, "", false)}, both, true},
		"an Endpoint no longer wanted is ignored": {[]v1.Endpoint{ep("a", time.Second, "id-a", false), ep("old", time.Second, "", false)}, map[string]bool{"a": true}, true},
		"no hosts": {nil, map[string]bool{}, true},
	}
	for name, c := range cases {
		if got := settled(c.owned, c.wanted, now); got != c.want {
			t.Errorf("%s: settled = %v, want %v", name, got, c.want)
		}
	}
}
