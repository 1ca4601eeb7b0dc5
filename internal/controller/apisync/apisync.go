// Package apisync is the one sync loop from the operator's CRs to the Polycrate
// API. A kind plugs in with a small Adapter (which API resource, how the CR becomes
// a payload, how to find its object by natural key, where its status lives); every
// kind gets the same guarantees:
//
//   - change detection: the payload's hash is kept in status; an unchanged hash and
//     an object known to exist mean no API call at all;
//   - adopt before create: the object is looked up by its natural key first, and a
//     409 on create is adopted, so a crash between create and status write never
//     leaves a duplicate;
//   - self-repair: before an update the object is read (404 or is_deleted →
//     recreated, with an event), and a periodic paged list finds objects deleted in
//     the API without a GET per object;
//   - a finalizer deletes the API object (404 counts as done);
//   - errors by nature: bad input → condition + Warning event, no retry storm;
//     waiting (no connection, no local cluster) → condition, woken by the change;
//     transient → exponential backoff.
package apisync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/agent"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/opconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// State is the sync part of a CR's status, whatever the kind names its fields.
type State struct {
	Phase        string
	APIID        string
	ConfigHash   string
	LastSyncedAt *metav1.Time
	Message      string
	Generation   int64
}

// Phases (the Endpoint kind spells them in lower case, as in the seed).
const (
	PhasePending = "Pending"
	PhaseSynced  = "Synced"
	PhaseError   = "Error"
)

// Adapter is what one kind contributes.
type Adapter[O client.Object] interface {
	// Name is the kind's name, e.g. "Endpoint".
	Name() string
	New() O
	List(ctx context.Context, c client.Client) ([]O, error)
	Finalizer() string
	// Payload is the API body for the object. ErrPermanent-wrapped errors are bad
	// input; opconfig.ErrNoLocalCluster means wait.
	Payload(obj O, snap *opconfig.Snapshot) (any, error)
	// Find looks the API object up by its natural key ("" when absent).
	Find(ctx context.Context, c *polycrate.Client, obj O, payload any) (string, error)
	Create(ctx context.Context, c *polycrate.Client, payload any) (string, error)
	Update(ctx context.Context, c *polycrate.Client, id string, payload any) error
	// Exists reads the object (false for 404 or is_deleted).
	Exists(ctx context.Context, c *polycrate.Client, id string) (bool, error)
	Delete(ctx context.Context, c *polycrate.Client, id string) error
	// LiveIDs lists the ids of the kind's API objects (for self-repair), in few requests.
	LiveIDs(ctx context.Context, c *polycrate.Client, snap *opconfig.Snapshot) (map[string]bool, error)
	GetState(obj O) State
	SetState(obj O, s State)
	Conditions(obj O) *[]metav1.Condition
	// PhaseName maps a phase to the kind's spelling.
	PhaseName(phase string) string
}

// Preparer is an optional Adapter part: work against the API before the payload
// is built (e.g. resolving a linked object's id into status). It must not write
// to the API and should cache what it found in the object's status.
type Preparer[O client.Object] interface {
	Prepare(ctx context.Context, c *polycrate.Client, obj O) error
}

// DeleteFinder is an optional Adapter part for kinds whose Find adopts more than
// the operator itself could have created (K8sApp adopts an app the API made with
// no namespace): on deletion of a CR that has no API id yet, only what this CR's
// own create would have made is looked up, and retired or deleted.
type DeleteFinder[O client.Object] interface {
	FindOwn(ctx context.Context, c *polycrate.Client, obj O, payload any) (string, error)
}

// StatusTrigger is an optional Adapter part for kinds whose payload also comes from
// status fields another controller writes: it names the status changes that need
// a sync (the reconciler's own status writes must not).
type StatusTrigger[O client.Object] interface {
	NeedsSync(old, new O) bool
}

// ErrNotConnected is what a Preparer returns when it needs the API and there is no
// connection yet.
var ErrNotConnected = errors.New("not connected to the Polycrate API")

// ErrPermanent marks bad input: retrying unchanged fails again.
var ErrPermanent = errors.New("invalid")

