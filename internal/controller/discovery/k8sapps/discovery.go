// Package k8sapp discovers deployed apps and declares them as K8sApp CRs
// (docs/k8sapps.md): from the Polycrate CLI's meta-Secrets, from Pods annotated
// polycrate_k8sapp_name, and from Ingresses/HTTPRoutes that claim an app. One
// reconcile handles one app key (namespace + app name) and weighs every source of
// that key, so precedence (meta-Secret over claim over Pods) and cleanup are
// decided in one place. The API side is apisync's K8sAppAdapter.
package k8sapps

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/metasecret"
	"github.com/polycrate/polycrate-operator/internal/slimcache"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Discovery sources (spec.discovery_source and the discovery-source label).
const (
	SourceSecret    = "secret"
	SourcePod       = "pod"
	SourceIngress   = "ingress"
	SourceHTTPRoute = "httproute"
)

// OperatorAppName is never discovered: the agent owns the operator's own app record.
const OperatorAppName = "polycrate-operator"

// Reconciler declares one K8sApp per app key.
type Reconciler struct {
	controller.Deps               // Client: cached Ingresses, HTTPRoutes, K8sApps
	Reader          client.Reader // uncached: a meta-Secret's content, a ReplicaSet's owner
	// Pods holds the counted Pods, Secrets the metadata of meta-Secrets (both
	// cluster-wide, compact; never the manager's cache).
	Pods    *PodStore
	Secrets *slimcache.Store[slimcache.Meta]
	// HTTPRoutes reports whether the Gateway API is served (HTTPRoute claims count then).
	HTTPRoutes func() bool

	metas     sync.Map // namespace/secret → parsedMeta, by resourceVersion
	conflicts sync.Map // namespace/app → announced
	written   sync.Map // namespace/app → writtenStatus, the last status part written
}

type writtenStatus struct {
	uid types.UID
	observed
	// restarts is each Pod's restart count at the write (restartCounts).
	restarts map[string]int32
}

type parsedMeta struct {
	rv   string
	meta *metasecret.Meta
	err  error
}

// desired is what the sources say about one app.
type desired struct {
	source string
	secret *secretRef
	meta   *metasecret.Meta
	byoa   bool
	pods   []*Pod // the Pods its status counts
}

// secretRef names a meta-Secret.
type secretRef struct {
	Name string
	UID  types.UID
}

// Reconcile decides one app.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &v1.K8sApp{}
	exists := true
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		exists = false
	}
	snap := r.Config.Get()
	if snap == nil {
		return ctrl.Result{}, nil // no OperatorConfig: nothing is discovered, nothing removed
	}
	var want *desired
	if liveconfig.Enabled(snap.Spec.AppDiscovery.Enabled) && snap.AppNamespaces().Allows(req.Namespace) && req.Name != OperatorAppName {
		var err error
		var keep bool
		if want, keep, err = r.sources(ctx, snap, req.NamespacedName); err != nil {
			return ctrl.Result{}, err
		}
		if keep {
			return ctrl.Result{}, nil // a malformed meta-Secret: nothing created, nothing changed
		}
	}
	if want == nil {
		r.written.Delete(req.String())
		if exists && app.Labels[v1.LabelDiscovered] == v1.LabelValueTrue && app.DeletionTimestamp.IsZero() {
			r.Log.Info("K8sApp has no source any more; deleting it", "namespace", req.Namespace, "name", req.Name)
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, app))
		}
		return ctrl.Result{}, nil
	}
	if exists && app.Labels[v1.LabelDiscovered] != v1.LabelValueTrue {
		return ctrl.Result{}, nil // a K8sApp a user wrote is never taken over
	}
	if exists && !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{RequeueAfter: controller.RequeueShortly}, nil // being retired; declared again once gone
	}
	if !exists || r.changed(app, want) {
		applied, err := r.apply(ctx, req.NamespacedName, want)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !exists {
			r.Events("Discover").Event(applied, corev1.EventTypeNormal, v1.ReasonDiscovered, "discovered from "+describe(want))
		}
		app = applied
	}
	// The restart window changes by itself as its buckets age: look again then.
	expiry, err := r.writeStatus(ctx, app, want)
	return ctrl.Result{RequeueAfter: expiry}, err
}

