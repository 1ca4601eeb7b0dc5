package endpoints_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/endpoints"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// TestSweepOnce: the safety net deletes exactly the discovered Endpoints whose
// source is gone (an Ingress, an HTTPRoute whose kind is not even installed).
func TestSweepOnce(t *testing.T) {
	ep := func(name string, labels map[string]string) *v1.Endpoint {
		return &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels},
			Spec: v1.EndpointSpec{RemoteAddress: name + ".example.com"}}
	}
	discovered := func(label, source string) map[string]string {
		return map[string]string{v1.LabelDiscovered: "true", label: source}
	}
	c := fake.NewClientBuilder().WithScheme(testutil.Scheme()).WithObjects(
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "live"}},
		ep("live", discovered(v1.LabelEndpointSourceIngress, "live")),
		ep("ghost", discovered(v1.LabelEndpointSourceIngress, "ghost")),
		ep("ghost-route", discovered(v1.LabelEndpointSourceHTTPRoute, "gone")),
		ep("manual", nil),
	).Build()
	s := &endpoints.Sweep{Deps: controller.Deps{Client: c, Log: logr.Discard()}, Reader: c}
	n, err := s.Once(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("swept %d (%v), want 2", n, err)
	}
	list := &v1.EndpointList{}
	if err := c.List(context.Background(), list, client.InNamespace("shop")); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range list.Items {
		left = append(left, e.Name)
	}
	if len(left) != 2 || left[0] != "live" || left[1] != "manual" {
		t.Fatalf("left %v, want [live manual]", left)
	}
}

// countingReader records the keys read through it (the uncached reads).
type countingReader struct {
	client.Reader
	keys []string
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.keys = append(r.keys, key.Name)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestSweepReadsTheCacheFirst: the sweep asks the API server only about the
// sources the cache does not have, once per source — not once per Endpoint (at
// 40,000 Endpoints that was 40,000 GETs per interval). A source the cache
// trails is confirmed by the uncached read and kept.
func TestSweepReadsTheCacheFirst(t *testing.T) {
	ep := func(name, source string) *v1.Endpoint {
		return &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
			Labels: map[string]string{v1.LabelDiscovered: "true", v1.LabelEndpointSourceIngress: source}}}
	}
	ing := func(name string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	}
	cache := fake.NewClientBuilder().WithScheme(testutil.Scheme()).WithObjects(
		ing("live"), ep("live-a", "live"), ep("live-b", "live"),
		ep("ghost-a", "ghost"), ep("ghost-b", "ghost"), ep("lagging", "new"),
	).Build()
	api := &countingReader{Reader: fake.NewClientBuilder().WithScheme(testutil.Scheme()).WithObjects(ing("live"), ing("new")).Build()}
	s := &endpoints.Sweep{Deps: controller.Deps{Client: cache, Log: logr.Discard()}, Reader: api}
	n, err := s.Once(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("swept %d (%v), want 2 (ghost-a, ghost-b)", n, err)
	}
	if len(api.keys) != 2 || api.keys[0] == "live" || api.keys[1] == "live" {
		t.Fatalf("uncached reads %v, want one each for ghost and new, none for live", api.keys)
	}
	list := &v1.EndpointList{}
	if err := cache.List(context.Background(), list, client.InNamespace("shop")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d Endpoints left, want live-a, live-b, lagging", len(list.Items))
	}
}