// Reconciler syncs one kind.
type Reconciler[O client.Object] struct {
	Client   client.Client
	Adapter  Adapter[O]
	Config   *opconfig.Store
	Conn     *agent.Connection
	Recorder recorder.EventRecorder
	Log      logr.Logger
	// Verify is how often the repair runnable lists the API objects (default 5 minutes).
	Verify time.Duration
	// Related are other kinds whose changes wake objects of this kind (e.g. a K8sApp
	// getting its API id wakes the Endpoints that claim it).
	Related []Related

	missing sync.Map // API ids the last list did not contain
	wake    chan event.GenericEvent
	recent  recentWrites
}

// IndexAPIID indexes every synced kind by the API id in its status: which CR
// holds an API object (adoption and deletion must never take one another CR holds).
const IndexAPIID = "polycrate.io/api-id"

// localClusterRecheck is how often an object waiting for the local cluster looks
// again on its own; notConnectedRecheck how often one waiting for the connection does.
const (
	localClusterRecheck = 2 * time.Minute
	notConnectedRecheck = 30 * time.Second
)

// Reconcile runs the skeleton for one object.
func (r *Reconciler[O]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.Adapter.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.recall(obj)
	if !obj.GetDeletionTimestamp().IsZero() {
		return r.finalize(ctx, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, r.Adapter.Finalizer()) {
		// Its own patch; the work continues in this pass (a finalizer change is no
		// event under the spec/label predicate).
		patch := client.MergeFrom(obj.DeepCopyObject().(O))
		controllerutil.AddFinalizer(obj, r.Adapter.Finalizer())
		if err := r.Client.Patch(ctx, obj, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}

	before := obj.DeepCopyObject().(O)
	res, err := r.sync(ctx, obj)
	if !equality.Semantic.DeepEqual(before, obj) { // status is the only thing sync changes
		// A merge patch of just what sync changed: another controller may own other
		// status fields (K8sApp discovery writes the pod part), and a conflict here
		// would lose a write the API already took.
		if uerr := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before)); uerr != nil && !apierrors.IsNotFound(uerr) {
			return reconcile.Result{}, errors.Join(err, uerr)
		}
		r.remember(obj)
	}
	return res, err
}

// recall brings a status the cache has not caught up with to what this process
// last wrote (an event can arrive before the cache holds the status patch just
// made): without it a brand-new object looks unsynced, is "adopted" from the API
// it was just created in, and costs a GET and a PUT.
func (r *Reconciler[O]) recall(obj O) {
	st := r.Adapter.GetState(obj)
	w, ok := r.recent.get(obj.GetUID())
	switch {
	case !ok:
	case st.APIID == w.id && st.ConfigHash == w.hash:
		r.recent.forget(obj.GetUID()) // the cache caught up
	default:
		// Only this process writes these fields (the leader's sync), so what it
		// remembers is newer than any cached status.
		st.APIID, st.ConfigHash = w.id, w.hash
		r.Adapter.SetState(obj, st)
	}
}

// remember notes a status this process wrote, with an API id in it.
func (r *Reconciler[O]) remember(obj O) {
	if st := r.Adapter.GetState(obj); st.APIID != "" {
		r.recent.put(obj.GetUID(), write{id: st.APIID, hash: st.ConfigHash})
	}
}

// heldBy names another live CR of the kind whose status holds the API id ("" if
// none): two CRs whose natural keys collide must never share an API object —
// they would overwrite each other's payload, and deleting one would delete the
// other's object.
func (r *Reconciler[O]) heldBy(ctx context.Context, obj O, id string) (string, error) {
	gvk, err := r.Client.GroupVersionKindFor(obj)
	if err != nil {
		return "", err
	}
	gvk.Kind += "List"
	lo, err := r.Client.Scheme().New(gvk)
	if err != nil {
		return "", err
	}
	list, ok := lo.(client.ObjectList)
	if !ok {
		return "", fmt.Errorf("%s is not a list", gvk)
	}
	if err := r.Client.List(ctx, list, client.MatchingFields{IndexAPIID: id}); err != nil {
		return "", err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return "", err
	}
	for _, it := range items {
		o, ok := it.(client.Object)
		if ok && o.GetUID() != obj.GetUID() && o.GetDeletionTimestamp().IsZero() {
			return o.GetNamespace() + "/" + o.GetName(), nil
		}
	}
	return "", nil
}

