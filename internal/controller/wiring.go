// Package controller is the reconcile kit every controller of the operator is
// written with (docs/architecture.md "The reconciler skeleton"): kit.go holds the
// skeleton's parts, outcome.go the outcomes and the named intervals, wiring.go
// how a controller is built and woken.
package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// The requeue policy of seed 002 "Rate Limiting & Error Handling".
const (
	// BaseDelay is the first retry delay of a failing item.
	BaseDelay = 5 * time.Second
	// MaxDelay caps the exponential backoff of a failing item.
	MaxDelay = 60 * time.Second
	// DefaultMaxConcurrentReconciles is the default of --max-concurrent-reconciles.
	DefaultMaxConcurrentReconciles = 4
)

// NewRateLimiter returns the operator's per-item exponential rate limiter:
// 5 s, 10 s, 20 s, 40 s, then 60 s for every further failure of the same item,
// reset when the item succeeds. Each controller gets its own instance of the same
// policy: the limiter keys on namespace/name, which two kinds can share.
func NewRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](BaseDelay, MaxDelay)
}

// Options returns the controller options every controller of the operator uses.
func Options(maxConcurrentReconciles int) crcontroller.Options {
	if maxConcurrentReconciles < 1 {
		maxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	return crcontroller.Options{
		MaxConcurrentReconciles: maxConcurrentReconciles,
		RateLimiter:             NewRateLimiter(),
	}
}

// Deps are what every controller is built with; each reconciler embeds them and
// adds only what is its own. Every controller is then set up the same way:
// fill the struct, call SetupWithManager(mgr).
type Deps struct {
	Client client.Client
	// APIReader reads past the cache (the manager's API reader): fresh reads
	// after a conflict, objects the operator does not cache.
	APIReader client.Reader
	Config    *liveconfig.Store
	Conn      *polycrate.Connection
	Recorder  recorder.EventRecorder
	Log       logr.Logger
	// MaxConcurrent is --max-concurrent-reconciles.
	MaxConcurrent int
	// KubeBack tells of each return of the Kubernetes API server: the
	// controllers' items backing off are retried then (wakequeue.go; nil: not).
	KubeBack *kube.Recovery
}

// NewDeps builds the Deps from the manager (its client, one event source, its
// logger) and the operator's shared parts.
func NewDeps(mgr manager.Manager, cfg *liveconfig.Store, conn *polycrate.Connection, maxConcurrent int) Deps {
	return Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: cfg, Conn: conn, Recorder: mgr.GetEventRecorder("polycrate-operator"),
		Log: mgr.GetLogger(), MaxConcurrent: maxConcurrent}
}

// Snapshot is the live configuration a step acts on, or the wait while it may
// not act: just started (nothing to say yet: the configuration's arrival wakes
// every object), no OperatorConfig (idle says what then does not happen), or the
// feature switched off (its switch named as in the OperatorConfig).
func (d Deps) Snapshot(feature string, enabled func(*liveconfig.Snapshot) *bool, idle string) (*liveconfig.Snapshot, error) {
	snap := d.Config.Get()
	switch {
	case snap == nil && d.Config.Early():
		return nil, Waiting("", "", 0)
	case snap == nil:
		return nil, Waiting(v1.ReasonOperatorConfigMissing, "no OperatorConfig: "+idle, 0)
	case !liveconfig.Enabled(enabled(snap)):
		return nil, Waiting(v1.ReasonDisabled, feature+".enabled is false", 0)
	}
	return snap, nil
}

// NotConnected is the wait for the API connection (the OperatorConfig says why
// there is none; its arrival wakes every object).
var NotConnected = Waiting(v1.ReasonAPIUnavailable, "not connected to the Polycrate API yet (see the OperatorConfig's conditions)", RequeueNotConnected)

// Named returns the Deps with the logger named after a part.
func (d Deps) Named(name string) Deps {
	d.Log = d.Log.WithName(name)
	return d
}

// Events returns the event helper for an action ("Sync", "Provision").
func (d Deps) Events(action string) Events {
	return Events{Recorder: d.Recorder, Action: action, Log: d.Log}
}

