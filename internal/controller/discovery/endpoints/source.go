package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/names"
)

// Host is one host a source offers, with what the source itself says about it.
type Host struct {
	Name   string
	Source annotations.Source
}

// Inspector is what a source kind contributes to endpoint discovery.
type Inspector struct {
	// Kind names the source kind in events ("Ingress", "HTTPRoute").
	Kind string
	// Label is the Endpoint label naming the source; Finalizer the source's finalizer.
	Label, Finalizer string
	// Priority: an Endpoint owned by a higher-priority kind is never taken over
	// (HTTPRoute beats Ingress); a lower one is.
	Priority int
	// Example is an empty source object.
	Example client.Object
	// Inspect reads a source: whether it is selected (beyond the namespace filter and
	// the monitor annotation, e.g. its class) and its hosts.
	Inspect func(ctx context.Context, c client.Client, obj client.Object, snap *liveconfig.Snapshot) (bool, []Host, error)
}

// New returns an empty source object.
func (in *Inspector) New() client.Object { return in.Example.DeepCopyObject().(client.Object) }

// SourceReconciler turns one source kind into Endpoint CRs; the rules are the same
// for every kind (docs/annotations.md).
type SourceReconciler struct {
	controller.Deps
	Inspector *Inspector
	// Others are the other source kinds, to judge claims by priority.
	Others []*Inspector
	// Active, when set, says whether the source kind is served now (a gated CRD);
	// while it is not, the reconciler does nothing.
	Active func() bool
	// Reader reads a source uncached before its Endpoints are deleted as stale
	// (nil: the cache's word is taken).
	Reader client.Reader
}