// adoptable refuses an object found by natural key that another CR holds.
func (r *Reconciler[O]) adoptable(ctx context.Context, obj O, id string) error {
	holder, err := r.heldBy(ctx, obj, id)
	if err != nil || holder == "" {
		return err
	}
	return fmt.Errorf("%w: its API object %s (found by the natural key) belongs to %s %s; two objects whose names collide are never synced into one — rename one of them",
		errNameCollision, id, r.Adapter.Name(), holder)
}

var errNameCollision = errors.New("name collision")

// sync does the work; it only changes the object's status in memory.
func (r *Reconciler[O]) sync(ctx context.Context, obj O) (reconcile.Result, error) {
	st := r.Adapter.GetState(obj)
	snap := r.Config.Get()
	c := r.Conn.Client()
	notConnected := func() (reconcile.Result, error) {
		r.waiting(obj, v1.ReasonAPIUnavailable, "not connected to the Polycrate API yet (see the OperatorConfig's conditions)")
		return reconcile.Result{RequeueAfter: notConnectedRecheck}, nil
	}
	switch {
	case snap == nil && !r.Config.Loaded():
		return reconcile.Result{}, nil // just started: the configuration change wakes every object
	case snap == nil:
		r.waiting(obj, v1.ReasonOperatorConfigMissing, "no OperatorConfig: nothing is synced to the Polycrate API")
		return reconcile.Result{}, nil
	case !opconfig.Enabled(snap.Spec.APISync.Enabled):
		r.waiting(obj, v1.ReasonDisabled, "api_sync.enabled is false")
		return reconcile.Result{}, nil
	}
	if p, ok := r.Adapter.(Preparer[O]); ok {
		if err := p.Prepare(ctx, c, obj); errors.Is(err, ErrNotConnected) {
			return notConnected()
		} else if err != nil {
			return r.apiError(obj, err)
		}
	}
	payload, err := r.Adapter.Payload(obj, snap)
	switch {
	case errors.Is(err, opconfig.ErrNoLocalCluster):
		// The configuration change that registers the cluster wakes every object;
		// the requeue is only a safety net should that wake be missed.
		r.waiting(obj, v1.ReasonWaitingForLocalCluster, err.Error())
		return reconcile.Result{RequeueAfter: localClusterRecheck}, nil
	case err != nil:
		r.failed(obj, v1.ReasonInvalidSpec, err.Error(), true)
		return reconcile.Result{}, nil
	}
	hash := Hash(payload)
	_, missing := r.missing.Load(st.APIID)

	if st.APIID != "" && hash == st.ConfigHash && !missing {
		r.synced(obj, st, hash, false) // nothing changed: no API call (also while not connected)
		return reconcile.Result{}, nil
	}
	if c == nil {
		return notConnected()
	}
	id := st.APIID
	if id != "" {
		exists, err := r.Adapter.Exists(ctx, c, id)
		if err != nil {
			return r.apiError(obj, err)
		}
		if !exists {
			r.event(obj, corev1.EventTypeWarning, v1.ReasonRecreated, fmt.Sprintf("the API object %s was deleted in the API; recreating it", id))
			id = ""
		} else if hash == st.ConfigHash {
			r.missing.Delete(id) // the list was stale: it exists and is unchanged
			r.synced(obj, st, hash, false)
			return reconcile.Result{}, nil
		}
	}
	if id == "" {
		found, err := r.Adapter.Find(ctx, c, obj, payload)
		if err != nil {
			return r.apiError(obj, err)
		}
		if found != "" {
			if err := r.adoptable(ctx, obj, found); err != nil {
				return r.apiError(obj, err)
			}
			id = found
			r.event(obj, corev1.EventTypeNormal, v1.ReasonAdopted, "adopted the existing API object "+found)
		}
	}
	if id == "" {
		created, err := r.Adapter.Create(ctx, c, payload)
		if polycrate.IsConflict(err) {
			created, err = r.Adapter.Find(ctx, c, obj, payload)
			if err == nil && created == "" {
				err = fmt.Errorf("the API answered 409 but the object cannot be found by its natural key")
			}
			if err == nil {
				err = r.adoptable(ctx, obj, created)
			}
		}
		if err == nil && created == "" {
			err = fmt.Errorf("%w: the API confirmed the create without an id", ErrPermanent)
		}
		if err != nil {
			return r.apiError(obj, err)
		}
		id = created
	} else if err := r.Adapter.Update(ctx, c, id, payload); err != nil {
		if polycrate.IsNotFound(err) {
			// Deleted between the lookup and the update (e.g. by the finalizer of the
			// CR that held it): the next pass finds it gone and creates it anew.
			r.missing.Store(id, true)
			r.failed(obj, v1.ReasonAPIError, fmt.Sprintf("API object %s disappeared during the update; looking again", id), false)
			return reconcile.Result{}, err // backoff
		}
		return r.apiError(obj, err)
	}
	r.missing.Delete(st.APIID)
	st.APIID = id
	r.synced(obj, st, hash, true)
	return reconcile.Result{}, nil
}

