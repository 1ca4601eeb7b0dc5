package k8sapps

import (
	"context"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/metasecret"
	"github.com/polycrate/polycrate-operator/internal/slimcache"
)

// Discovery is the wired K8sApp discovery: the controller, its waker and the
// stale sweep.
type Discovery struct {
	R     *Reconciler
	mgr   manager.Manager
	ctrl  crcontroller.Controller
	waker *controller.Waker
}

// SetupWithManager wires K8sApp discovery (of d.R): watches on K8sApps, meta-Secrets and Pods (r.Secrets
// and r.Pods, compact stores the caller runs) and Ingresses, a full pass on
// configuration changes and the periodic stale sweep
// (app_discovery.stale_cleanup_minutes).
func (d *Discovery) SetupWithManager(mgr manager.Manager) error {
	r := d.R
	d.mgr, d.waker = mgr, controller.NewWaker()
	c, err := builder.ControllerManagedBy(mgr).
		Named("discovery-k8sapp").
		For(&v1.K8sApp{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WatchesRawSource(&slimcache.Source[slimcache.Meta]{Store: r.Secrets, Map: secretToApps}).
		WatchesRawSource(&slimcache.Source[Pod]{Store: r.Pods.Store, Map: d.podToApps}).
		Watches(&networkingv1.Ingress{}, handler.EnqueueRequestsFromMapFunc(claimToApp)).
		WatchesRawSource(d.waker.Source()).
		WithOptions(r.Options()).
		Build(r)
	if err != nil {
		return err
	}
	d.ctrl = c
	if err := controller.OnConfigChange(mgr, r.Config, d.All); err != nil {
		return err
	}
	// The stale sweep re-decides every app: a safety net for sources that went
	// while the operator was not watching (seed 002 "Stale-Sweep").
	return controller.Every(mgr, func() time.Duration {
		if snap := r.Config.Get(); snap != nil {
			return controller.MinutesOr(snap.Spec.AppDiscovery.StaleCleanupMinutes, controller.DefaultSweepInterval)
		}
		return controller.DefaultSweepInterval
	}, d.All)
}

// WatchHTTPRoutes adds HTTPRoute claims once the Gateway API is served.
func (d *Discovery) WatchHTTPRoutes() error {
	return d.ctrl.Watch(source.Kind(d.mgr.GetCache(), client.Object(&gatewayv1.HTTPRoute{}), handler.EnqueueRequestsFromMapFunc(claimToApp)))
}

// secretToApps maps a meta-Secret's change to its app.
func secretToApps(_ context.Context, e slimcache.Event[slimcache.Meta]) []reconcile.Request {
	if !metasecret.IsMetaSecret(e.Name) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: e.Namespace, Name: metasecret.AppName(e.Name)}}}
}

// claimToApp maps an Ingress or HTTPRoute to the app it claims (old and new
// objects of an update both map, so a changed claim re-decides both apps).
func claimToApp(_ context.Context, o client.Object) []reconcile.Request {
	if name := claimName(o); name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
	return nil
}

// podToApps: an annotated Pod maps to its app in every namespace that uses the
// name (a conflict starts or ends there too); any Pod maps to the meta-Secret
// apps of its namespace, whose status counts every Pod. A change maps by both its
// old and its new state, so a changed annotation re-decides both apps.
func (d *Discovery) podToApps(ctx context.Context, e slimcache.Event[Pod]) []reconcile.Request {
	var out []reconcile.Request
	for _, p := range []*Pod{e.Old, e.New} {
		if p == nil || p.App == noApp {
			continue
		}
		name := p.AppName()
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Namespace, Name: name}})
		for _, ns := range d.R.Pods.Namespaces(name) {
			if ns != e.Namespace {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			}
		}
	}
	apps := &v1.K8sAppList{}
	if err := d.R.Client.List(ctx, apps, client.InNamespace(e.Namespace), client.MatchingLabels{v1.LabelK8sAppDiscoverySource: SourceSecret}); err == nil {
		for _, a := range apps.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
		}
	}
	return out
}

// All queues every app key any source or CR names (after a configuration change,
// and by the stale sweep).
func (d *Discovery) All(ctx context.Context) {
	keys := map[types.NamespacedName]bool{}
	c := d.R.Client
	apps := &v1.K8sAppList{}
	if err := c.List(ctx, apps, client.UnsafeDisableDeepCopy); err == nil {
		for _, a := range apps.Items {
			keys[client.ObjectKeyFromObject(&a)] = true
		}
	}
	d.R.Secrets.Range("", func(ns, name string, _ *slimcache.Meta) {
		if metasecret.IsMetaSecret(name) {
			keys[types.NamespacedName{Namespace: ns, Name: metasecret.AppName(name)}] = true
		}
	})
	d.R.Pods.Range("", func(ns, _ string, p *Pod) {
		if p.App != noApp {
			keys[types.NamespacedName{Namespace: ns, Name: p.AppName()}] = true
		}
	})
	// The sources are read in the informers' stores, without a list of copies:
	// this runs on every configuration signal, a restart's first included,
	// and listing 20,000 Ingresses was 0.56 s of a restart's CPU
	// (docs/performance.md).
	claims := func(o client.Object) {
		for _, r := range claimToApp(ctx, o) {
			keys[r.NamespacedName] = true
		}
	}
	_ = controller.RangeCached(ctx, d.mgr.GetCache(), &networkingv1.Ingress{}, claims)
	if d.R.HTTPRoutes != nil && d.R.HTTPRoutes() {
		_ = controller.RangeCached(ctx, d.mgr.GetCache(), &gatewayv1.HTTPRoute{}, claims)
	}
	for k := range keys {
		d.waker.Wake(ctx, &v1.K8sApp{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}})
	}
}
