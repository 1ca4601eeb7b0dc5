package apisync

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// BenchmarkEndpointPayloadHash is the per-object cost of change detection: map the
// CR to the API request and hash it (run on every reconcile, also the no-op ones).
func BenchmarkEndpointPayloadHash(b *testing.B) {
	ep := &v1.Endpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-example-com", Labels: map[string]string{v1.LabelDiscovered: v1.LabelValueTrue}},
		Spec: v1.EndpointSpec{RemoteAddress: "api.example.com", RemotePort: 443, Path: "/health", TLS: ptr.To(true),
			Timeout: 10, Interval: 60, ExpectedStatusCodes: []int32{200, 204}, ExpectedBody: "ok"},
	}
	snap := &liveconfig.Snapshot{LocalClusterID: "0b9d1c1e-1111-4222-8333-444455556666"}
	a := endpointAdapter(nil)
	first := ""
	b.ReportAllocs()
	for b.Loop() {
		p, err := a.Payload(ep, snap, polycrate.EndpointRequest{})
		if err != nil {
			b.Fatal(err)
		}
		h := Hash(p)
		if first == "" {
			first = h
		} else if h != first {
			b.Fatalf("hash not stable: %s != %s", h, first)
		}
	}
}