// finalize deletes the CR's API object, then removes the finalizer. A CR with no
// API id in its status may still have one: a crash (or a lost answer) after the
// API committed the create and before the status held the id. So the object is
// looked up by the natural key the create path adopts by, and deleted when found;
// an object another CR holds is never deleted.
func (r *Reconciler[O]) finalize(ctx context.Context, obj O) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, r.Adapter.Finalizer()) {
		return reconcile.Result{}, nil
	}
	id := r.Adapter.GetState(obj).APIID
	c, snap := r.Conn.Client(), r.Config.Get()
	if c == nil {
		switch {
		case id == "" && snap == nil && !r.Config.Loaded():
			return reconcile.Result{RequeueAfter: notConnectedRecheck}, nil // just started: the configuration's arrival wakes it
		case id == "" && (snap == nil || !opconfig.Enabled(snap.Spec.APISync.Enabled)):
			// API sync is off (or unconfigured): the operator may not ask the API,
			// and no object of this CR is known there.
			return r.release(ctx, obj)
		}
		what := "delete API object " + id
		if id == "" {
			what = "look up (by its natural key) whether an earlier run created an API object for it, and delete that"
		}
		before := obj.DeepCopyObject().(O)
		r.waiting(obj, v1.ReasonDeleting, "waiting for the Polycrate API connection to "+what)
		r.patchStatus(ctx, obj, before)
		return reconcile.Result{RequeueAfter: notConnectedRecheck}, nil
	}
	if id == "" {
		found, err := r.findOwn(ctx, c, obj, snap)
		if err != nil {
			return r.finalizeError(ctx, obj, "look up the API object of", err)
		}
		if found == "" {
			return r.release(ctx, obj)
		}
		id = found
		r.Log.Info("deleting an API object found by its natural key (its id never reached the status)",
			"kind", r.Adapter.Name(), "namespace", obj.GetNamespace(), "name", obj.GetName(), "apiID", id)
	}
	holder, err := r.heldBy(ctx, obj, id)
	if err != nil {
		return reconcile.Result{}, err
	}
	if holder != "" {
		r.event(obj, corev1.EventTypeNormal, v1.ReasonDeleting, fmt.Sprintf("API object %s is kept: %s %s holds it", id, r.Adapter.Name(), holder))
		return r.release(ctx, obj)
	}
	if err := polycrate.IgnoreNotFound(r.Adapter.Delete(ctx, c, id)); err != nil {
		return r.finalizeError(ctx, obj, "delete API object "+id+" of", err)
	}
	return r.release(ctx, obj)
}

// findOwn looks up by natural key what this CR's create would have made.
func (r *Reconciler[O]) findOwn(ctx context.Context, c *polycrate.Client, obj O, snap *opconfig.Snapshot) (string, error) {
	if snap == nil {
		return "", nil
	}
	payload, err := r.Adapter.Payload(obj, snap)
	if err != nil {
		// No payload (no local cluster, invalid spec): no create could have been sent.
		return "", nil
	}
	if f, ok := r.Adapter.(DeleteFinder[O]); ok {
		return f.FindOwn(ctx, c, obj, payload)
	}
	return r.Adapter.Find(ctx, c, obj, payload)
}

