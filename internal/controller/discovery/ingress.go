// Package discovery turns cluster sources into the operator's CRs. Discovery never
// calls the Polycrate API: it declares CRs with server-side apply, and the sync
// controllers take them from there.
package discovery

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/opconfig"
)

// Annotations the operator writes on a source ("3. Annotate (id, synced-at)").
const (
	AnnotationAPIIDs   = "endpoints.polycrate.io/api-ids"
	AnnotationSyncedAt = "endpoints.polycrate.io/synced-at"
	// legacyIngressClass is the pre-IngressClass annotation.
	legacyIngressClass = "kubernetes.io/ingress.class"
)

// Warning reasons of endpoint discovery.
const (
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonHostClaimed       = "HostClaimedByAnotherSource"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;patch;update

// IngressReconciler discovers Endpoints from Ingresses.
type IngressReconciler struct {
	Client   client.Client
	Config   *opconfig.Store
	Recorder recorder.EventRecorder
	Log      logr.Logger
}

// Reconcile declares one Endpoint CR per host of a selected Ingress.
func (r *IngressReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ing := &networkingv1.Ingress{}
	if err := r.Client.Get(ctx, req.NamespacedName, ing); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	owned, err := ownedEndpoints(ctx, r.Client, ing.Namespace, v1.LabelEndpointSourceIngress, ing.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ing.DeletionTimestamp.IsZero() || !r.selected(ing) {
		// Deleted or no longer selected: its Endpoints go (their sync finalizer removes
		// the API objects), then the source's finalizer.
		return r.release(ctx, ing, owned)
	}
	if !controllerutil.ContainsFinalizer(ing, v1.FinalizerIngressDiscovery) {
		patch := client.MergeFrom(ing.DeepCopy())
		controllerutil.AddFinalizer(ing, v1.FinalizerIngressDiscovery)
		if err := r.Client.Patch(ctx, ing, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	ann := ing.Annotations
	appName := ann[annotations.K8sAppName]
	if appName == "" {
		appName = ing.Labels[v1.LabelK8sAppNameDeprecated] // honoured, then removed below
	}
	settings, problems := annotations.Parse(ann)
	settings.K8sAppName = appName
	for _, p := range problems {
		r.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Discover", "%s", p.String())
	}

	wanted := map[string]bool{}
	for _, host := range ingressHosts(ing) {
		name := annotations.EndpointName(host)
		if owner, ok, err := r.claimedElsewhere(ctx, ing, name); err != nil {
			return ctrl.Result{}, err
		} else if ok {
			r.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, ReasonHostClaimed, "Discover",
				"host %s is monitored through %s; this Ingress does not create a second endpoint for it", host, owner)
			continue
		}
		wanted[name] = true
		if err := applyEndpoint(ctx, r.Client, ing, v1.LabelEndpointSourceIngress, settings.For(host, annotations.Source{}), settings); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, ep := range owned {
		if !wanted[ep.Name] {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, &ep)); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, r.annotateSource(ctx, ing, wanted)
}

// selected applies the configuration: discovery on, namespace, class, mode.
func (r *IngressReconciler) selected(ing *networkingv1.Ingress) bool {
	snap := r.Config.Get()
	if snap == nil || !opconfig.Enabled(snap.Spec.EndpointDiscovery.Enabled) {
		return false
	}
	d := snap.Spec.EndpointDiscovery
	if !snap.EndpointNamespaces().Allows(ing.Namespace) {
		return false
	}
	if len(d.IngressClasses) > 0 {
		class := ing.Annotations[legacyIngressClass]
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		}
		if !slices.Contains(d.IngressClasses, class) {
			return false
		}
	}
	return annotations.Selected(d.Mode, ing.Annotations)
}

// release deletes the source's Endpoints, waits until they are gone, and removes
// the source's finalizer.
func (r *IngressReconciler) release(ctx context.Context, ing *networkingv1.Ingress, owned []v1.Endpoint) (ctrl.Result, error) {
	for i := range owned {
		if owned[i].DeletionTimestamp.IsZero() {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, &owned[i])); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if len(owned) > 0 {
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, nil // their API objects are being deleted
	}
	patch := client.MergeFrom(ing.DeepCopy())
	changed := controllerutil.RemoveFinalizer(ing, v1.FinalizerIngressDiscovery)
	for _, k := range []string{AnnotationAPIIDs, AnnotationSyncedAt} {
		if _, ok := ing.Annotations[k]; ok && ing.DeletionTimestamp.IsZero() {
			delete(ing.Annotations, k)
			changed = true
		}
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, ing, patch))
}

// claimedElsewhere: the Endpoint name belongs to an HTTPRoute (which always wins)
// or to an older Ingress (creation time, then name).
func (r *IngressReconciler) claimedElsewhere(ctx context.Context, ing *networkingv1.Ingress, name string) (string, bool, error) {
	ep := &v1.Endpoint{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ing.Namespace, Name: name}, ep); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	if route := ep.Labels[v1.LabelEndpointSourceHTTPRoute]; route != "" {
		return "HTTPRoute " + route, true, nil
	}
	other := ep.Labels[v1.LabelEndpointSourceIngress]
	if other == "" || other == ing.Name {
		return "", false, nil
	}
	o := &networkingv1.Ingress{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ing.Namespace, Name: other}, o); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil // the owner is gone: take it over
		}
		return "", false, err
	}
	if older(o, ing) && o.DeletionTimestamp.IsZero() {
		return "Ingress " + other, true, nil
	}
	return "", false, nil
}

