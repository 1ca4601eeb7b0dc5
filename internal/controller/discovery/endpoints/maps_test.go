package endpoints

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// An Endpoint of the initial list whose source is cached is not queued (the
// source's own initial event queues it); every other event of an Endpoint
// queues its source.
func TestEndpointToSourceSkipsInitialOfCachedSources(t *testing.T) {
	cachedSources := map[client.ObjectKey]bool{{Namespace: "ns", Name: "here"}: true}
	h := endpointToSource(v1.LabelEndpointSourceIngress, func(_ context.Context, k client.ObjectKey) bool { return cachedSources[k] })
	ep := func(source string) *v1.Endpoint {
		return &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e-" + source,
			Labels: map[string]string{v1.LabelDiscovered: "true", v1.LabelEndpointSourceIngress: source}}}
	}
	for _, c := range []struct {
		name    string
		send    func(q workqueue.TypedRateLimitingInterface[reconcile.Request])
		queued  int
		wantKey string
	}{
		{"initial list, source cached", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: ep("here"), IsInInitialList: true}, q)
		}, 0, ""},
		{"initial list, source gone (an orphan)", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: ep("gone"), IsInInitialList: true}, q)
		}, 1, "gone"},
		{"a new Endpoint, source cached", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: ep("here")}, q)
		}, 1, "here"},
		{"an update", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: ep("here"), ObjectNew: ep("here")}, q)
		}, 1, "here"},
		{"a deletion", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(context.Background(), event.DeleteEvent{Object: ep("here")}, q)
		}, 1, "here"},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		c.send(q)
		if q.Len() != c.queued {
			t.Fatalf("%s: %d queued, want %d", c.name, q.Len(), c.queued)
		}
		if c.queued == 1 {
			if got, _ := q.Get(); got.Namespace != "ns" || got.Name != c.wantKey {
				t.Fatalf("%s: queued %v, want ns/%s", c.name, got, c.wantKey)
			}
		}
		q.ShutDown()
	}
}

type withStore struct{ store toolscache.Store }

func (w withStore) GetStore() toolscache.Store { return w.store }

func TestInStore(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	_ = store.Add(&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "here"}})
	cached := inStore(withStore{store})
	if !cached(context.Background(), client.ObjectKey{Namespace: "ns", Name: "here"}) {
		t.Fatal("a stored Ingress was not found")
	}
	if cached(context.Background(), client.ObjectKey{Namespace: "ns", Name: "gone"}) || cached(context.Background(), client.ObjectKey{Namespace: "other", Name: "here"}) {
		t.Fatal("an Ingress not in the store was found")
	}
	if inStore(struct{}{})(context.Background(), client.ObjectKey{Namespace: "ns", Name: "here"}) {
		t.Fatal("without a store every Endpoint must be queued")
	}
}
