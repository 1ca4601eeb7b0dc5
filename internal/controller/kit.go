package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// The reconcile kit. Every reconciler that owns a CR follows one skeleton
// (docs/architecture.md "The reconciler skeleton"):
//
//	obj := get(req)                      // NotFound → done
//	if deleting(obj) { patcher; finalize; remove the finalizer }
//	EnsureFinalizer(obj)                 // its own metadata patch, before anything else
//	patcher := NewStatusPatcher(obj)     // after the last metadata write
//	defer patcher.Done(obj, success)     // one merge patch of what changed
//	steps…                               // each may end early with an Outcome

// Object is a CR the kit reconciles: the status accessors of api/v1alpha1.
type Object interface {
	client.Object
	// StatusConditions points at status.conditions.
	StatusConditions() *[]metav1.Condition
	// MarkObserved sets status.observedGeneration to the generation: the status
	// describes this generation (only on a successful reconcile).
	MarkObserved()
}

// EnsureFinalizer adds the finalizer with a patch of its own (metadata, not
// status); it reports whether it had to.
func EnsureFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, finalizersPatch(obj)); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// finalizersPatch is the merge patch that sets obj's finalizers: what
// client.MergeFrom computes for a finalizer change (a merge patch replaces a
// list whole), without a deep copy and two encodings of the whole object to
// find it (an Ingress's finalizer was 4 % of the operator's CPU during a
// convergence; docs/performance.md).
func finalizersPatch(obj client.Object) client.Patch {
	f := obj.GetFinalizers()
	if f == nil {
		f = []string{}
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": f}}) // strings only: cannot fail
	return client.RawPatch(types.MergePatchType, data)
}

// RemoveFinalizer removes the finalizer (a gone object is no error).
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	controllerutil.RemoveFinalizer(obj, finalizer)
	return client.IgnoreNotFound(c.Patch(ctx, obj, finalizersPatch(obj)))
}

// StatusPatcher writes a reconcile's status changes in one merge patch of just
// the fields that changed (another writer owns other status fields: the
// monitoring agent status.monitoring, docs/architecture.md "Status writers").
// Make it after the reconcile's last metadata write, so that the patch carries
// status only.
//
// Conditions are one list that several writers share (each its own types), and
// a merge patch replaces a list whole: a change of the conditions is therefore
// written with the object's resourceVersion as a precondition, and on a
// conflict (another writer was first; the copy the reconcile started from is
// stale) this writer's own changes — the condition types it set or removed —
// are laid over a fresh read and written again. What the other writer set
// stays.
type StatusPatcher struct {
	c      client.Client
	fresh  client.Reader // reads past the cache after a conflict
	before statusCopy
	// condsAt is a resourceVersion at which the object's conditions were
	// before.conds: the precondition of a write that changes them. A write of
	// other fields does not move it (it cannot tell whether another writer
	// changed the conditions meanwhile; a later change of the conditions then
	// conflicts once and is laid over a fresh read).
	condsAt string
}

// NewStatusPatcher remembers obj's status as it is now; after a conflict it
// reads the object again through c.
func NewStatusPatcher(c client.Client, obj client.Object) *StatusPatcher {
	return &StatusPatcher{c: c, fresh: c, before: copyStatus(obj), condsAt: obj.GetResourceVersion()}
}

// StatusPatcher is NewStatusPatcher with the uncached reader for the read after
// a conflict.
func (d Deps) StatusPatcher(obj client.Object) *StatusPatcher {
	p := NewStatusPatcher(d.Client, obj)
	if d.APIReader != nil {
		p.fresh = d.APIReader
	}
	return p
}

// conflictRetries bounds the rebase of a status write on fresh reads: each
// conflict means another writer wrote in between; more than a few in a row is
// an error for the reconcile's own back-off.
const conflictRetries = 4

// statusCopy is what a StatusPatcher compares with: a deep copy of the
// object's Status field — all a status patch can carry; copying the whole
// object was an eighth of an unchanged Endpoint's sync (40,000 of them on a
// restart at scale) — or, for a kind without one, of the whole object.
type statusCopy struct {
	status reflect.Value // the copied Status
	whole  client.Object
	conds  []metav1.Condition // the conditions within status (a kit Object's)
}

// conditionsOf is obj's status.conditions, if it is a kit Object.
func conditionsOf(obj client.Object) (*[]metav1.Condition, bool) {
	o, ok := obj.(interface{ StatusConditions() *[]metav1.Condition })
	if !ok {
		return nil, false
	}
	return o.StatusConditions(), true
}

// statusDeepCopy caches, per Status pointer type, its generated DeepCopy
// method's function (an invalid Value: none).
var statusDeepCopy sync.Map

