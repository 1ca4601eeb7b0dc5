// Package inventory mirrors cluster objects into the operator's inventory CRs
// (docs/inventory.md): Nodes → Hosts, PersistentVolumes → K8sVolumes, Velero and
// CloudNativePG backups and schedules → Backups and BackupSchedules, cert-manager
// Certificates → Certificates. Every kind is one Mirror (its mapping, filters and
// names) run by the same generic reconciler: one source object → at most one CR,
// declared with server-side apply only when its declared content changed, deleted
// when the source goes or stops being selected. The API side is apisync.
package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/crdgate"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// Annotations on every inventory CR.
const (
	// AnnotationSource names the mirrored object: "<group>/<Kind>:<namespace>/<name>".
	AnnotationSource = "polycrate.io/source"
	// AnnotationDeclared is the hash of what discovery last declared.
	AnnotationDeclared = "polycrate.io/declared-hash"
)

// Declared is the CR a source maps to.
type Declared struct {
	Labels map[string]string
	Spec   any // the CR's typed spec
	// Requeue asks for a re-evaluation after this long (time-based states).
	Requeue time.Duration
}

// Mirror is one source kind: what it mirrors into which CR, when, and how.
type Mirror[S client.Object] struct {
	// Name is the mirror's name, e.g. "host" or "velero-backup".
	Name string
	// Source is the source's kind (for the source annotation and owner references).
	Source schema.GroupVersionKind
	// CRD gates a third-party source kind: its watch runs while the CRD is
	// served ("" for core kinds).
	CRD string
	// Target is an empty CR of the kind it declares.
	Target  client.Object
	Enabled func(snap *liveconfig.Snapshot) bool
	// StaleMinutes reads the stale sweep's interval from the configuration (nil:
	// controller.DefaultSweepInterval).
	StaleMinutes func(*liveconfig.Snapshot) int32
	// TargetKey is the CR's key for a source key.
	TargetKey func(src types.NamespacedName) types.NamespacedName
	// Declare maps a source; false when filters do not select it. An error is a
	// source the mapping cannot read (a Warning event on it, nothing declared).
	Declare func(src S, snap *liveconfig.Snapshot, now time.Time) (*Declared, bool, error)
}

// newSource is an empty source object (unstructured ones know their kind).
func (m *Mirror[S]) newSource() S {
	s := reflect.New(reflect.TypeFor[S]().Elem()).Interface().(S)
	if u, ok := any(s).(*unstructured.Unstructured); ok {
		u.SetGroupVersionKind(m.Source)
	}
	return s
}

// newSourceList is an empty list of sources: the scheme's type, or unstructured.
func (m *Mirror[S]) newSourceList(scheme *runtime.Scheme) (client.ObjectList, error) {
	gvk := m.Source.GroupVersion().WithKind(m.Source.Kind + "List")
	if _, ok := any(m.newSource()).(*unstructured.Unstructured); ok {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		return l, nil
	}
	o, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	return o.(client.ObjectList), nil
}

func (m *Mirror[S]) newTarget() client.Object { return m.Target.DeepCopyObject().(client.Object) }

// Reconciler runs one Mirror.
type Reconciler[S client.Object] struct {
	controller.Deps
	Mirror *Mirror[S]
	// Gate starts and stops a third-party source kind's watch with its CRD.
	Gate *crdgate.Gate
	// Now is the clock (tests inject one).
	Now func() time.Time

	waker *controller.Waker
}

func (r *Reconciler[S]) active() bool { return r.Mirror.CRD == "" || r.Gate.Active(r.Mirror.CRD) }

func (r *Reconciler[S]) sourceID(key types.NamespacedName) string {
	gvk := r.Mirror.Source
	return gvk.Group + "/" + gvk.Kind + ":" + key.Namespace + "/" + key.Name
}

