package endpoints

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// A source's Endpoints are applied at once: the applies of an Ingress with three
// hosts are in flight together (one after another, discovery's round trips held
// a convergence at the seed's 4 workers). Each apply waits until all three have
// arrived; applied in turn, the first would wait in vain and the test fails.
// An apply that fails still fails the reconcile, after the others ended.
func TestApplyEndpointsAtOnce(t *testing.T) {
	const hosts = 3
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID("u-web"),
		Annotations: map[string]string{annotations.Monitor: "true"}}}
	for i := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: fmt.Sprintf("h%d.example.com", i)})
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, failOne := range []bool{false, true} {
		t.Run(fmt.Sprintf("failing=%v", failOne), func(t *testing.T) {
			var mu sync.Mutex
			arrived, all := 0, make(chan struct{})
			var applied []string
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ing.DeepCopy()).
				WithIndex(&v1.Endpoint{}, IndexEndpointSource, endpointSourceKeys).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, ok := obj.(*metav1.PartialObjectMetadata); !ok || patch.Type() != types.ApplyPatchType {
						return cl.Patch(ctx, obj, patch, opts...) // the Ingress's finalizer and annotations
					}
					mu.Lock()
					if arrived++; arrived == hosts {
						close(all)
					}
					mu.Unlock()
					select {
					case <-all:
					case <-time.After(10 * time.Second):
						return fmt.Errorf("apply of %s: the other applies never came while it was in flight", obj.GetName())
					}
					mu.Lock()
					defer mu.Unlock()
					applied = append(applied, obj.GetName())
					if failOne && obj.GetName() == endpointName("h1.example.com") {
						return fmt.Errorf("the API server refused %s", obj.GetName())
					}
					return nil
				}}).Build()
			store := &liveconfig.Store{}
			store.Set(&liveconfig.Snapshot{})
			r := &SourceReconciler{Deps: controller.Deps{Client: c, Config: store, Recorder: events.NewFakeRecorder(10), Log: logr.Discard()},
				Inspector: Ingresses}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}})
			if failOne != (err != nil) {
				t.Fatalf("reconcile: %v (an apply failed: %v)", err, failOne)
			}
			if len(applied) != hosts {
				t.Fatalf("applied %v, want all %d hosts' Endpoints", applied, hosts)
			}
		})
	}
}