func copyStatus(obj client.Object) statusCopy {
	if st := statusOf(obj); st.IsValid() && st.CanAddr() {
		ptr := st.Addr()
		fn, ok := statusDeepCopy.Load(ptr.Type())
		if !ok {
			// Looked up by a constant name, and called as a function: a method
			// taken by index (Value.Method) makes the linker keep every exported
			// method of every type in the binary — 60 → 100 MB, and 18 MiB more
			// file-backed RSS (the e2e spec "is built without methods it never
			// calls").
			var f reflect.Value
			if m, found := ptr.Type().MethodByName("DeepCopy"); found && m.Type.NumIn() == 1 && m.Type.NumOut() == 1 && m.Type.Out(0) == ptr.Type() {
				f = m.Func
			}
			statusDeepCopy.Store(ptr.Type(), f)
			fn = f
		}
		if f := fn.(reflect.Value); f.IsValid() {
			c := statusCopy{status: f.Call([]reflect.Value{ptr})[0].Elem()}
			if conds, ok := conditionsOf(obj); ok {
				c.conds = slices.Clone(*conds)
			}
			return c
		}
	}
	return statusCopy{whole: obj.DeepCopyObject().(client.Object)}
}

// Done marks the object observed when the reconcile succeeded and writes what
// changed; it reports whether it wrote. A gone object is no error.
func (p *StatusPatcher) Done(ctx context.Context, obj Object, success bool) (bool, error) {
	if success {
		obj.MarkObserved()
	}
	return p.Patch(ctx, obj)
}

// Patch writes what changed since the patcher was made (or last wrote). Outside
// Done it is for a step that must be visible before a slow call, and says so.
func (p *StatusPatcher) Patch(ctx context.Context, obj client.Object) (bool, error) {
	patch, changed, err := statusPatch(p.before, obj)
	if err != nil || !changed {
		return false, err
	}
	conds, hasConds := conditionsOf(obj)
	locked := hasConds && p.before.whole == nil && !equality.Semantic.DeepEqual(p.before.conds, *conds)
	if locked {
		if patch, err = withConditions(patch, p.condsAt, *conds); err != nil {
			return false, err
		}
	}
	// The answer is asked for as metadata only (PartialObjectMetadata): obj
	// already holds the status written, and decoding the whole object from JSON
	// again was 4 % of the operator's CPU during a convergence. Only the new
	// resourceVersion is taken from it.
	gvk, err := p.c.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	answer := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace()}}
	answer.SetGroupVersionKind(gvk)
	for attempt := 0; ; attempt++ {
		err = p.c.Status().Patch(ctx, answer, patch, client.WithSubResourceBody(obj))
		if !locked || !apierrors.IsConflict(err) || attempt == conflictRetries {
			break
		}
		// Another writer was first: this writer's condition changes over a
		// fresh read of the others'.
		fresh := obj.DeepCopyObject().(client.Object)
		if err = p.fresh.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			break
		}
		freshConds, _ := conditionsOf(fresh)
		*conds = rebaseConditions(p.before.conds, *conds, *freshConds)
		if patch, err = withConditions(patch, fresh.GetResourceVersion(), *conds); err != nil {
			return false, err
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("writing the status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if rv := answer.GetResourceVersion(); rv != "" { // (a fake client patches obj itself)
		obj.SetResourceVersion(rv)
	}
	if locked {
		p.condsAt = obj.GetResourceVersion()
	}
	p.before = copyStatus(obj)
	return true, nil
}

// withConditions is the status merge patch with status.conditions set to conds
// and the resourceVersion rv as its precondition.
func withConditions(patch client.Patch, rv string, conds []metav1.Condition) (client.Patch, error) {
	data, err := patch.Data(nil)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	status, _ := doc["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		doc["status"] = status
	}
	if conds == nil {
		conds = []metav1.Condition{}
	}
	status["conditions"] = conds
	doc["metadata"] = map[string]any{"resourceVersion": rv}
	data, err = json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

// rebaseConditions lays one writer's changes of the conditions — from before
// to mine: a type set or changed, a type removed — over fresh, the list as it
// is now; every other type stays as fresh has it.
func rebaseConditions(before, mine, fresh []metav1.Condition) []metav1.Condition {
	out := slices.Clone(fresh)
	for _, c := range mine {
		if b := meta.FindStatusCondition(before, c.Type); b == nil || !equality.Semantic.DeepEqual(*b, c) {
			if i := slices.IndexFunc(out, func(o metav1.Condition) bool { return o.Type == c.Type }); i >= 0 {
				out[i] = c
			} else {
				out = append(out, c)
			}
		}
	}
	for _, b := range before {
		if meta.FindStatusCondition(mine, b.Type) == nil {
			out = slices.DeleteFunc(out, func(o metav1.Condition) bool { return o.Type == b.Type })
		}
	}
	return out
}

// statusPatch is the merge patch from before's status to obj's, and whether
// the status changed at all. The status subresource takes nothing but the
// status, so the difference of the status stanzas is the whole write; it used
// to be the difference of the whole objects (client.MergeFrom: both encoded
// to JSON, decoded again into maps and compared), 6 % of the operator's CPU
// during a convergence. A kind without a Status field is diffed whole.
func statusPatch(before statusCopy, obj client.Object) (client.Patch, bool, error) {
	b, o := before.status, statusOf(obj)
	if before.whole != nil || !o.IsValid() {
		if before.whole == nil {
			return nil, false, fmt.Errorf("%T has no Status field, yet its status was copied", obj)
		}
		if equality.Semantic.DeepEqual(before.whole, obj) {
			return nil, false, nil
		}
		return client.MergeFrom(before.whole), true, nil
	}
	if equality.Semantic.DeepEqual(b.Interface(), o.Interface()) {
		return nil, false, nil
	}
	bj, err := json.Marshal(map[string]any{"status": b.Interface()})
	if err != nil {
		return nil, false, err
	}
	oj, err := json.Marshal(map[string]any{"status": o.Interface()})
	if err != nil {
		return nil, false, err
	}
	data, err := jsonpatch.CreateMergePatch(bj, oj)
	if err != nil {
		return nil, false, err
	}
	return client.RawPatch(types.MergePatchType, data), true, nil
}

// statusOf is the Status field of a CR struct (invalid if it has none).
func statusOf(obj client.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("Status")
}

// Events emits a controller's events; Action names what it was doing ("Sync").
// A failure and a recovery are also a log line and, for a failure, a count.
type Events struct {
	Recorder recorder.EventRecorder
	Action   string
	Log      logr.Logger
}

// failures is polycrate_operator_failures_total{kind,reason}: every transition of
// an object into a failure (a failure that stays is counted once, like its event).
var failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polycrate_operator_failures_total",
	Help: "Transitions of the operator's objects into a failure, by kind and reason (one per change, not per retry)."},
	[]string{"kind", "reason"})