// Reconcile mirrors one source object.
func (r *Reconciler[S]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	snap := r.Config.Get()
	if (snap == nil && r.Config.Early()) || !r.active() {
		return ctrl.Result{}, nil // starting, or the source's CRD is gone: quiet
	}
	m := r.Mirror
	src := m.newSource()
	err := r.Client.Get(ctx, req.NamespacedName, src)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	var decl *Declared
	if err == nil && src.GetDeletionTimestamp().IsZero() && snap != nil && m.Enabled(snap) {
		d, selected, derr := m.Declare(src, snap, r.Now())
		if derr != nil {
			r.Events("Discover").Event(src, corev1.EventTypeWarning, v1.ReasonInvalidSource, "not mirrored: "+derr.Error())
			r.Log.Info("source not mirrored", "mirror", m.Name, "namespace", req.Namespace, "name", req.Name, "problem", derr.Error())
			return ctrl.Result{}, nil
		}
		if selected {
			decl = d
		}
	}
	key := m.TargetKey(req.NamespacedName)
	target := m.newTarget()
	terr := r.Client.Get(ctx, key, target)
	if terr != nil && !apierrors.IsNotFound(terr) {
		return ctrl.Result{}, terr
	}
	exists := terr == nil
	if decl == nil {
		if exists && r.ours(target, req.NamespacedName) && target.GetDeletionTimestamp().IsZero() {
			r.Log.Info("source gone or no longer selected; deleting its CR", "mirror", m.Name, "namespace", key.Namespace, "name", key.Name)
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, target))
		}
		return ctrl.Result{}, nil
	}
	if exists && !r.ours(target, req.NamespacedName) {
		r.Events("Discover").Event(src, corev1.EventTypeWarning, v1.ReasonNameTaken,
			fmt.Sprintf("not mirrored: %s %s exists and was not made from this object", target.GetObjectKind().GroupVersionKind().Kind, key.Name))
		return ctrl.Result{}, nil
	}
	if exists && !target.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{RequeueAfter: controller.RequeueShortly}, nil // being retired; declared again once gone
	}
	u, hash, err := r.declare(src, key, decl)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !exists || target.GetAnnotations()[AnnotationDeclared] != hash {
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(v1.FieldOwner), client.ForceOwnership); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: decl.Requeue}, nil
}

// ours: the CR is a discovered mirror of this source.
func (r *Reconciler[S]) ours(target client.Object, src types.NamespacedName) bool {
	return target.GetLabels()[v1.LabelDiscovered] == v1.LabelValueTrue && target.GetAnnotations()[AnnotationSource] == r.sourceID(src)
}

// declare renders the CR and the hash of what it declares.
func (r *Reconciler[S]) declare(src S, key types.NamespacedName, d *Declared) (*unstructured.Unstructured, string, error) {
	ptr := reflect.ValueOf(d.Spec)
	if ptr.Kind() != reflect.Pointer {
		ptr = reflect.New(ptr.Type())
		ptr.Elem().Set(reflect.ValueOf(d.Spec))
	}
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr.Interface())
	if err != nil {
		return nil, "", err
	}
	labels := map[string]any{v1.LabelDiscovered: v1.LabelValueTrue}
	for k, v := range d.Labels {
		labels[k] = v
	}
	body, _ := json.Marshal(map[string]any{"labels": labels, "spec": spec})
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:8])
	gvk, err := r.Client.GroupVersionKindFor(r.Mirror.Target)
	if err != nil {
		return nil, "", err
	}
	sg := r.Mirror.Source
	md := map[string]any{
		"name": key.Name, "labels": labels,
		"annotations": map[string]any{AnnotationSource: r.sourceID(client.ObjectKeyFromObject(src)), AnnotationDeclared: hash},
	}
	if key.Namespace != "" {
		md["namespace"] = key.Namespace
	}
	// An owner reference only where Kubernetes allows one (same namespace, or a
	// cluster-scoped owner of a cluster-scoped CR).
	if src.GetNamespace() == key.Namespace {
		md["ownerReferences"] = []any{map[string]any{"apiVersion": sg.GroupVersion().String(), "kind": sg.Kind,
			"name": src.GetName(), "uid": string(src.GetUID())}}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
		"metadata": md, "spec": spec}}, hash, nil
}

