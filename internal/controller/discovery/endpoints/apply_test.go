package endpoints

import (
	"reflect"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

// sameSpec and sameOwners answer as equality.Semantic.DeepEqual does, and
// every field counts: each field of the spec (and of an owner reference) is
// changed in turn, by reflection, so a field added to the type and not to the
// comparison fails here.
func TestSameSpecComparesEveryField(t *testing.T) {
	tls, ctl := true, true
	spec := v1.EndpointSpec{DisplayName: "a", RemoteAddress: "a.example", RemotePort: 443, Kind: "http", TLS: &tls, Path: "/",
		Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}, ExpectedBody: "ok", K8sAppName: "shop"}
	owner := metav1.OwnerReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web", UID: "u", Controller: &ctl, BlockOwnerDeletion: &ctl}
	changeEach(t, spec, func(a, b v1.EndpointSpec) (bool, bool) {
		return sameSpec(&a, &b), equality.Semantic.DeepEqual(a, b)
	})
	changeEach(t, owner, func(a, b metav1.OwnerReference) (bool, bool) {
		return sameOwners([]metav1.OwnerReference{a}, []metav1.OwnerReference{b}), equality.Semantic.DeepEqual(a, b)
	})
	// A nil and an empty list are equal, as for equality.Semantic.
	a, b := spec, spec
	a.ExpectedStatusCodes, b.ExpectedStatusCodes = nil, []int32{}
	if !sameSpec(&a, &b) || !equality.Semantic.DeepEqual(a, b) {
		t.Fatal("a nil and an empty list of status codes differ")
	}
	if sameOwners(nil, []metav1.OwnerReference{owner}) || !sameOwners(nil, []metav1.OwnerReference{}) {
		t.Fatal("owner lists of different lengths compare equal, or nil and empty differ")
	}
}

// changeEach changes each field of base in turn (and, for a pointer, sets it
// nil) and requires cmp to find them different — ours and
// equality.Semantic's alike — and base equal to itself.
func changeEach[T any](t *testing.T, base T, cmp func(a, b T) (ours, semantic bool)) {
	t.Helper()
	if ours, sem := cmp(base, base); !ours || !sem {
		t.Fatalf("%T equal to itself: ours %t, semantic %t", base, ours, sem)
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		variants := []T{}
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "-other")
		case reflect.Int32, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Pointer:
			other := reflect.New(f.Type().Elem())
			other.Elem().Set(reflect.ValueOf(!f.Elem().Bool()))
			withNil := base
			reflect.ValueOf(&withNil).Elem().Field(i).SetZero()
			variants = append(variants, withNil)
			f.Set(other)
		case reflect.Slice:
			f.Set(reflect.Append(reflect.ValueOf(reflect.ValueOf(base).Field(i).Interface()), reflect.New(f.Type().Elem()).Elem()))
		default:
			t.Fatalf("%s.%s: a %s field this test cannot change: teach it", typ.Name(), typ.Field(i).Name, f.Kind())
		}
		for _, v := range append(variants, changed) {
			if ours, sem := cmp(base, v); ours || sem {
				t.Errorf("%s.%s changed: ours says equal %t, semantic %t; want both false", typ.Name(), typ.Field(i).Name, ours, sem)
			}
		}
	}
}