// sources weighs the sources of one key: a meta-Secret wins, then an
// Ingress/HTTPRoute claim, then annotated Pods (unless the name is used by Pods in
// another namespace too). keep is true for a malformed meta-Secret.
func (r *Reconciler) sources(ctx context.Context, snap *liveconfig.Snapshot, key types.NamespacedName) (*desired, bool, error) {
	secretName := metasecret.SecretName(key.Name)
	if sec, ok := r.Secrets.Get(key.Namespace, secretName); ok && !sec.Deleting {
		m, perr, err := r.readMeta(ctx, key.Namespace, secretName, sec.ResourceVersion)
		if err != nil {
			return nil, false, err
		}
		if perr != nil {
			return nil, true, nil
		}
		return &desired{source: SourceSecret, secret: &secretRef{Name: secretName, UID: sec.UID}, meta: m,
			pods: r.Pods.List(key.Namespace, "")}, false, nil
	}
	r.metas.Delete(key.String())

	annotated := r.Pods.List(key.Namespace, key.Name)
	source, byoa, err := r.claims(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if source != "" {
		return &desired{source: source, byoa: byoa, pods: annotated}, false, nil
	}
	if !liveconfig.Enabled(snap.Spec.AppDiscovery.LabelDiscoveryEnabled) || len(annotated) == 0 {
		r.conflicts.Delete(key.String())
		return nil, false, nil
	}
	if others := r.otherNamespaces(snap, key); len(others) > 0 {
		r.announceConflict(ctx, key, annotated, others)
		return nil, false, nil
	}
	r.conflicts.Delete(key.String())
	return &desired{source: SourcePod, pods: annotated}, false, nil
}

// readMeta parses a meta-Secret, reading its content (uncached) only when its
// resourceVersion changed; a malformed one gets a Warning event once per version.
func (r *Reconciler) readMeta(ctx context.Context, namespace, name, resourceVersion string) (*metasecret.Meta, error, error) {
	k := namespace + "/" + metasecret.AppName(name)
	if v, ok := r.metas.Load(k); ok && v.(parsedMeta).rv == resourceVersion {
		return v.(parsedMeta).meta, v.(parsedMeta).err, nil
	}
	full := &corev1.Secret{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, full); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	m, perr := metasecret.Parse(full.Name, full.Data)
	r.metas.Store(k, parsedMeta{rv: full.ResourceVersion, meta: m, err: perr})
	if perr != nil {
		ref := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: full.Name, Namespace: full.Namespace, UID: full.UID}}
		r.Events("Discover").Event(ref, corev1.EventTypeWarning, v1.ReasonInvalidMetaSecret,
			fmt.Sprintf("meta-Secret %s/%s is malformed, no K8sApp is declared from it: %s", full.Namespace, full.Name, perr))
		r.Log.Info("malformed meta-Secret; no K8sApp declared from it", "namespace", full.Namespace, "name", full.Name, "problem", perr.Error())
	}
	return m, perr, nil
}

// claimName is the app an Ingress or HTTPRoute claims (the annotation, or the
// deprecated label endpoint discovery moves to it).
func claimName(o client.Object) string {
	if v := strings.TrimSpace(o.GetAnnotations()[annotations.K8sAppName]); v != "" {
		return v
	}
	return o.GetLabels()[v1.LabelK8sAppNameDeprecated]
}

func byoaOf(o client.Object) bool {
	return strings.EqualFold(strings.TrimSpace(o.GetAnnotations()[annotations.BYOA]), "true")
}