// targetToSource maps a mirror CR back to its source (a deleted or edited CR is
// declared again).
func (r *Reconciler[S]) targetToSource(_ context.Context, o client.Object) []reconcile.Request {
	if key, ok := r.sourceOf(o); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

func (r *Reconciler[S]) sourceOf(o client.Object) (types.NamespacedName, bool) {
	gvk := r.Mirror.Source
	prefix := gvk.Group + "/" + gvk.Kind + ":"
	v := o.GetAnnotations()[AnnotationSource]
	if !strings.HasPrefix(v, prefix) {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(strings.TrimPrefix(v, prefix), "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok
}

// All queues every source and every mirrored CR's source (configuration changes,
// the stale sweep).
func (r *Reconciler[S]) All(ctx context.Context, c client.Client) {
	keys := map[types.NamespacedName]bool{}
	if r.active() {
		if list, err := r.Mirror.newSourceList(c.Scheme()); err == nil && c.List(ctx, list) == nil {
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				if co, ok := o.(client.Object); ok {
					keys[client.ObjectKeyFromObject(co)] = true
				}
				return nil
			})
		}
	}
	targets := &metav1.PartialObjectMetadataList{}
	gvk, err := c.GroupVersionKindFor(r.Mirror.Target)
	if err == nil {
		targets.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, targets, client.MatchingLabels{v1.LabelDiscovered: v1.LabelValueTrue}); err == nil {
			for i := range targets.Items {
				if key, ok := r.sourceOf(&targets.Items[i]); ok {
					keys[key] = true
				}
			}
		}
	}
	for k := range keys {
		r.waker.Wake(ctx, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}})
	}
}

// SetupWithManager builds the controller. A gated kind's source watch starts
// (and restarts) with its CRD; a core kind's at once.
func (r *Reconciler[S]) SetupWithManager(mgr manager.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	r.waker = controller.NewWaker()
	opts := r.Options()
	opts.Reconciler = r
	c, err := crcontroller.New("inventory-"+r.Mirror.Name, mgr, opts)
	if err != nil {
		return err
	}
	if err := c.Watch(r.waker.Source()); err != nil {
		return err
	}
	if err := c.Watch(source.Kind(mgr.GetCache(), r.Mirror.newTarget(), handler.EnqueueRequestsFromMapFunc(r.targetToSource))); err != nil {
		return err
	}
	watchSource := func() error {
		return c.Watch(source.Kind(mgr.GetCache(), r.Mirror.newSource(), &handler.TypedEnqueueRequestForObject[S]{}))
	}
	if r.Mirror.CRD == "" {
		if err := watchSource(); err != nil {
			return err
		}
	} else {
		r.Gate.Register(crdgate.Kind{CRD: r.Mirror.CRD, Version: r.Mirror.Source.Version, Objects: []client.Object{r.Mirror.newSource()},
			Start: func(bool) error { return watchSource() }})
	}
	all := func(ctx context.Context) { r.All(ctx, mgr.GetClient()) }
	if err := controller.OnConfigChange(mgr, r.Config, all); err != nil {
		return err
	}
	return controller.Every(mgr, func() time.Duration { // the stale sweep
		if snap := r.Config.Get(); snap != nil && r.Mirror.StaleMinutes != nil {
			return controller.MinutesOr(r.Mirror.StaleMinutes(snap), controller.DefaultSweepInterval)
		}
		return controller.DefaultSweepInterval
	}, all)
}

// Runner is one mirror's reconciler as the operator holds it.
type Runner interface {
	SetupWithManager(manager.Manager) error
	// All runs a full pass (what a configuration change and the stale sweep do).
	All(context.Context, client.Client)
}

// Reconcilers are the inventory's discovery reconcilers, by mirror name (their
// API syncs are registered kinds, apisync.Kinds); gate starts and stops the
// third-party kinds' watches with their CRDs.
func Reconcilers(d controller.Deps, gate *crdgate.Gate) map[string]Runner {
	out := map[string]Runner{}
	add := func(name string, r Runner) { out[name] = r }
	add(run(d, gate, Hosts(func(msg string) { d.Log.Info(msg) })))
	add(run(d, gate, Volumes))
	add(run(d, gate, VeleroBackups))
	add(run(d, gate, VeleroSchedules))
	add(run(d, gate, CNPGBackups))
	add(run(d, gate, CNPGScheduledBackups))
	add(run(d, gate, Certificates))
	return out
}

func run[S client.Object](d controller.Deps, gate *crdgate.Gate, m *Mirror[S]) (string, Runner) {
	return m.Name, &Reconciler[S]{Deps: d, Mirror: m, Gate: gate}
}