// Options are the controller options (rate limiter, concurrency, and the queue
// that retries at once on a return of the Kubernetes API server).
func (d Deps) Options() crcontroller.Options {
	o := Options(d.MaxConcurrent)
	if d.KubeBack != nil {
		o.NewQueue = newWakingQueue(d.KubeBack)
	}
	return o
}

// Waker enqueues objects from outside the watches: every object of a kind when
// the configuration changes, the objects a periodic check found.
type Waker struct{ ch chan event.GenericEvent }

// NewWaker returns a Waker; its Source goes into the controller's builder.
func NewWaker() *Waker { return &Waker{ch: make(chan event.GenericEvent, 1024)} }

// Source enqueues what the Waker is given.
func (w *Waker) Source() source.Source {
	return source.Channel(w.ch, &handler.EnqueueRequestForObject{})
}

// Wake enqueues the objects.
func (w *Waker) Wake(ctx context.Context, objs ...client.Object) {
	for _, o := range objs {
		select {
		case w.ch <- event.GenericEvent{Object: o}:
		case <-ctx.Done():
			return
		}
	}
}

// OnConfigChange runs fn (on the leader) after each change of the live
// configuration, until the manager stops.
func OnConfigChange(mgr manager.Manager, cfg *liveconfig.Store, fn func(context.Context)) error {
	return OnSignal(mgr, cfg.Subscribe(), fn)
}

// OnSignal runs fn (on the leader) after each signal on ch, until the manager stops.
func OnSignal(mgr manager.Manager, ch <-chan struct{}, fn func(context.Context)) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ch:
				fn(ctx)
			}
		}
	}))
}

// The list functions of the wakers read the cache without copies
// (CachedObjects, or client.UnsafeDisableDeepCopy): a waker only reads the
// objects' names and conditions.
//
// WakeOnConfigChange enqueues, after each change of the live configuration, the
// objects list returns: every one when the configuration changed (a new spec,
// local cluster or switch) or when the first configuration arrives after
// reconciles waited for it; otherwise — the API connection (re)configured, or a
// first configuration nobody waited for, as on a restart — only those whose
// Ready is not True (parked, waiting or failed: the new connection is their
// next chance): a synced object has nothing to redo. On a restart with 40,000 Endpoints, waking every
// object had reconciled 27,000 of them twice (docs/performance.md).
func (w *Waker) WakeOnConfigChange(mgr manager.Manager, cfg *liveconfig.Store, list func(context.Context) ([]client.Object, error)) error {
	// What the configuration is now: a waker set up late (the HTTPRoute
	// controller, when its CRD appears) must take its first signal for a change.
	scope := newConfigScope(cfg)
	return OnConfigChange(mgr, cfg, func(ctx context.Context) {
		all := scope.all(cfg)
		objs, err := list(ctx)
		if err != nil {
			return
		}
		if !all {
			objs = only(objs, notReady)
		}
		w.Wake(ctx, objs...)
	})
}

// notReady: a kit object whose Ready condition is not True — parked, waiting or
// failed (e.g. refused by the previous API connection: a redirecting api_url, a
// revoked token). A reconfigured connection is their next chance.
func notReady(o client.Object) bool {
	c, kit := readyOf(o)
	return kit && (c == nil || c.Status != metav1.ConditionTrue)
}

// readyOf is a kit object's Ready condition (nil if it has none); kit is false
// for objects not written on the kit (no conditions of ours).
func readyOf(o client.Object) (c *metav1.Condition, kit bool) {
	obj, ok := o.(Object)
	if !ok {
		return nil, false
	}
	return meta.FindStatusCondition(*obj.StatusConditions(), v1.ConditionReady), true
}