// claims looks for Ingresses and HTTPRoutes of the namespace claiming the app; an
// HTTPRoute claim names the source (it wins a host over an Ingress too).
func (r *Reconciler) claims(ctx context.Context, key types.NamespacedName) (string, bool, error) {
	source, byoa := "", false
	ings := &networkingv1.IngressList{}
	if err := r.Client.List(ctx, ings, client.InNamespace(key.Namespace)); err != nil {
		return "", false, err
	}
	for i := range ings.Items {
		if o := &ings.Items[i]; o.DeletionTimestamp.IsZero() && claimName(o) == key.Name {
			source, byoa = SourceIngress, byoa || byoaOf(o)
		}
	}
	if r.HTTPRoutes != nil && r.HTTPRoutes() {
		routes := &gatewayv1.HTTPRouteList{}
		if err := r.Client.List(ctx, routes, client.InNamespace(key.Namespace)); err != nil {
			return "", false, err
		}
		for i := range routes.Items {
			if o := &routes.Items[i]; o.DeletionTimestamp.IsZero() && claimName(o) == key.Name {
				source, byoa = SourceHTTPRoute, byoa || byoaOf(o)
			}
		}
	}
	return source, byoa, nil
}

// otherNamespaces are the other namespaces (discovery may see) with counted Pods
// annotated with the same app name.
func (r *Reconciler) otherNamespaces(snap *liveconfig.Snapshot, key types.NamespacedName) []string {
	var out []string
	filter := snap.AppNamespaces()
	for _, ns := range r.Pods.Namespaces(key.Name) {
		if ns != key.Namespace && filter.Allows(ns) {
			out = append(out, ns)
		}
	}
	return out
}

// announceConflict puts a Warning event on each owner (Deployment, StatefulSet,
// DaemonSet) of the namespace's annotated Pods, once per conflict.
func (r *Reconciler) announceConflict(ctx context.Context, key types.NamespacedName, pods []*Pod, others []string) {
	msg := fmt.Sprintf("K8sApp %q is ignored: Pods in namespaces %s also carry polycrate_k8sapp_name=%s; use a distinct name per namespace",
		key.Name, strings.Join(append([]string{key.Namespace}, others...), ", "), key.Name)
	if prev, ok := r.conflicts.Load(key.String()); ok && prev.(string) == msg {
		return
	}
	r.conflicts.Store(key.String(), msg)
	r.Log.Info("K8sApp name conflict across namespaces; the app is ignored", "namespace", key.Namespace, "name", key.Name, "others", others)
	done := map[string]bool{}
	for _, p := range pods {
		owner := r.topOwner(ctx, key.Namespace, p)
		if owner == nil || done[owner.GetObjectKind().GroupVersionKind().Kind+"/"+owner.GetName()] {
			continue
		}
		done[owner.GetObjectKind().GroupVersionKind().Kind+"/"+owner.GetName()] = true
		r.Events("Discover").Event(owner, corev1.EventTypeWarning, v1.ReasonAppConflict, msg)
	}
}

// topOwner is the workload that owns a Pod (a ReplicaSet's Deployment).
func (r *Reconciler) topOwner(ctx context.Context, namespace string, p *Pod) client.Object {
	ref := p.Owner
	if ref == (Owner{}) {
		return nil
	}
	meta := metav1.ObjectMeta{Name: ref.Name.Value(), Namespace: namespace, UID: ref.UID.Value()}
	switch ref.Kind.Value() {
	case "StatefulSet":
		return withKind(&appsv1.StatefulSet{ObjectMeta: meta}, "StatefulSet")
	case "DaemonSet":
		return withKind(&appsv1.DaemonSet{ObjectMeta: meta}, "DaemonSet")
	case "Deployment":
		return withKind(&appsv1.Deployment{ObjectMeta: meta}, "Deployment")
	case "ReplicaSet":
		rs := &metav1.PartialObjectMetadata{}
		rs.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: meta.Name}, rs); err != nil {
			return nil
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			return withKind(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: namespace, UID: d.UID}}, "Deployment")
		}
	}
	return nil
}

func withKind[T client.Object](o T, kind string) T {
	o.GetObjectKind().SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(kind))
	return o
}

func describe(d *desired) string {
	switch d.source {
	case SourceSecret:
		return "meta-Secret " + d.secret.Name
	case SourcePod:
		return "Pods annotated " + annotations.K8sAppName
	default:
		return "an " + d.source + " claim (" + annotations.K8sAppName + ")"
	}
}