// Reconcile declares one Endpoint CR per host of a selected source.
func (r *SourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Active != nil && !r.Active() {
		return ctrl.Result{}, nil // the source's CRD is gone: quiet
	}
	in := r.Inspector
	obj := in.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.orphaned(ctx, req)
		}
		return ctrl.Result{}, err
	}
	owned, err := ownedEndpoints(ctx, r.Client, obj.GetNamespace(), in.Label, obj.GetName())
	if err != nil {
		return ctrl.Result{}, err
	}
	snap := r.Config.Get()
	if snap == nil && r.Config.Early() {
		return ctrl.Result{}, nil // just started: the configuration change re-queues every source
	}
	selected, hosts := false, []Host(nil)
	if obj.GetDeletionTimestamp().IsZero() && snap != nil && liveconfig.Enabled(snap.Spec.EndpointDiscovery.Enabled) &&
		snap.EndpointNamespaces().Allows(obj.GetNamespace()) && annotations.Selected(snap.Spec.EndpointDiscovery.Mode, obj.GetAnnotations()) {
		if selected, hosts, err = in.Inspect(ctx, r.Client, obj, snap); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !selected {
		// Deleted or not (or no longer) selected: its Endpoints go (their sync
		// finalizer removes the API objects), then the source's finalizer.
		return r.release(ctx, obj, owned)
	}
	if _, err := controller.EnsureFinalizer(ctx, r.Client, obj, in.Finalizer); err != nil {
		return ctrl.Result{}, err
	}
	ann := obj.GetAnnotations()
	settings, problems := annotations.Parse(ann)
	if settings.K8sAppName == "" {
		settings.K8sAppName = obj.GetLabels()[v1.LabelK8sAppNameDeprecated] // honoured, then moved
	}
	if len(problems) > 0 {
		// One event for all of them: events of one object, reason and action are
		// merged into a series that keeps only the first note.
		r.Events("Discover").Event(obj, corev1.EventTypeWarning, v1.ReasonInvalidAnnotation, annotations.Summary(problems, eventNoteLimit))
	}
	if len(hosts) > MaxHostsPerSource {
		r.Events("Discover").Event(obj, corev1.EventTypeWarning, v1.ReasonTooManyHosts,
			fmt.Sprintf("this %s names %d hosts; the first %d (in the order of its spec) are monitored, the other %d are not (at most %d hosts per source: split it)",
				in.Kind, len(hosts), MaxHostsPerSource, len(hosts)-MaxHostsPerSource, MaxHostsPerSource))
		hosts = hosts[:MaxHostsPerSource]
	}
	wanted, checks, err := r.claim(ctx, obj, hosts, settings)
	if err != nil {
		return ctrl.Result{}, err
	}
	wrote, err := applyEndpoints(ctx, r.Client, obj, in.Label, checks, settings)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range owned {
		if !wanted[owned[i].Name] {
			wrote = true
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, &owned[i])); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if wrote {
		// What the cache holds now (it may have seen the writes already).
		if owned, err = ownedEndpoints(ctx, r.Client, obj.GetNamespace(), in.Label, obj.GetName()); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.annotateSource(ctx, obj, owned, wanted)
}

// claim decides which hosts of a selected source get an Endpoint CR here: not
// a second host of the same CR name in this source, not a host another source
// monitors already (each refusal a Warning event). It returns the CR names
// and the checks to declare.
func (r *SourceReconciler) claim(ctx context.Context, obj client.Object, hosts []Host, settings annotations.Settings) (map[string]bool, []annotations.Check, error) {
	wanted := map[string]bool{}
	hostOf := map[string]string{} // Endpoint name → the host that took it in this pass
	var checks []annotations.Check
	for _, h := range hosts {
		name := endpointName(h.Name)
		if first, taken := hostOf[name]; taken {
			// Two hosts of one source, one CR name: declaring both would flip the CR
			// between them forever (and the API object with it). The first keeps it.
			r.Events("Discover").Event(obj, corev1.EventTypeWarning, v1.ReasonNameCollision,
				fmt.Sprintf("hosts %s and %s map to the same Endpoint name %s; %s is not monitored", first, h.Name, name, h.Name))
			continue
		}
		hostOf[name] = h.Name
		owner, claimed, err := r.claimedElsewhere(ctx, obj, name, h.Name)
		if err != nil {
			return nil, nil, err
		}
		if claimed != "" {
			reason, msg := v1.ReasonHostClaimed, fmt.Sprintf("host %s is monitored through %s; this %s does not create a second endpoint for it", h.Name, owner, r.Inspector.Kind)
			if claimed == claimCollision {
				reason, msg = v1.ReasonNameCollision, fmt.Sprintf("the Endpoint name %s of host %s is taken by another host, of %s; %s is not monitored", name, h.Name, owner, h.Name)
			}
			r.Events("Discover").Event(obj, corev1.EventTypeWarning, reason, msg)
			continue
		}
		wanted[name] = true
		checks = append(checks, settings.For(h.Name, h.Source))
	}
	return wanted, checks, nil
}

// release deletes the source's Endpoints, waits until they are gone, and removes
// the finalizer (and, from a source that stays, the sync annotations).
func (r *SourceReconciler) release(ctx context.Context, obj client.Object, owned []v1.Endpoint) (ctrl.Result, error) {
	for i := range owned {
		if owned[i].DeletionTimestamp.IsZero() {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, &owned[i])); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if len(owned) > 0 {
		return ctrl.Result{RequeueAfter: controller.RequeueShortly}, nil // their API objects are being deleted
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	changed := controllerutil.RemoveFinalizer(obj, r.Inspector.Finalizer)
	if obj.GetDeletionTimestamp().IsZero() {
		ann := obj.GetAnnotations()
		for _, k := range []string{AnnotationAPIIDs, AnnotationSyncedAt} {
			if _, ok := ann[k]; ok {
				delete(ann, k)
				changed = true
			}
		}
		obj.SetAnnotations(ann)
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, obj, patch))
}

// endpointNamer names a host's Endpoint CR (replaceable so that a test can make
// two hosts collide, which the 80-bit hash makes impossible to find); nil is
// names.Endpoint.
var endpointNamer atomic.Pointer[func(string) string]

func endpointName(host string) string {
	if f := endpointNamer.Load(); f != nil {
		return (*f)(host)
	}
	return names.Endpoint(host)
}

// eventNoteLimit is the events API's limit on a note.
const eventNoteLimit = 1024

// MaxHostsPerSource caps the hosts one Ingress or HTTPRoute contributes: what the
// operator writes onto the source (endpoints.polycrate.io/api-ids, about 290
// bytes per host at most) must stay far below Kubernetes' 256 KiB limit on all
// of an object's annotations, whatever the source holds. 200 hosts need at most
// ~58 KB.
const MaxHostsPerSource = 200

// How an Endpoint name is held elsewhere.
const (
	claimHost      = "host"      // the same host, through another source
	claimCollision = "collision" // another host whose name collides
)

// claimedElsewhere: the Endpoint belongs to a source of higher priority, or to an
// older source of the same kind (creation time, then name) — for the same host a
// claim, for another host (the names collide) a collision, which no source takes
// over while the holder exists.
func (r *SourceReconciler) claimedElsewhere(ctx context.Context, obj client.Object, name, host string) (string, string, error) {
	ep := &v1.Endpoint{} // read, never changed: no deep copy
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, ep, &client.GetOptions{UnsafeDisableDeepCopy: new(true)}); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", nil
		}
		return "", "", err
	}
	claim := claimHost
	if names.NormalizeHost(ep.Spec.RemoteAddress) != names.NormalizeHost(host) {
		claim = claimCollision
	}
	if ep.Labels[v1.LabelAPIDefined] == v1.LabelValueTrue {
		// It mirrors an endpoint defined in the API: never taken over.
		return "the API-defined endpoint " + ep.Name, claimCollision, nil
	}
	for _, other := range r.Others {
		if owner := ep.Labels[other.Label]; owner != "" {
			if other.Priority > r.Inspector.Priority {
				return other.Kind + " " + owner, claim, nil
			}
			if claim == claimCollision {
				if held, err := r.exists(ctx, other.New(), obj.GetNamespace(), owner); err != nil || held {
					return other.Kind + " " + owner, claim, err
				}
			}
		}
	}
	owner := ep.Labels[r.Inspector.Label]
	if owner == "" {
		if claim == claimCollision && !hasSourceLabel(ep) {
			// Written by hand for another host: never overwritten.
			return "the hand-written Endpoint " + ep.Name + " (host " + ep.Spec.RemoteAddress + ")", claim, nil
		}
		return "", "", nil // unowned, or owned by a lower-priority kind for the same host (taken over)
	}
	if owner == obj.GetName() {
		return "", "", nil // ours (a host of ours that this pass replaces)
	}
	o := r.Inspector.New()
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner}, o); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", nil // the owner is gone: take it over
		}
		return "", "", err
	}
	if o.GetDeletionTimestamp().IsZero() && (claim == claimCollision || older(o, obj)) {
		return r.Inspector.Kind + " " + owner, claim, nil
	}
	return "", "", nil
}

