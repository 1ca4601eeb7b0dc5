package monitoring

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// TestConflictsAreRetriedRateLimitedFromAFreshRead: a status write that
// conflicts (the cached copy is stale: watches cut, etcd compacting) is tried
// again after the backoff, from a fresh read — never at once against the same
// stale copy (9,796 rejected writes, up to 361 a second, in the chaos run).
func TestConflictsAreRetriedRateLimitedFromAFreshRead(t *testing.T) {
	ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: v1.EndpointSpec{RemoteAddress: "web.example.com"}, Status: v1.EndpointStatus{APIID: "e1", Phase: "synced"}}
	var patches, freshReads atomic.Int64
	var conflicting atomic.Bool
	conflicting.Store(true)
	c := fake.NewClientBuilder().WithScheme(benchScheme()).WithStatusSubresource(&v1.Endpoint{}).WithObjects(ep).
		WithIndex(&v1.Endpoint{}, apisync.IndexAPIID, apiIDIndex).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object,
			patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches.Add(1)
			if conflicting.Load() {
				return apierrors.NewConflict(schema.GroupResource{Group: "polycrate.io", Resource: "endpoints"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	reader := interceptor.NewClient(fake.NewClientBuilder().WithScheme(benchScheme()).WithObjects(ep.DeepCopy()).Build(),
		interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			freshReads.Add(1)
			return c.Get(ctx, key, obj, opts...)
		}})
	w := newStatusWriter(controller.Deps{Client: c, Recorder: events.NewFakeRecorder(16), Log: logr.Discard()})
	w.Reader = reader
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)

	target := probe.Target{ID: "e1", Kind: "http", Address: "web.example.com", Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Interval: 1}}}
	w.record(target, probe.Outcome{Result: polycrate.CheckResult{StatusCode: polycrate.Ptr(200)}})
	// Checks go on (one a second would be the shortest interval; here faster still).
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		w.record(target, probe.Outcome{Result: polycrate.CheckResult{StatusCode: polycrate.Ptr(200)}})
		time.Sleep(20 * time.Millisecond)
	}
	if n := patches.Load(); n != 1 {
		t.Fatalf("%d status writes within 2 s of a conflict; want the first alone (the retry waits for the backoff)", n)
	}
	// The retry comes after the backoff, from a fresh read, and lands.
	conflicting.Store(false)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*controller.BaseDelay, true, func(ctx context.Context) (bool, error) {
		got := &v1.Endpoint{}
		return c.Get(ctx, client.ObjectKeyFromObject(ep), got) == nil && got.Status.Monitoring != nil, nil
	}); err != nil {
		t.Fatalf("the status was never written after the conflict (%d writes)", patches.Load())
	}
	if freshReads.Load() == 0 {
		t.Fatal("the retry compared against the cached copy, not a fresh read")
	}
	if n := patches.Load(); n != 2 {
		t.Fatalf("%d status writes; want the first and one retry", n)
	}
}