// only keeps the objects keep accepts (in place).
func only(objs []client.Object, keep func(client.Object) bool) []client.Object {
	out := objs[:0]
	for _, o := range objs {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// configScope follows the configuration signals one waker has seen.
type configScope struct {
	last   *liveconfig.Snapshot
	loaded bool
}

// newConfigScope starts from the configuration as it is now.
func newConfigScope(cfg *liveconfig.Store) configScope {
	return configScope{last: cfg.Get(), loaded: cfg.Loaded()}
}

// all says whether a configuration signal wakes every object.
func (s *configScope) all(cfg *liveconfig.Store) bool {
	snap, loaded := cfg.Get(), cfg.Loaded()
	changed := s.loaded && snap != s.last
	first := !s.loaded && loaded
	s.last = snap
	s.loaded = s.loaded || loaded
	return changed || (first && cfg.WaitedBeforeLoad())
}

// WakeOnRecovery enqueues, each time the API recovers — its circuit breaker
// closes, or writes (or reads) that failed for a while are served again while it
// stayed closed (polycrate.Breaker.Recovered) — the objects list returns whose
// Ready condition says they wait for the API (parked by the open breaker, or
// backing off after a transient failure): they converge at once instead of
// after their recheck or backoff.
func (w *Waker) WakeOnRecovery(mgr manager.Manager, conn *polycrate.Connection, list func(context.Context) ([]client.Object, error)) error {
	b := conn.Breaker()
	return OnSignal(mgr, b.Recovered(), func(ctx context.Context) {
		if b.State().Open {
			return
		}
		objs, err := list(ctx)
		if err != nil {
			return
		}
		w.Wake(ctx, only(objs, WaitsForAPI)...)
	})
}

// WaitsForAPI: the object's Ready condition is False for the API (its circuit
// open, no answer, or a transient failure).
func WaitsForAPI(o client.Object) bool {
	c, _ := readyOf(o)
	return c != nil && c.Status == metav1.ConditionFalse && WaitsOnOutage(c.Reason)
}

// Every runs fn on the leader every interval() (read anew each round: a
// configured interval applies from the next round), until the manager stops.
func Every(mgr manager.Manager, interval func() time.Duration, fn func(context.Context)) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			t := time.NewTimer(interval())
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
				fn(ctx)
			}
		}
	}))
}

// Queued is how many wakes wait to be enqueued.
func (w *Waker) Queued() int { return len(w.ch) }

// RangeCached calls fn with every cached object of obj's kind, read from the
// informer's store itself: no list of copies is built, only a slice of
// pointers. fn must not modify what it is given. For what runs at rest (a
// metrics scrape, the agent's health report): a List from the cache copies
// every object into a fresh list even with UnsafeDisableDeepCopy — 5 MiB of
// garbage per scrape at 10,000 Endpoints, which kept the resting heap at twice
// the live objects (docs/performance.md). Errors as a List from the cache
// would: the kind is not served (its CRD is gone), or its informer did not sync
// before ctx ended.
func RangeCached(ctx context.Context, informers cache.Informers, obj client.Object, fn func(client.Object)) error {
	store, err := cachedStore(ctx, informers, obj, false)
	if err != nil {
		return err
	}
	for _, item := range store.List() {
		if o, ok := item.(client.Object); ok {
			fn(o)
		}
	}
	return nil
}

// CachedObjects returns the cached objects of obj's kind as the informer's
// store holds them: no copies and no typed list — the caller reads them and
// never changes one. Like a List from the cache, it waits for the informer's
// first sync. A waker's list of 40,000 Endpoints through the client copied
// every struct into the list (meta.SetList), on every configuration signal
// (docs/performance.md).
func CachedObjects(ctx context.Context, informers cache.Informers, obj client.Object) ([]client.Object, error) {
	store, err := cachedStore(ctx, informers, obj, true)
	if err != nil {
		return nil, err
	}
	items := store.List()
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// cachedStore is the store of obj's informer once it synced; wait says whether
// to wait for that (until ctx ends) or fail at once.
func cachedStore(ctx context.Context, informers cache.Informers, obj client.Object, wait bool) (toolscache.Store, error) {
	inf, err := informers.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	if !inf.HasSynced() && (!wait || !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced)) {
		return nil, fmt.Errorf("the cache of %T has not synced", obj)
	}
	store, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return nil, fmt.Errorf("the informer of %T has no store to read (%T)", obj, inf)
	}
	return store.GetStore(), nil
}

// ListObjects lists into list and returns its items as objects.
func ListObjects(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) ([]client.Object, error) {
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}