// hasSourceLabel: a source's discovery made the Endpoint.
func hasSourceLabel(ep *v1.Endpoint) bool {
	for _, k := range sourceLabels {
		if ep.Labels[k] != "" {
			return true
		}
	}
	return false
}

// exists reports whether a live source of that kind and name exists.
func (r *SourceReconciler) exists(ctx context.Context, o client.Object, namespace, name string) (bool, error) {
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return o.GetDeletionTimestamp().IsZero(), nil
}

func older(a, b metav1.Object) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.GetName() < b.GetName()
}

// IndexEndpointSource indexes discovered Endpoints by their source: "<label>=<name>"
// for the Ingress and HTTPRoute source labels, so a source finds its Endpoints
// without scanning every Endpoint of its namespace.
const IndexEndpointSource = "polycrate.io/endpoint-source"

// sourceLabels are the Endpoint labels naming a source.
var sourceLabels = []string{v1.LabelEndpointSourceIngress, v1.LabelEndpointSourceHTTPRoute}

func endpointSourceKeys(o client.Object) []string {
	l := o.GetLabels()
	if l[v1.LabelDiscovered] != v1.LabelValueTrue {
		return nil
	}
	var out []string
	for _, k := range sourceLabels {
		if v := l[k]; v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// IndexEndpoints registers IndexEndpointSource with the manager's cache.
func IndexEndpoints(ctx context.Context, mgr interface{ GetFieldIndexer() client.FieldIndexer }) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1.Endpoint{}, IndexEndpointSource, endpointSourceKeys)
}

// orphaned deletes the Endpoints of a source that is gone: the stale sweep's
// work, done at once when such an Endpoint appears or changes — e.g. one a
// replica created for a source deleted while it was paused, or one created
// after the source's deletion passed (their events map to the gone source).
// The source is read uncached first: the cache may lag behind a new source.
func (r *SourceReconciler) orphaned(ctx context.Context, req ctrl.Request) error {
	owned, err := ownedEndpoints(ctx, r.Client, req.Namespace, r.Inspector.Label, req.Name)
	if err != nil || len(owned) == 0 {
		return err
	}
	if r.Reader != nil {
		err := r.Reader.Get(ctx, req.NamespacedName, r.Inspector.New())
		if err == nil || !apierrors.IsNotFound(err) {
			return client.IgnoreNotFound(err) // it exists after all: its own event follows
		}
	}
	for i := range owned {
		if !owned[i].DeletionTimestamp.IsZero() {
			continue
		}
		r.Log.Info("deleting an Endpoint whose source is gone", "namespace", owned[i].Namespace, "name", owned[i].Name,
			"source", r.Inspector.Label+"="+req.Name)
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &owned[i])); err != nil {
			return err
		}
	}
	return nil
}