func older(a, b metav1.Object) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.GetName() < b.GetName()
}

func ingressHosts(ing *networkingv1.Ingress) []string {
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		h := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(rule.Host), "."))
		if h != "" && !strings.HasPrefix(h, "*") && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// ownedEndpoints lists the Endpoints a source created.
func ownedEndpoints(ctx context.Context, c client.Client, namespace, label, name string) ([]v1.Endpoint, error) {
	list := &v1.EndpointList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{label: name, v1.LabelDiscovered: v1.LabelValueTrue}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// applyEndpoint declares a host's Endpoint CR with server-side apply: labels, an
// owner reference to the source, and the spec of the seed's example.
func applyEndpoint(ctx context.Context, c client.Client, src client.Object, sourceLabel string, check annotations.Check, s annotations.Settings) error {
	gvk, err := c.GroupVersionKindFor(src)
	if err != nil {
		return err
	}
	codes := make([]any, len(check.ExpectedStatus))
	for i, code := range check.ExpectedStatus {
		codes[i] = int64(code)
	}
	spec := map[string]any{
		"displayName": check.Host, "remoteAddress": check.Host, "remotePort": int64(check.Port), "kind": "http",
		"tls": check.TLS, "path": check.Path, "timeout": int64(check.Timeout), "interval": int64(check.Interval),
		"expectedStatusCodes": codes,
	}
	if check.ExpectedBody != "" {
		spec["expectedBody"] = check.ExpectedBody
	}
	if s.K8sAppName != "" {
		spec["k8sAppName"] = s.K8sAppName
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": "Endpoint",
		"metadata": map[string]any{
			"name": annotations.EndpointName(check.Host), "namespace": src.GetNamespace(),
			"labels": map[string]any{v1.LabelDiscovered: v1.LabelValueTrue, sourceLabel: src.GetName()},
			"ownerReferences": []any{map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
				"name": src.GetName(), "uid": string(src.GetUID())}},
		},
		"spec": spec,
	}}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(v1.FieldOwner), client.ForceOwnership)
}

// annotateSource writes the API ids of the source's endpoints and the latest sync
// time onto the source, only when they change; it also drops the deprecated
// K8sApp label after honouring it.
func (r *IngressReconciler) annotateSource(ctx context.Context, ing *networkingv1.Ingress, wanted map[string]bool) error {
	owned, err := ownedEndpoints(ctx, r.Client, ing.Namespace, v1.LabelEndpointSourceIngress, ing.Name)
	if err != nil {
		return err
	}
	ids, synced := sourceAnnotations(owned, wanted)
	patch := client.MergeFrom(ing.DeepCopy())
	changed := false
	set := func(k, v string) {
		if v == "" || ing.Annotations[k] == v {
			return
		}
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[k] = v
		changed = true
	}
	set(AnnotationAPIIDs, ids)
	set(AnnotationSyncedAt, synced)
	// The deprecated link label: its value moves to the canonical annotation (so the
	// link stays), and the label goes.
	if v, ok := ing.Labels[v1.LabelK8sAppNameDeprecated]; ok {
		delete(ing.Labels, v1.LabelK8sAppNameDeprecated)
		if _, has := ing.Annotations[annotations.K8sAppName]; !has {
			set(annotations.K8sAppName, v)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, ing, patch))
}

// sourceAnnotations renders host=id pairs and the newest sync time.
func sourceAnnotations(owned []v1.Endpoint, wanted map[string]bool) (string, string) {
	var pairs []string
	var newest *metav1.Time
	for _, ep := range owned {
		if !wanted[ep.Name] || ep.Status.APIID == "" {
			continue
		}
		pairs = append(pairs, ep.Spec.RemoteAddress+"="+ep.Status.APIID)
		if t := ep.Status.LastSyncedAt; t != nil && (newest == nil || newest.Before(t)) {
			newest = t
		}
	}
	sort.Strings(pairs)
	synced := ""
	if newest != nil {
		synced = newest.UTC().Format(time.RFC3339)
	}
	return strings.Join(pairs, ","), synced
}

// SetupWithManager watches Ingresses, their Endpoints (for the source
// annotations), and configuration changes (which re-queue every Ingress).
func (r *IngressReconciler) SetupWithManager(mgr manager.Manager, maxConcurrent int) error {
	wake := make(chan event.GenericEvent, 1024)
	changes := r.Config.Subscribe()
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changes:
				list := &networkingv1.IngressList{}
				if err := mgr.GetClient().List(ctx, list); err != nil {
					continue
				}
				for i := range list.Items {
					wake <- event.GenericEvent{Object: &list.Items[i]}
				}
			}
		}
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("discovery-ingress").
		For(&networkingv1.Ingress{}).
		Watches(&v1.Endpoint{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.GetLabels()[v1.LabelEndpointSourceIngress]; name != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
			}
			return nil
		})).
		WatchesRawSource(source.Channel(wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options(maxConcurrent)).
		Complete(r)
}
