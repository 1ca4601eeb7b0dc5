// Package apisync is the one sync loop from the operator's CRs to the Polycrate
// API. A kind plugs in with a typed Adapter (its API resource, how the CR becomes
// a payload, how to find its object by natural key) and one line in the registry
// (kinds.go); every kind gets the same guarantees:
//
//   - change detection: the payload's hash is kept in status; an unchanged hash and
//     an object known to exist mean no API call at all;
//   - adopt before create: the object is looked up by its natural key first, and a
//     409 on create is adopted, so a crash between create and status write never
//     leaves a duplicate;
//   - self-repair: before an update the object is read (404 or is_deleted →
//     recreated, with an event), and a periodic paged list finds objects deleted in
//     the API without a GET per object;
//   - a finalizer deletes the API object (404 counts as done), looked up by the
//     natural key when its id never reached the status;
//   - errors by nature (internal/controller's Classify): bad input → condition +
//     Warning event, no retry storm; waiting (no connection, no local cluster) →
//     condition, woken by the change; transient → exponential backoff.
//
// The loop reads only the operator's CRs and the live configuration: nothing of
// annotations, sources or Pods.
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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Object is a synced CR: the kit's accessors and the sync state (api/v1alpha1).
type Object interface {
	controller.Object
	SyncState() v1.SyncState
	SetSyncState(v1.SyncState)
}

// Adapter is everything one kind knows of the API; P is its payload type.
type Adapter[O Object, P any] interface {
	// Lookup fills the payload fields that need reads from Kubernetes (with the
	// reconcile's context); the zero P for kinds that need none.
	Lookup(ctx context.Context, obj O) (P, error)
	// Payload completes the API body from the object and the configuration,
	// starting from what Lookup filled. Pure. An error wrapping
	// liveconfig.ErrNoLocalCluster means wait; any other is bad input.
	Payload(obj O, snap *liveconfig.Snapshot, looked P) (P, error)
	// Find looks the API object up by its natural key ("" when absent).
	Find(ctx context.Context, c *polycrate.Client, obj O, payload P) (string, error)
	Create(ctx context.Context, c *polycrate.Client, payload P) (string, error)
	Update(ctx context.Context, c *polycrate.Client, id string, payload P) error
	// Exists reads the object (false for 404 or is_deleted).
	Exists(ctx context.Context, c *polycrate.Client, id string) (bool, error)
	// Delete deletes (or retires) the object.
	Delete(ctx context.Context, c *polycrate.Client, id string) error
	// LiveIDs lists the ids of the kind's API objects (for self-repair), in few requests.
	LiveIDs(ctx context.Context, c *polycrate.Client, snap *liveconfig.Snapshot) (map[string]bool, error)
}

// Preparer is an optional Adapter part: work against the API before the payload
// is built (e.g. resolving a linked object's id into status). It must not write
// to the API, caches what it found in the object's status, and returns
// polycrate.ErrNotConnected when it needs the API and there is no connection.
type Preparer[O Object] interface {
	Prepare(ctx context.Context, c *polycrate.Client, obj O) error
}

// DeleteFinder is an optional Adapter part for kinds whose Find adopts more than
// the operator itself could have created (K8sApp adopts an app the API made with
// no namespace): on deletion of a CR that has no API id yet, only what this CR's
// own create would have made is looked up, and retired or deleted.
type DeleteFinder[O Object, P any] interface {
	FindOwn(ctx context.Context, c *polycrate.Client, obj O, payload P) (string, error)
}

// StatusTrigger is an optional Adapter part for kinds whose payload also comes from
// status fields another controller writes: it names the status changes that need
// a sync (the reconciler's own status writes must not).
type StatusTrigger[O Object] interface {
	NeedsSync(old, new O) bool
}

// IndexAPIID indexes every synced kind by the API id in its status: which CR
// holds an API object (adoption and deletion must never take one another CR holds).
const IndexAPIID = "polycrate.io/api-id"

// Reconciler syncs one kind.
type Reconciler[O Object, P any] struct {
	controller.Deps
	Kind Kind[O, P]
	// Verify is how often the repair runnable lists the API objects (default 5 minutes).
	Verify time.Duration

	missing sync.Map // API ids the last list did not contain
	waker   *controller.Waker
	recent  recentWrites
}