// ownedEndpoints lists the Endpoints a source created (through the index).
// They are the cache's own (UnsafeDisableDeepCopy: no copy per lookup,
// on every event of every source): read them, delete them, never change them.
func ownedEndpoints(ctx context.Context, c client.Client, namespace, label, name string) ([]v1.Endpoint, error) {
	list := &v1.EndpointList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{IndexEndpointSource: label + "=" + name},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// desiredEndpoint is the Endpoint CR a host's check declares: labels, an owner
// reference to the source, the sync's cleanup finalizer (declared with the CR: one
// write less than the sync adding it in a patch of its own) and the spec of the
// seed's example, with the CRD's defaults filled in so it compares equal to what
// the API server stores.
func desiredEndpoint(src client.Object, gvk schema.GroupVersionKind, sourceLabel string, check annotations.Check, s annotations.Settings) *v1.Endpoint {
	codes := make([]int32, len(check.ExpectedStatus))
	for i, code := range check.ExpectedStatus {
		codes[i] = int32(code)
	}
	if len(codes) == 0 {
		codes = []int32{int32(annotations.DefaultExpectedStatus[0])}
	}
	tls := check.TLS
	spec := v1.EndpointSpec{DisplayName: check.Host, RemoteAddress: check.Host, RemotePort: int32(check.Port), Kind: "http",
		TLS: &tls, Path: check.Path, Timeout: int32(check.Timeout), Interval: int32(check.Interval),
		ExpectedStatusCodes: codes, ExpectedBody: check.ExpectedBody, K8sAppName: s.K8sAppName}
	if spec.Path == "" {
		spec.Path = annotations.DefaultPath
	}
	if spec.RemotePort == 0 {
		spec.RemotePort = int32(annotations.DefaultPort)
	}
	if spec.Timeout == 0 {
		spec.Timeout = int32(annotations.DefaultTimeout)
	}
	if spec.Interval == 0 {
		spec.Interval = int32(annotations.DefaultInterval)
	}
	return &v1.Endpoint{
		ObjectMeta: metav1.ObjectMeta{
			Name: endpointName(check.Host), Namespace: src.GetNamespace(),
			Labels:     map[string]string{v1.LabelDiscovered: v1.LabelValueTrue, sourceLabel: src.GetName()},
			Finalizers: []string{v1.FinalizerEndpointCleanup},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
				Name: src.GetName(), UID: src.GetUID()}},
		},
		Spec: spec,
	}
}

// applyConcurrency bounds the applies one source's reconcile has in flight.
const applyConcurrency = 8

// applyEndpoints declares a source's Endpoints, at once rather than one after
// another: a source's reconcile waited for each host's apply in turn, and at
// the seed's 4 workers discovery's round trips were what held a convergence
// (its queue never emptied while the Endpoint sync's stayed empty;
// docs/performance.md). The first error is returned once every apply has ended;
// wrote says whether any apply was sent.
func applyEndpoints(ctx context.Context, c client.Client, src client.Object, sourceLabel string, checks []annotations.Check, s annotations.Settings) (bool, error) {
	if len(checks) == 1 {
		return applyEndpoint(ctx, c, src, sourceLabel, checks[0], s)
	}
	var g errgroup.Group
	var wrote atomic.Bool
	g.SetLimit(applyConcurrency)
	for _, check := range checks {
		g.Go(func() error {
			w, err := applyEndpoint(ctx, c, src, sourceLabel, check, s)
			if w {
				wrote.Store(true)
			}
			return err
		})
	}
	err := g.Wait()
	return wrote.Load(), err
}