// finalizeError: transient → backoff; anything else → condition, event, and a
// look again in a minute.
func (r *Reconciler[O]) finalizeError(ctx context.Context, obj O, what string, err error) (reconcile.Result, error) {
	if polycrate.IsTransient(err) {
		return reconcile.Result{}, err
	}
	before := obj.DeepCopyObject().(O)
	r.failed(obj, v1.ReasonAPIError, "cannot "+what+" this object: "+err.Error(), true)
	r.patchStatus(ctx, obj, before)
	return reconcile.Result{RequeueAfter: time.Minute}, nil
}

// release removes the finalizer.
func (r *Reconciler[O]) release(ctx context.Context, obj O) (reconcile.Result, error) {
	r.recent.forget(obj.GetUID())
	patch := client.MergeFrom(obj.DeepCopyObject().(O))
	controllerutil.RemoveFinalizer(obj, r.Adapter.Finalizer())
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, obj, patch))
}

// patchStatus writes a status change a deletion step must show (the object goes
// away on success, so there is no later patch to carry it).
func (r *Reconciler[O]) patchStatus(ctx context.Context, obj, before O) {
	if equality.Semantic.DeepEqual(before, obj) {
		return
	}
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		r.Log.V(1).Info("cannot show the deletion state", "kind", r.Adapter.Name(), "namespace", obj.GetNamespace(), "name", obj.GetName(), "error", err.Error())
	}
}

// apiError records an API failure by its nature.
func (r *Reconciler[O]) apiError(obj O, err error) (reconcile.Result, error) {
	switch {
	case polycrate.IsTransient(err):
		// A Warning on the transition only: the retries that follow change nothing.
		r.failed(obj, v1.ReasonAPIUnavailable, err.Error(), true)
		if wait := polycrate.RetryAfter(err); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		return reconcile.Result{}, err // exponential backoff
	case polycrate.IsUnauthorized(err), polycrate.IsForbidden(err):
		r.failed(obj, v1.ReasonUnauthorized, err.Error(), true)
		return reconcile.Result{RequeueAfter: 5 * time.Minute}, nil
	case errors.Is(err, errNameCollision):
		r.failed(obj, v1.ReasonNameCollision, err.Error(), true)
		return reconcile.Result{}, nil // until one of them changes
	case polycrate.IsRedirect(err):
		r.failed(obj, v1.ReasonAPIRedirect, err.Error(), true)
		return reconcile.Result{}, nil // the URL's fix is a configuration change, which wakes every object
	default:
		r.failed(obj, v1.ReasonAPIError, err.Error(), true)
		return reconcile.Result{}, nil // bad input: wait for a change
	}
}

func (r *Reconciler[O]) synced(obj O, st State, hash string, wrote bool) {
	st.Phase = r.Adapter.PhaseName(PhaseSynced)
	st.ConfigHash = hash
	st.Message = ""
	st.Generation = obj.GetGeneration()
	if wrote {
		now := metav1.Now()
		st.LastSyncedAt = &now
	}
	failedBefore := r.Adapter.GetState(obj).Phase == r.Adapter.PhaseName(PhaseError)
	r.Adapter.SetState(obj, st)
	if r.condition(obj, metav1.ConditionTrue, v1.ReasonSynced, "synced to the Polycrate API as "+st.APIID) && failedBefore {
		// A recovery from a failure is an event too (a first sync, or the end of a
		// wait for the OperatorConfig, is not: that cause has its events there).
		r.event(obj, corev1.EventTypeNormal, v1.ReasonSynced, "synced again to the Polycrate API as "+st.APIID)
	}
}

func (r *Reconciler[O]) waiting(obj O, reason, msg string) {
	st := r.Adapter.GetState(obj)
	if st.Phase == "" || st.Phase == r.Adapter.PhaseName(PhaseError) {
		st.Phase = r.Adapter.PhaseName(PhasePending)
	}
	st.Message = msg
	r.Adapter.SetState(obj, st)
	r.condition(obj, metav1.ConditionFalse, reason, msg)
}