// Reconcile runs the skeleton: get → deleting? → finalizer → sync → one patch.
func (r *Reconciler[O, P]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.Kind.mirror(obj) {
		return reconcile.Result{}, nil // it mirrors the API: nothing to write either way
	}
	r.recall(obj)
	deleting := !obj.GetDeletionTimestamp().IsZero()
	if !deleting {
		// The work continues in this pass (a finalizer change is no event under
		// the spec/label predicate).
		if _, err := controller.EnsureFinalizer(ctx, r.Client, obj, r.Kind.Finalizer); err != nil {
			return reconcile.Result{}, err
		}
	}
	patcher := r.StatusPatcher(obj)
	var res reconcile.Result
	var err error
	if deleting {
		var released bool
		if res, released, err = r.finalize(ctx, obj); released {
			return res, err // the object goes: no status to write
		}
	} else if err = r.sync(ctx, obj); err != nil {
		res, err = r.outcome(obj, err)
	}
	wrote, perr := patcher.Done(ctx, obj, !deleting && err == nil && obj.SyncState().Phase == v1.PhaseSynced)
	if wrote {
		r.remember(obj)
	}
	return res, errors.Join(err, perr)
}

// recall brings a status the cache has not caught up with to what this process
// last wrote (an event can arrive before the cache holds the status patch just
// made): without it a brand-new object looks unsynced, is "adopted" from the API
// it was just created in, and costs a GET and a PUT.
func (r *Reconciler[O, P]) recall(obj O) {
	st := obj.SyncState()
	w, ok := r.recent.get(obj.GetUID())
	switch {
	case !ok:
	case st.APIID == w.id && st.ConfigHash == w.hash:
		r.recent.forget(obj.GetUID()) // the cache caught up
	default:
		// Only this process writes these fields (the leader's sync), so what it
		// remembers is newer than any cached status.
		st.APIID, st.ConfigHash = w.id, w.hash
		obj.SetSyncState(st)
	}
}

// remember notes a status this process wrote, with an API id in it.
func (r *Reconciler[O, P]) remember(obj O) {
	if st := obj.SyncState(); st.APIID != "" {
		r.recent.put(obj.GetUID(), write{id: st.APIID, hash: st.ConfigHash})
	}
}