// applyEndpoint declares a host's Endpoint CR with server-side apply (field owner
// polycrate-operator, forced: a taking-over source replaces the previous source's
// label and owner reference). The apply is skipped when the cached Endpoint
// already is what it declares: a source is reconciled on every event of its
// Endpoints, and each no-op apply would still cost the API server a full
// apply pass. It reports whether it sent the apply.
func applyEndpoint(ctx context.Context, c client.Client, src client.Object, sourceLabel string, check annotations.Check, s annotations.Settings) (bool, error) {
	gvk, err := c.GroupVersionKindFor(src)
	if err != nil {
		return false, err
	}
	want := desiredEndpoint(src, gvk, sourceLabel, check, s)
	// Read, never changed: the cache's own maps and slices (no deep copy of
	// every Endpoint of every source pass).
	have := &v1.Endpoint{}
	var cached *v1.EndpointSpec
	switch err := c.Get(ctx, client.ObjectKeyFromObject(want), have, &client.GetOptions{UnsafeDisableDeepCopy: new(true)}); {
	case err == nil && !have.DeletionTimestamp.IsZero():
		return false, nil // being removed: declared anew once it is gone (its deletion re-queues the source)
	case err == nil && upToDate(have, want, sourceLabel):
		return false, nil
	case err == nil:
		cached = &have.Spec
	case !apierrors.IsNotFound(err):
		return false, err
	}
	us := appliedSpec(&want.Spec, cached)
	owner := want.OwnerReferences[0]
	body, err := json.Marshal(map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": "Endpoint",
		"metadata": map[string]any{
			"name": want.Name, "namespace": want.Namespace,
			"labels":     map[string]any{v1.LabelDiscovered: v1.LabelValueTrue, sourceLabel: src.GetName()},
			"finalizers": []any{v1.FinalizerEndpointCleanup},
			"ownerReferences": []any{map[string]any{"apiVersion": owner.APIVersion, "kind": owner.Kind,
				"name": owner.Name, "uid": string(owner.UID)}},
		},
		"spec": us,
	})
	if err != nil {
		return false, err
	}
	// The answer is asked for as metadata only (PartialObjectMetadata): nothing
	// reads it, and decoding the whole Endpoint from JSON was 3.5 % of the
	// operator's CPU during a convergence (docs/performance.md).
	target := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	target.SetGroupVersionKind(v1.GroupVersion.WithKind("Endpoint"))
	return true, c.Patch(ctx, target, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(v1.FieldOwner), client.ForceOwnership)
}

// appliedSpec is the spec an apply declares. A field whose value is the CRD's
// default (api/v1alpha1: DefaultEndpointPort and the rest) is left out — the
// API server fills it in — unless the cached Endpoint (nil: none) holds
// another value there, which the forced apply takes back. Every field an
// apply declares is a record in the Endpoint's managedFields, stored with it
// and encoded into each of its watch events: the seven defaults were 7 of the
// 97 JSON values of an Endpoint the operator wrote, and the API server's
// encoding of those values is what bounds the list of a restart at scale
// (docs/performance.md). A field whose cached value is not the default is
// declared even at the default — the cache holds no managedFields that could
// tell the operator's own earlier value (which leaving it out would remove, to
// be defaulted again) from another manager's (which it would not). A field
// the operator declared before at the default and leaves out now is removed
// and defaulted again: the same value.
func appliedSpec(want, cached *v1.EndpointSpec) map[string]any {
	us := map[string]any{"displayName": want.DisplayName, "remoteAddress": want.RemoteAddress}
	declare := func(name string, value any, isDefault, cachedDiffers bool) {
		if !isDefault || cachedDiffers {
			us[name] = value
		}
	}
	declare("remotePort", int64(want.RemotePort), want.RemotePort == v1.DefaultEndpointPort, cached != nil && cached.RemotePort != want.RemotePort)
	declare("kind", want.Kind, want.Kind == v1.DefaultEndpointKind, cached != nil && cached.Kind != want.Kind)
	tls := want.TLS == nil || *want.TLS
	declare("tls", tls, tls == v1.DefaultEndpointTLS, cached != nil && !sameBool(cached.TLS, want.TLS))
	declare("path", want.Path, want.Path == v1.DefaultEndpointPath, cached != nil && cached.Path != want.Path)
	declare("timeout", int64(want.Timeout), want.Timeout == v1.DefaultEndpointTimeout, cached != nil && cached.Timeout != want.Timeout)
	declare("interval", int64(want.Interval), want.Interval == v1.DefaultEndpointInterval, cached != nil && cached.Interval != want.Interval)
	codes := make([]any, len(want.ExpectedStatusCodes))
	for i, code := range want.ExpectedStatusCodes {
		codes[i] = int64(code)
	}
	declare("expectedStatusCodes", codes, slices.Equal(want.ExpectedStatusCodes, []int32{v1.DefaultEndpointStatusCode}),
		cached != nil && !slices.Equal(cached.ExpectedStatusCodes, want.ExpectedStatusCodes))
	if want.ExpectedBody != "" {
		us["expectedBody"] = want.ExpectedBody
	}
	if want.K8sAppName != "" {
		us["k8sAppName"] = want.K8sAppName
	}
	return us
}