// spec is the K8sApp the sources declare: spec, labels and owner.
func (r *Reconciler) spec(d *desired) (v1.K8sAppSpec, map[string]string, []metav1.OwnerReference) {
	labels := map[string]string{v1.LabelDiscovered: v1.LabelValueTrue, v1.LabelOperatorDiscovered: v1.LabelValueTrue,
		v1.LabelK8sAppDiscoverySource: d.source}
	spec := v1.K8sAppSpec{Kind: "external", DiscoverySource: d.source, BYOA: d.byoa && (d.source == SourceIngress || d.source == SourceHTTPRoute)}
	var owners []metav1.OwnerReference
	if m := d.meta; m != nil {
		b := m.Block
		spec.Kind = b.Kind
		spec.Block = v1.K8sAppBlock{Name: b.Name, DisplayName: b.DisplayName, Version: b.Version, AppVersion: b.AppVersion,
			From: b.From, Type: b.Type, Flavor: b.Flavor}
		if b.Chart != nil {
			spec.Block.Chart = &v1.K8sAppChart{Name: b.Chart.Name, Version: b.Chart.Version, RepoURL: b.Chart.RepoURL}
		}
		spec.Workspace = v1.K8sAppWorkspace{Name: m.Workspace.Name, Organization: m.Workspace.Organization}
		t := metav1.NewTime(m.Action.LastExecutedAt.UTC())
		spec.Action = v1.K8sAppAction{Name: m.Action.Name, Status: m.Action.Status, LastExecutedAt: &t}
		for k, v := range map[string]string{v1.LabelK8sAppBlock: b.Name, v1.LabelK8sAppKind: b.Kind, v1.LabelK8sAppType: b.Type} {
			if labelValue.MatchString(v) {
				labels[k] = v
			}
		}
		owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: d.secret.Name, UID: d.secret.UID}}
	}
	return spec, labels, owners
}

var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// changed reports whether the CR differs from what its sources declare.
func (r *Reconciler) changed(app *v1.K8sApp, d *desired) bool {
	spec, labels, owners := r.spec(d)
	for k, v := range labels {
		if app.Labels[k] != v {
			return true
		}
	}
	for _, k := range []string{v1.LabelK8sAppBlock, v1.LabelK8sAppKind, v1.LabelK8sAppType} {
		if _, want := labels[k]; !want && app.Labels[k] != "" {
			return true
		}
	}
	if len(owners) == 0 && len(app.OwnerReferences) > 0 {
		return true
	}
	if len(owners) > 0 && (len(app.OwnerReferences) != 1 || app.OwnerReferences[0].UID != owners[0].UID) {
		return true
	}
	return !equality.Semantic.DeepEqual(app.Spec, spec)
}