func init() { ctrlmetrics.Registry.MustRegister(failures) }

// Failure announces that an object turned to a failure: a Warning event, one
// error-level log line with kind, name, reason and message (controller-runtime's
// convention for a reconcile that ended in an error; once per transition, the
// retries that change nothing log at info), and the failure counter.
func (e Events) Failure(obj client.Object, reason, msg string) {
	e.Event(obj, corev1.EventTypeWarning, reason, msg)
	kind := KindOf(obj)
	e.Log.Error(errors.New(msg), kind+" "+strings.ToLower(e.Action)+" failed", "kind", kind, "namespace", obj.GetNamespace(),
		"name", obj.GetName(), "action", e.Action, "reason", reason)
	failures.WithLabelValues(kind, reason).Inc()
}

// Recovery announces that an object recovered from a failure: a Normal event and
// a log line.
func (e Events) Recovery(obj client.Object, reason, msg string) {
	e.Event(obj, corev1.EventTypeNormal, reason, msg)
	e.Log.Info("recovered", "kind", KindOf(obj), "namespace", obj.GetNamespace(), "name", obj.GetName(), "action", e.Action,
		"reason", reason, "message", msg)
}

// KindOf is an object's kind: its TypeMeta's, else its Go type's name (typed
// objects read from a client carry no TypeMeta).
func KindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return reflect.TypeOf(obj).Elem().Name()
}

// Event emits one event (nothing without a recorder).
func (e Events) Event(obj client.Object, typ, reason, msg string) {
	if e.Recorder != nil {
		e.Recorder.Eventf(obj, nil, typ, reason, e.Action, "%s", msg)
	}
}

// Condition sets a condition and, when announce is set and its status or reason
// changed, announces the transition: a Failure when it turned False, a Recovery
// when it turned True after being False. Retries that change nothing announce
// nothing. It reports whether the condition transitioned.
func (e Events) Condition(obj Object, c metav1.Condition, announce bool) bool {
	c.ObservedGeneration = obj.GetGeneration()
	prev, transitioned := SetCondition(obj.StatusConditions(), c)
	if !transitioned || !announce {
		return transitioned
	}
	msg := c.Message
	if c.Type != "Ready" {
		msg = c.Type + ": " + msg
	}
	switch {
	case c.Status == metav1.ConditionFalse:
		e.Failure(obj, c.Reason, msg)
	case c.Status == metav1.ConditionTrue && prev != nil && prev.Status == metav1.ConditionFalse:
		e.Recovery(obj, c.Reason, msg)
	}
	return transitioned
}

// Ready sets the Ready condition (see Condition).
func (e Events) Ready(obj Object, status metav1.ConditionStatus, reason, msg string, announce bool) bool {
	return e.Condition(obj, metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: msg}, announce)
}

// SetCondition sets a condition and reports whether this is a transition: the
// condition is new, or its status or reason differ from before. prev is a copy of
// the condition as it was (nil when new).
//
// A copy, not meta.FindStatusCondition's pointer: meta.SetStatusCondition
// updates the existing element of the slice in place, so a pointer read before
// the call already shows the new values afterwards and every comparison with it
// says "unchanged" — which silenced every transition event once.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) (prev *metav1.Condition, transitioned bool) {
	if p := meta.FindStatusCondition(*conds, c.Type); p != nil {
		cp := *p
		prev = &cp
	}
	meta.SetStatusCondition(conds, c)
	return prev, prev == nil || prev.Status != c.Status || prev.Reason != c.Reason
}