// upToDate reports whether a cached Endpoint already is what an apply would
// declare: the spec, the owner reference, the discovered and source labels (and
// no other source's label), the finalizer.
func upToDate(have, want *v1.Endpoint, sourceLabel string) bool {
	if !sameSpec(&have.Spec, &want.Spec) || !sameOwners(have.OwnerReferences, want.OwnerReferences) ||
		!controllerutil.ContainsFinalizer(have, v1.FinalizerEndpointCleanup) {
		return false
	}
	for _, k := range sourceLabels {
		if _, ok := have.Labels[k]; ok && k != sourceLabel {
			return false
		}
	}
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	return true
}

// sameSpec is equality.Semantic.DeepEqual of two Endpoint specs (a nil and an
// empty list are equal), field by field: the reflective comparison was half of
// a no-op source pass's CPU on a restart at 20,000 Ingresses
// (docs/performance.md). TestSameSpecComparesEveryField fails when a field is
// added to the spec and not here.
func sameSpec(a, b *v1.EndpointSpec) bool {
	return a.DisplayName == b.DisplayName && a.RemoteAddress == b.RemoteAddress && a.RemotePort == b.RemotePort &&
		a.Kind == b.Kind && sameBool(a.TLS, b.TLS) && a.Path == b.Path && a.Timeout == b.Timeout && a.Interval == b.Interval &&
		slices.Equal(a.ExpectedStatusCodes, b.ExpectedStatusCodes) && a.ExpectedBody == b.ExpectedBody && a.K8sAppName == b.K8sAppName
}

// sameOwners is equality.Semantic.DeepEqual of two owner reference lists.
func sameOwners(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			sameBool(x.Controller, y.Controller) && sameBool(x.BlockOwnerDeletion, y.BlockOwnerDeletion)
	})
}

func sameBool(a, b *bool) bool { return a == b || (a != nil && b != nil && *a == *b) }

// annotateSource writes the API ids of the source's endpoints and the latest sync
// time onto the source, only when they change, and moves the deprecated K8sApp
// label to the annotation. owned is what the cache holds of the source's
// Endpoints after this pass's writes (the list from before when it wrote none).
func (r *SourceReconciler) annotateSource(ctx context.Context, obj client.Object, owned []v1.Endpoint, wanted map[string]bool) error {
	ids, synced := sourceAnnotations(owned, wanted)
	if !settled(owned, wanted, time.Now()) {
		// A host's first sync is under way: its id comes with the next event of its
		// Endpoint (every Endpoint event requeues the source), and all ids go in one
		// patch then, not one per host.
		ids, synced = "", ""
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	changed := false
	set := func(k, v string) {
		if v != "" && ann[k] != v {
			ann[k] = v
			changed = true
		}
	}
	set(AnnotationAPIIDs, ids)
	set(AnnotationSyncedAt, synced)
	labels := obj.GetLabels()
	if v, ok := labels[v1.LabelK8sAppNameDeprecated]; ok {
		delete(labels, v1.LabelK8sAppNameDeprecated)
		obj.SetLabels(labels)
		if _, has := ann[annotations.K8sAppName]; !has {
			set(annotations.K8sAppName, v)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	obj.SetAnnotations(ann)
	return client.IgnoreNotFound(r.Client.Patch(ctx, obj, patch))
}

// settleWindow bounds how long a source's id annotation waits for a new
// Endpoint's first sync. Waiting saves a write per source with more than one
// host: at 5,000 Ingresses of 2 hosts, 0.2 Kubernetes writes per Endpoint
// (docs/performance.md). An Endpoint older than this that the sync has not
// touched (its kind's sync off, say) no longer holds the others' ids back.
const settleWindow = time.Minute

// settled reports whether every wanted Endpoint has been through the sync once
// (an API id, or a Ready condition saying why not), or is too old to wait for.
// A wanted Endpoint not in the cache yet was applied a moment ago.
func settled(owned []v1.Endpoint, wanted map[string]bool, now time.Time) bool {
	seen := 0
	for i := range owned {
		ep := &owned[i]
		if !wanted[ep.Name] {
			continue
		}
		seen++
		if ep.Status.APIID == "" && meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionReady) == nil &&
			now.Sub(ep.CreationTimestamp.Time) < settleWindow {
			return false
		}
	}
	return seen == len(wanted)
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