// heldBy names another live CR of the kind whose status holds the API id ("" if
// none): two CRs whose natural keys collide must never share an API object —
// they would overwrite each other's payload, and deleting one would delete the
// other's object.
func (r *Reconciler[O, P]) heldBy(ctx context.Context, obj O, id string) (string, error) {
	list := r.Kind.NewList()
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
func (r *Reconciler[O, P]) adoptable(ctx context.Context, obj O, id string) error {
	holder, err := r.heldBy(ctx, obj, id)
	if err != nil || holder == "" {
		return err
	}
	return controller.Permanent(v1.ReasonNameCollision, fmt.Sprintf("its API object %s (found by the natural key) belongs to %s %s; two objects whose names collide are never synced into one — rename one of them",
		id, r.Kind.Kind, holder))
}

// sync does the work; it only changes the object's status in memory. A nil
// error is a synced object; any other outcome is an error of the kit's
// vocabulary.
func (r *Reconciler[O, P]) sync(ctx context.Context, obj O) error {
	st := obj.SyncState()
	snap, err := r.Snapshot("api_sync", func(s *liveconfig.Snapshot) *bool { return s.Spec.APISync.Enabled }, "nothing is synced to the Polycrate API")
	if err != nil {
		return err
	}
	c := r.Conn.Client()
	if p, ok := r.Kind.Adapter.(Preparer[O]); ok {
		if err := p.Prepare(ctx, c, obj); errors.Is(err, polycrate.ErrNotConnected) {
			return controller.NotConnected
		} else if err != nil {
			return err
		}
	}
	looked, err := r.Kind.Adapter.Lookup(ctx, obj)
	if err != nil {
		return err // a Kubernetes read: backoff
	}
	payload, err := r.Kind.Adapter.Payload(obj, snap, looked)
	switch {
	case errors.Is(err, liveconfig.ErrLocalClusterDisabled):
		// Switched off on purpose: said on the object, no recheck (switching it on
		// is a configuration change, which wakes every object).
		return controller.Waiting(v1.ReasonLocalClusterDisabled, err.Error(), 0)
	case errors.Is(err, liveconfig.ErrNoLocalCluster):
		// The configuration change that registers the cluster wakes every object;
		// the requeue is only a safety net should that wake be missed.
		return controller.Waiting(v1.ReasonWaitingForLocalCluster, err.Error(), controller.RequeueLocalCluster)
	case err != nil:
		return controller.Permanent(v1.ReasonInvalidSpec, err.Error())
	}
	hash := Hash(payload)
	_, missing := r.missing.Load(st.APIID)

	if st.APIID != "" && hash == st.ConfigHash && !missing {
		r.synced(obj, st, hash, false) // nothing changed: no API call (also while not connected)
		return nil
	}
	if c == nil {
		return controller.NotConnected
	}
	return r.write(ctx, c, obj, st, payload, hash)
}

// write makes the API hold payload for obj: its recorded API object when that
// still exists (unchanged: nothing sent), else the one found by its natural key
// (adopted), else a new one (a create the API refuses as a duplicate is
// adopted); the status records the id once the API confirmed the write.
func (r *Reconciler[O, P]) write(ctx context.Context, c *polycrate.Client, obj O, st v1.SyncState, payload P, hash string) error {
	a := r.Kind.Adapter
	id := st.APIID
	if id != "" {
		exists, err := a.Exists(ctx, c, id)
		if err != nil {
			return err
		}
		if !exists {
			r.Events("Sync").Event(obj, corev1.EventTypeWarning, v1.ReasonRecreated, fmt.Sprintf("the API object %s was deleted in the API; recreating it", id))
			id = ""
		} else if hash == st.ConfigHash {
			r.missing.Delete(id) // the list was stale: it exists and is unchanged
			r.synced(obj, st, hash, false)
			return nil
		}
	}
	if id == "" {
		found, err := a.Find(ctx, c, obj, payload)
		if err != nil {
			return err
		}
		if found != "" {
			if err := r.adoptable(ctx, obj, found); err != nil {
				return err
			}
			id = found
			r.Events("Sync").Event(obj, corev1.EventTypeNormal, v1.ReasonAdopted, "adopted the existing API object "+found)
		}
	}
	if id == "" {
		created, err := a.Create(ctx, c, payload)
		if polycrate.IsConflict(err) {
			created, err = a.Find(ctx, c, obj, payload)
			if err == nil && created == "" {
				err = errors.New("the API answered 409 but the object cannot be found by its natural key")
			}
			if err == nil {
				err = r.adoptable(ctx, obj, created)
			}
		}
		if err == nil && created == "" {
			err = controller.Permanent(v1.ReasonAPIError, "the API confirmed the create without an id")
		}
		if err != nil {
			return err
		}
		id = created
	} else if err := a.Update(ctx, c, id, payload); err != nil {
		if polycrate.IsNotFound(err) {
			// Deleted between the lookup and the update (e.g. by the finalizer of the
			// CR that held it): the next pass (after a backoff) finds it gone and
			// creates it anew.
			r.missing.Store(id, true)
			return fmt.Errorf("API object %s disappeared during the update; looking again", id)
		}
		return err
	}
	r.missing.Delete(st.APIID)
	st.APIID = id
	r.synced(obj, st, hash, true)
	return nil
}

// outcome records a sync that did not end synced, by its nature.
func (r *Reconciler[O, P]) outcome(obj O, err error) (reconcile.Result, error) {
	o := controller.Classify(err)
	switch {
	case o.Reason == "": // nothing to say yet (just started)
	case o.Failed:
		r.failed(obj, o.Reason, o.Message)
	default:
		r.waiting(obj, o.Reason, o.Message)
	}
	return o.Result, o.Err
}

// finalize deletes the CR's API object, then removes the finalizer (released).
// A CR with no API id in its status may still have one: a crash (or a lost
// answer) after the API committed the create and before the status held the
// id. So the object is looked up by the natural key the create path adopts by,
// and deleted when found; an object another CR holds is never deleted.
func (r *Reconciler[O, P]) finalize(ctx context.Context, obj O) (reconcile.Result, bool, error) {
	if !controllerutil.ContainsFinalizer(obj, r.Kind.Finalizer) {
		return reconcile.Result{}, true, nil
	}
	id := obj.SyncState().APIID
	c, snap := r.Conn.Client(), r.Config.Get()
	if c == nil {
		switch {
		case id == "" && snap == nil && r.Config.Early():
			return reconcile.Result{RequeueAfter: controller.RequeueNotConnected}, false, nil // just started: the configuration's arrival wakes it
		case id == "" && (snap == nil || !liveconfig.Enabled(snap.Spec.APISync.Enabled)):
			// API sync is off (or unconfigured): the operator may not ask the API,
			// and no object of this CR is known there.
			return r.release(ctx, obj)
		}
		what := "delete API object " + id
		if id == "" {
			what = "look up (by its natural key) whether an earlier run created an API object for it, and delete that"
		}
		r.waiting(obj, v1.ReasonDeleting, "waiting for the Polycrate API connection to "+what)
		return reconcile.Result{RequeueAfter: controller.RequeueNotConnected}, false, nil
	}
	if id == "" {
		found, err := r.Kind.findOwn(ctx, c, obj, snap)
		if err != nil {
			return r.finalizeError(obj, "look up the API object of", err)
		}
		if found == "" {
			return r.release(ctx, obj)
		}
		id = found
		r.Log.Info("deleting an API object found by its natural key (its id never reached the status)",
			"kind", r.Kind.Kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "apiID", id)
	}
	holder, err := r.heldBy(ctx, obj, id)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	if holder != "" {
		r.Events("Sync").Event(obj, corev1.EventTypeNormal, v1.ReasonDeleting, fmt.Sprintf("API object %s is kept: %s %s holds it", id, r.Kind.Kind, holder))
		return r.release(ctx, obj)
	}
	if err := polycrate.IgnoreNotFound(r.Kind.Adapter.Delete(ctx, c, id)); err != nil {
		return r.finalizeError(obj, "delete API object "+id+" of", err)
	}
	return r.release(ctx, obj)
}

// finalizeError: held back by the open breaker → parked (its closing wakes the
// object); transient → backoff; anything else → condition, event, and a look
// again after RequeueFailedStep.
func (r *Reconciler[O, P]) finalizeError(obj O, what string, err error) (reconcile.Result, bool, error) {
	if errors.Is(err, polycrate.ErrFenced) {
		return reconcile.Result{RequeueAfter: controller.RequeueShortly}, false, nil // not sent; see Classify
	}
	if polycrate.IsCircuitOpen(err) {
		o := controller.Classify(err)
		r.waiting(obj, o.Reason, "cannot "+what+" this object yet: "+o.Message)
		return o.Result, false, nil
	}
	if polycrate.IsTransient(err) {
		return reconcile.Result{}, false, err
	}
	r.failed(obj, v1.ReasonAPIError, "cannot "+what+" this object: "+err.Error())
	return reconcile.Result{RequeueAfter: controller.RequeueFailedStep}, false, nil
}

// release removes the finalizer.
func (r *Reconciler[O, P]) release(ctx context.Context, obj O) (reconcile.Result, bool, error) {
	r.recent.forget(obj.GetUID())
	return reconcile.Result{}, true, controller.RemoveFinalizer(ctx, r.Client, obj, r.Kind.Finalizer)
}

func (r *Reconciler[O, P]) synced(obj O, st v1.SyncState, hash string, wrote bool) {
	failedBefore := st.Phase == v1.PhaseError
	st.Phase, st.ConfigHash, st.Message = v1.PhaseSynced, hash, ""
	if wrote {
		now := metav1.Now()
		st.LastSyncedAt = &now
	}
	obj.SetSyncState(st)
	// A recovery from a failure is an event (a first sync, or the end of a wait
	// for the OperatorConfig, is not: that cause has its events there).
	r.Events("Sync").Ready(obj, metav1.ConditionTrue, v1.ReasonSynced, "synced to the Polycrate API as "+st.APIID, failedBefore)
}

// waiting records a change the API has not confirmed (parked behind the open
// circuit breaker, waiting for the connection or the local cluster): Pending,
// whatever the phase was, so that the generation is not observed (the patcher
// marks it only for Synced) and the PHASE column, the objects metric and a
// generation-based health check (Argo CD, Flux) do not call it done. An
// unchanged object never gets here: it is synced without an API call.
func (r *Reconciler[O, P]) waiting(obj O, reason, msg string) {
	st := obj.SyncState()
	st.Phase = v1.PhasePending
	st.Message = msg
	obj.SetSyncState(st)
	r.Events("Sync").Ready(obj, metav1.ConditionFalse, reason, msg, false)
}

func (r *Reconciler[O, P]) failed(obj O, reason, msg string) {
	st := obj.SyncState()
	st.Phase, st.Message = v1.PhaseError, msg
	obj.SetSyncState(st)
	r.Events("Sync").Ready(obj, metav1.ConditionFalse, reason, msg, true)
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
func (r *Reconciler[O, P]) SetupWithManager(mgr manager.Manager) error {
	if r.Verify == 0 {
		r.Verify = controller.RequeueResync
	}
	r.waker = controller.NewWaker()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), r.Kind.New(), IndexAPIID, func(o client.Object) []string {
		if typed, ok := o.(O); ok && typed.SyncState().APIID != "" {
			return []string{typed.SyncState().APIID}
		}
		return nil
	}); err != nil {
		return err
	}
	// The wakers read the store (no copies): they only look at names and conditions.
	cached := func(ctx context.Context) ([]client.Object, error) {
		return controller.CachedObjects(ctx, mgr.GetCache(), r.Kind.New())
	}
	if err := r.waker.WakeOnConfigChange(mgr, r.Config, cached); err != nil {
		return err
	}
	if err := r.waker.WakeOnRecovery(mgr, r.Conn, cached); err != nil {
		return err
	}
	if err := controller.Every(mgr, func() time.Duration { return r.Verify }, r.Repair); err != nil {
		return err
	}
	trigger := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})
	if t, ok := r.Kind.Adapter.(StatusTrigger[O]); ok {
		trigger = predicate.Or[client.Object](trigger, predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(O)
			n, ok2 := e.ObjectNew.(O)
			return ok1 && ok2 && t.NeedsSync(o, n)
		}})
	}
	b := builder.ControllerManagedBy(mgr)
	for _, rel := range r.Kind.Related {
		b = b.Watches(rel.Object, handler.EnqueueRequestsFromMapFunc(rel.Map(mgr.GetClient())))
	}
	return b.
		Named("sync-"+r.Kind.name()).
		// Spec and label changes (and deletion, which bumps the generation); never the
		// reconciler's own status writes, which would re-send a refused request.
		For(r.Kind.New(), builder.WithPredicates(trigger)).
		WatchesRawSource(r.waker.Source()).
		WithOptions(r.Options()).
		Complete(r)
}