func (r *Reconciler[O]) failed(obj O, reason, msg string, warn bool) {
	st := r.Adapter.GetState(obj)
	st.Phase = r.Adapter.PhaseName(PhaseError)
	st.Message = msg
	r.Adapter.SetState(obj, st)
	if r.condition(obj, metav1.ConditionFalse, reason, msg) && warn {
		r.event(obj, corev1.EventTypeWarning, reason, msg)
	}
}

// condition sets Ready; true when its status or reason changed.
func (r *Reconciler[O]) condition(obj O, status metav1.ConditionStatus, reason, msg string) bool {
	_, transitioned := controller.SetCondition(r.Adapter.Conditions(obj), metav1.Condition{Type: v1.ConditionReady,
		Status: status, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()})
	return transitioned
}

func (r *Reconciler[O]) event(obj O, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, "Sync", "%s", msg)
	}
}

// Hash is the change-detection hash of a payload.
func Hash(payload any) string {
	b, _ := json.Marshal(payload)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// SetupWithManager wires the reconciler: the kind, configuration changes (which
// wake every object: a new connection, local cluster or switch), and the repair
// runnable's findings.
func (r *Reconciler[O]) SetupWithManager(mgr manager.Manager, maxConcurrent int) error {
	if r.Verify == 0 {
		r.Verify = 5 * time.Minute
	}
	r.wake = make(chan event.GenericEvent, 1024)
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), r.Adapter.New(), IndexAPIID, func(o client.Object) []string {
		typed, ok := o.(O)
		if !ok {
			return nil
		}
		if id := r.Adapter.GetState(typed).APIID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	configChanged := r.Config.Subscribe()
	all := func(ctx context.Context) {
		objs, err := r.Adapter.List(ctx, mgr.GetClient())
		if err != nil {
			return
		}
		for _, o := range objs {
			r.wake <- event.GenericEvent{Object: o}
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-configChanged:
				all(ctx)
			}
		}
	})); err != nil {
		return err
	}
	if err := mgr.Add(&repair[O]{r: r}); err != nil {
		return err
	}
	trigger := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})
	if t, ok := r.Adapter.(StatusTrigger[O]); ok {
		trigger = predicate.Or[client.Object](trigger, predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(O)
			n, ok2 := e.ObjectNew.(O)
			return ok1 && ok2 && t.NeedsSync(o, n)
		}})
	}
	b := ctrl.ControllerManagedBy(mgr)
	for _, rel := range r.Related {
		b = b.Watches(rel.Object, handler.EnqueueRequestsFromMapFunc(rel.Map))
	}
	return b.
		Named("sync-"+r.Adapter.Name()).
		// Spec and label changes (and deletion, which bumps the generation); never the
		// reconciler's own status writes, which would re-send a refused request.
		For(r.Adapter.New(), ctrl.WithPredicates(trigger)).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options(maxConcurrent)).
		Complete(r)
}

// Related is a kind whose changes map to objects of the synced kind.
type Related struct {
	Object client.Object
	Map    handler.MapFunc
}

// repair lists the kind's API objects every Verify interval and wakes the CRs whose
// object is gone: a few paged requests instead of a GET per object.
type repair[O client.Object] struct{ r *Reconciler[O] }

func (p *repair[O]) NeedLeaderElection() bool { return true }

func (p *repair[O]) Start(ctx context.Context) error {
	t := time.NewTicker(p.r.Verify)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.r.Repair(ctx)
		}
	}
}

// Repair runs one verification pass (tests call it directly).
func (r *Reconciler[O]) Repair(ctx context.Context) {
	c := r.Conn.Client()
	snap := r.Config.Get()
	if c == nil || snap == nil {
		return
	}
	live, err := r.Adapter.LiveIDs(ctx, c, snap)
	if err != nil {
		r.Log.Info("self-repair list failed; next pass later", "kind", r.Adapter.Name(), "error", err.Error())
		return
	}
	objs, err := r.Adapter.List(ctx, r.Client)
	if err != nil {
		return
	}
	for _, o := range objs {
		id := r.Adapter.GetState(o).APIID
		if id != "" && !live[id] && o.GetDeletionTimestamp().IsZero() {
			r.missing.Store(id, true)
			r.wake <- event.GenericEvent{Object: o}
		}
	}
}