// apply declares the CR with server-side apply (the operator's one field manager).
func (r *Reconciler) apply(ctx context.Context, key types.NamespacedName, d *desired) (*v1.K8sApp, error) {
	spec, labels, owners := r.spec(d)
	obj := &v1.K8sApp{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels, OwnerReferences: owners}, Spec: spec}
	obj.SetGroupVersionKind(v1.GroupVersion.WithKind("K8sApp"))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: m}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(v1.FieldOwner), client.ForceOwnership); err != nil {
		return nil, err
	}
	out := &v1.K8sApp{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

// observed is the part of a K8sApp's status discovery owns; the sync part belongs
// to apisync. It is written as a whole (a merge patch naming every field), so a
// stale cache can never leave an old value behind.
type observed struct {
	Installed           bool                     `json:"installed"`
	InstallationRunning bool                     `json:"installation_running"`
	InstallationFailed  bool                     `json:"installation_failed"`
	Uninstalled         bool                     `json:"uninstalled"`
	State               string                   `json:"state"`
	PodsTotal           int32                    `json:"pods_total"`
	PodsReady           int32                    `json:"pods_ready"`
	PodsAvailable       int32                    `json:"pods_available"`
	PodsUnavailable     int32                    `json:"pods_unavailable"`
	PodsRestarts        int32                    `json:"pods_restarts"`
	PodsRestartsHour    int32                    `json:"pods_restarts_last_hour"`
	PodsRestartWindow   []v1.K8sAppRestartBucket `json:"pods_restart_window"`
	PodsStatusHash      string                   `json:"pods_status_hash"`
	PodsStatusUpdatedAt *metav1.Time             `json:"pods_status_updated_at"`
	Artifacts           []v1.K8sAppArtifact      `json:"artifacts"`
	ArtifactCount       int32                    `json:"artifact_count"`
}

func observedOf(st *v1.K8sAppStatus) observed {
	return observed{Installed: st.Installed, InstallationRunning: st.InstallationRunning, InstallationFailed: st.InstallationFailed,
		Uninstalled: st.Uninstalled, State: st.State, PodsTotal: st.PodsTotal, PodsReady: st.PodsReady, PodsAvailable: st.PodsAvailable,
		PodsUnavailable: st.PodsUnavailable, PodsRestarts: st.PodsRestarts, PodsRestartsHour: st.PodsRestartsLastHour,
		PodsRestartWindow: st.PodsRestartWindow, PodsStatusHash: st.PodsStatusHash,
		PodsStatusUpdatedAt: st.PodsStatusUpdatedAt, Artifacts: st.Artifacts, ArtifactCount: st.ArtifactCount}
}

// writeStatus writes the observed part of the status when it changed: the
// reconcile's one status write, at its end. Not the kit's StatusPatcher: the
// sync owns the rest of this status, so discovery names exactly its own fields
// (a diff against a stale cached copy could leave an old value behind).
// "Changed" is judged against what this process last wrote for the app (the
// cache may not show that write yet), else against the cached object.
//
// It returns when the restart window changes by itself next (0: never).
func (r *Reconciler) writeStatus(ctx context.Context, app *v1.K8sApp, d *desired) (time.Duration, error) {
	sum := Summarize(d.pods)
	inst := metasecret.Installation{Installed: true} // an external app is there while its sources are
	if d.meta != nil {
		inst = metasecret.InstallationOf(d.meta.Action)
	}
	key := client.ObjectKeyFromObject(app).String()
	prev := observedOf(&app.Status)
	var lastRestarts map[string]int32
	if v, ok := r.written.Load(key); ok && v.(writtenStatus).uid == app.UID {
		prev = v.(writtenStatus).observed
		lastRestarts = v.(writtenStatus).restarts
	}
	now := time.Now()
	window, lastHour := advanceWindow(prev.PodsRestartWindow, now, restartsSince(d.pods, lastRestarts, &app.Status))
	next := observed{Installed: inst.Installed, InstallationRunning: inst.Running, InstallationFailed: inst.Failed, Uninstalled: inst.Uninstalled,
		State: sum.State, PodsTotal: sum.Total, PodsReady: sum.Ready, PodsAvailable: sum.Available, PodsUnavailable: sum.Unavailable,
		PodsRestarts: sum.Restarts, PodsRestartsHour: lastHour, PodsRestartWindow: window,
		PodsStatusHash: sum.Hash, PodsStatusUpdatedAt: prev.PodsStatusUpdatedAt,
		Artifacts: sum.Artifacts, ArtifactCount: int32(len(sum.Artifacts))}
	if next.PodsStatusHash != prev.PodsStatusHash || next.PodsStatusUpdatedAt == nil {
		at := metav1.NewTime(now.UTC().Truncate(time.Second))
		next.PodsStatusUpdatedAt = &at
	}
	expiry := windowExpiry(window, now)
	if equality.Semantic.DeepEqual(prev, next) {
		return expiry, nil
	}
	body, err := json.Marshal(map[string]any{"status": next})
	if err != nil {
		return 0, err
	}
	if err := r.Client.Status().Patch(ctx, app, client.RawPatch(types.MergePatchType, body)); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	r.written.Store(key, writtenStatus{uid: app.UID, observed: next, restarts: restartCounts(d.pods)})
	return expiry, nil
}

// PodDetails is the API's pods_details of an app: the counted Pods its status
// describes (every Pod of the namespace for a meta-Secret app, the annotated ones
// otherwise), from the PodStore.
func (r *Reconciler) PodDetails(ctx context.Context, app *v1.K8sApp) any {
	name := app.Name
	if app.Spec.DiscoverySource == SourceSecret {
		name = ""
	}
	details := Summarize(r.Pods.List(app.Namespace, name)).Details
	if details == nil {
		details = []PodDetail{}
	}
	return details
}