// Repair runs one verification pass: it lists the kind's API objects and wakes
// the CRs whose object is gone — a few paged requests instead of a GET per
// object. It runs every Verify interval on the leader (tests call it directly).
func (r *Reconciler[O, P]) Repair(ctx context.Context) {
	c := r.Conn.Client()
	snap := r.Config.Get()
	if c == nil || snap == nil {
		return
	}
	listed := time.Now()
	live, err := r.Kind.Adapter.LiveIDs(ctx, c, snap)
	if err != nil {
		r.Log.Info("self-repair list failed; next pass later", "kind", r.Kind.Kind, "error", err.Error())
		return
	}
	objs, err := r.Kind.list(ctx, r.Client)
	if err != nil {
		return
	}
	for _, o := range objs {
		st := o.(O).SyncState()
		if st.APIID != "" && !live[st.APIID] && o.GetDeletionTimestamp().IsZero() && writtenBefore(st, listed) {
			r.missing.Store(st.APIID, true)
			r.waker.Wake(ctx, o)
		}
	}
}

// writtenBefore says whether the object's last API write was before the
// repair's listing began. One written since (a create while the listing paged
// through tens of thousands of objects, as in a first convergence at scale)
// may be missing from the listing without being missing from the API: it is
// judged by the next pass, not woken to GET it now. LastSyncedAt is stored to
// the second, so the second the listing began counts as after it.
func writtenBefore(st v1.SyncState, listed time.Time) bool {
	return st.LastSyncedAt == nil || st.LastSyncedAt.Time.Before(listed.Truncate(time.Second))
}
