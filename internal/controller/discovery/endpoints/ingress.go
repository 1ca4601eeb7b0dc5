// Package discovery turns cluster sources into the operator's CRs. Discovery never
// calls the Polycrate API: it declares CRs with server-side apply, and the sync
// controllers take them from there.
package endpoints

import (
	"context"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// Annotations the operator writes on a source ("3. Annotate (id, synced-at)").
const (
	AnnotationAPIIDs   = "endpoints.polycrate.io/api-ids"
	AnnotationSyncedAt = "endpoints.polycrate.io/synced-at"
	// legacyIngressClass is the pre-IngressClass annotation.
	legacyIngressClass = "kubernetes.io/ingress.class"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;patch;update

// Ingresses reads Ingresses; an Ingress yields a host to an HTTPRoute.
var Ingresses = &Inspector{Kind: "Ingress", Label: v1.LabelEndpointSourceIngress, Finalizer: v1.FinalizerIngressDiscovery,
	Priority: 0, Example: &networkingv1.Ingress{}, Inspect: inspectIngress}

// inspectIngress applies ingress_classes and returns the rules' hosts (wildcards skipped).
func inspectIngress(_ context.Context, _ client.Client, obj client.Object, snap *liveconfig.Snapshot) (bool, []Host, error) {
	ing := obj.(*networkingv1.Ingress)
	if classes := snap.Spec.EndpointDiscovery.IngressClasses; len(classes) > 0 {
		class := ing.Annotations[legacyIngressClass]
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		}
		if !slices.Contains(classes, class) {
			return false, nil, nil
		}
	}
	var hosts []Host
	seen := map[string]bool{}
	for _, rule := range ing.Spec.Rules {
		h := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(rule.Host), "."))
		if h != "" && !strings.HasPrefix(h, "*") && !seen[h] {
			seen[h] = true
			hosts = append(hosts, Host{Name: h})
		}
	}
	return true, hosts, nil
}

// IngressDiscovery is Ingress → Endpoint discovery.
type IngressDiscovery struct{ *SourceReconciler }

// SetupWithManager registers the Endpoint source index (HTTPRoute discovery uses
// it too) and watches Ingresses, their Endpoints (for the source annotations),
// and configuration changes (which re-queue every Ingress).
func (d IngressDiscovery) SetupWithManager(mgr manager.Manager) error {
	r := d.SourceReconciler
	if err := IndexEndpoints(context.Background(), mgr); err != nil {
		return err
	}
	// The Ingress informer is made now, so that it lists with the cache's
	// others when the manager starts: a watch's informer is otherwise made
	// when its controller starts, after the cache synced — at 20,000
	// Ingresses their list came 1.3 s after the Endpoints' instead of beside
	// it, on every restart (docs/performance.md). Before the cache starts
	// this does not wait.
	ingresses, err := mgr.GetCache().GetInformer(context.Background(), &networkingv1.Ingress{})
	if err != nil {
		return err
	}
	waker := controller.NewWaker()
	if err := waker.WakeOnConfigChange(mgr, r.Config, func(ctx context.Context) ([]client.Object, error) {
		return controller.CachedObjects(ctx, mgr.GetCache(), &networkingv1.Ingress{})
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("discovery-ingress").
		For(&networkingv1.Ingress{}).
		Watches(&v1.Endpoint{}, endpointToSource(v1.LabelEndpointSourceIngress, inStore(ingresses))).
		WatchesRawSource(waker.Source()).
		WithOptions(r.Options()).
		Complete(r)
}

// endpointToSource maps an Endpoint to the source named by its label. With
// cached (nil: none), an Endpoint of the initial list — the controller's start,
// every restart — whose source is cached is not queued: that source's own
// event of the initial list queues it, and its pass covers all its Endpoints
// (they are cached: the workers start after every store synced). At 20,000
// Ingresses these were 40,000 handler calls and queue adds on every restart,
// for the 20,000 sources already queued. An Endpoint whose source is not
// cached is queued: a source deleted while the operator was down leaves
// orphans, and that pass deletes them (orphaned).
func endpointToSource(label string, cached func(context.Context, client.ObjectKey) bool) handler.EventHandler {
	mapped := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[label]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	if cached == nil {
		return mapped
	}
	return skipInitialOfCached{EventHandler: mapped, label: label, cached: cached}
}

// skipInitialOfCached is endpointToSource's handler with a source cache.
type skipInitialOfCached struct {
	handler.EventHandler
	label  string
	cached func(context.Context, client.ObjectKey) bool
}

func (h skipInitialOfCached) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if name := e.Object.GetLabels()[h.label]; e.IsInInitialList && name != "" &&
		h.cached(ctx, client.ObjectKey{Namespace: e.Object.GetNamespace(), Name: name}) {
		return
	}
	h.EventHandler.Create(ctx, e, q)
}

// inStore says whether an informer's store holds an object: a lookup in its
// map (a Get through the cache resolves the kind and copies the struct, and
// cost more than the queue add it saves). Without a store to read it says no:
// every Endpoint is queued.
func inStore(inf any) func(context.Context, client.ObjectKey) bool {
	s, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return func(context.Context, client.ObjectKey) bool { return false }
	}
	store := s.GetStore()
	return func(_ context.Context, key client.ObjectKey) bool {
		_, exists, err := store.GetByKey(key.Namespace + "/" + key.Name)
		return err == nil && exists
	}
}
