// Package slimcache keeps a compact value per object of a kind the operator must
// watch cluster-wide but needs little of (Pods, Secrets), in place of an informer
// cache of the objects themselves.
//
// A client-go Reflector lists and watches the kind and hands each object to the
// Store, which keeps only what Slim makes of it, and nothing at all of the objects
// Slim rejects (a Job's Pod, an unrelated Secret). A controller-runtime informer
// keeps a full Go struct per object even after a transform (a corev1.Pod struct
// alone is 1,240 bytes) plus its keys and indexes; a Store entry of a counted Pod
// is a few hundred bytes, and an unrelated Secret costs nothing
// (docs/performance.md).
//
// Controllers get changes through Source (a controller-runtime source that waits
// for the first list) and read through Get/Range, never through the manager's
// cache.
package slimcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Event is one change: Old is nil for an object that starts being kept, New is nil
// for one that is gone (deleted, or no longer kept).
type Event[V any] struct {
	Namespace, Name string
	Old, New        *V
}

// Options build a Store.
type Options[V any] struct {
	// Name names the store in logs and sources.
	Name string
	// Namespaces, when set, limits the store to these namespaces: one reflector
	// each, with NamespacedListWatch's lister (for clusters that grant the
	// operator a kind in named namespaces only).
	Namespaces          []string
	NamespacedListWatch func(namespace string) toolscache.ListerWatcher
	// ListWatch lists and watches the kind cluster-wide; Example is an empty object
	// of the type it returns.
	ListWatch toolscache.ListerWatcher
	Example   runtime.Object
	// Slim makes the compact value of an object (a full one, or what Trim made of
	// it); false drops the object.
	Slim func(obj any) (V, bool)
	// Trim, if set, is applied to the objects the reflector buffers during its
	// initial list, so the buffer holds trimmed objects rather than full ones. Its
	// result must stay a metav1.Object that Slim accepts.
	Trim toolscache.TransformFunc
	// Equal says whether a new value changes nothing (no event).
	Equal func(a, b *V) bool
	// Index, if set, is called under the store's lock for every change, to keep
	// secondary indexes consistent with the items.
	Index func(e Event[V])
}

// Store holds the compact values by namespace and name.
type Store[V any] struct {
	o        Options[V]
	mu       sync.RWMutex
	items    map[string]map[string]*V
	handlers []func(Event[V])
	synced   chan struct{}
	once     sync.Once
}

// New builds a Store; Start runs it.
func New[V any](o Options[V]) *Store[V] {
	return &Store[V]{o: o, items: map[string]map[string]*V{}, synced: make(chan struct{})}
}

// Backoff is the reflectors' back-off after a failed list or watch: 250 ms
// doubling to 2 s (client-go's default doubles from 0.8 s to 30 s with up to
// 100 % jitter and resets only after two minutes without a failure, which left
// informers blind for up to a minute after repeated kube-apiserver restarts;
// the manager's informers wait for the API server instead, internal/manager/
// resilient.go). A down API server sees one request per 2 s per reflector.
func Backoff() *wait.Backoff {
	return &wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 8, Cap: 2 * time.Second}
}

// Start runs the reflector until ctx ends (a manager Runnable): one for the
// whole cluster, or one per namespace of Options.Namespaces.
func (s *Store[V]) Start(ctx context.Context) error {
	if len(s.o.Namespaces) == 0 {
		r := toolscache.NewReflectorWithOptions(s.o.ListWatch, s.o.Example, s, toolscache.ReflectorOptions{Name: s.o.Name, Backoff: Backoff()})
		r.RunWithContext(ctx)
		return nil
	}
	var wg sync.WaitGroup
	var pending sync.WaitGroup
	pending.Add(len(s.o.Namespaces))
	go func() { pending.Wait(); s.once.Do(func() { close(s.synced) }) }()
	for _, ns := range s.o.Namespaces {
		sc := &scoped[V]{Store: s, ns: ns, first: pending.Done}
		r := toolscache.NewReflectorWithOptions(s.o.NamespacedListWatch(ns), s.o.Example, sc,
			toolscache.ReflectorOptions{Name: s.o.Name + "/" + ns, Backoff: Backoff()})
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	wg.Wait()
	return nil
}

// scoped is the reflector's store for one namespace of a Store: its full lists
// replace that namespace's objects only.
type scoped[V any] struct {
	*Store[V]
	ns    string
	first func()
	once  sync.Once
}

// Replace takes a full list of the namespace.
func (sc *scoped[V]) Replace(list []any, _ string) error {
	if err := sc.replaceIn(sc.ns, list); err != nil {
		return err
	}
	sc.once.Do(sc.first)
	return nil
}

// NeedLeaderElection is false: like the manager's cache, the store runs on every
// replica, so a new leader starts warm.
func (s *Store[V]) NeedLeaderElection() bool { return false }

// Synced is closed once the first list is in.
func (s *Store[V]) Synced() <-chan struct{} { return s.synced }

// WaitForSync waits for the first list or ctx.
func (s *Store[V]) WaitForSync(ctx context.Context) error {
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: the first list did not finish: %w", s.o.Name, ctx.Err())
	}
}

// Get returns the value of one object (a copy of the pointer: never change it).
func (s *Store[V]) Get(namespace, name string) (*V, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.items[namespace][name]
	return v, ok
}

// Range calls fn for every kept object of a namespace ("" for all), under the read
// lock: fn must not call back into the store.
func (s *Store[V]) Range(namespace string, fn func(namespace, name string, v *V)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if namespace != "" {
		for name, v := range s.items[namespace] {
			fn(namespace, name, v)
		}
		return
	}
	for ns, m := range s.items {
		for name, v := range m {
			fn(ns, name, v)
		}
	}
}

// Len counts the kept objects.
func (s *Store[V]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, m := range s.items {
		n += len(m)
	}
	return n
}

// AddHandler registers fn for every later change and replays the kept objects to
// it as additions. fn runs on the reflector's goroutine, outside the lock: it
// should only queue work.
func (s *Store[V]) AddHandler(fn func(Event[V])) {
	s.mu.Lock()
	s.handlers = append(s.handlers, fn)
	var replay []Event[V]
	for ns, m := range s.items {
		for name, v := range m {
			replay = append(replay, Event[V]{Namespace: ns, Name: name, New: v})
		}
	}
	s.mu.Unlock()
	for _, e := range replay {
		fn(e)
	}
}

func key(obj any) (string, string, error) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", err
	}
	return m.GetNamespace(), m.GetName(), nil
}

// set records one object's new value (nil: not kept) and returns the event, if
// any, with the handlers to tell.
func (s *Store[V]) set(ns, name string, nv *V) (Event[V], []func(Event[V]), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.items[ns][name]
	if old == nil && nv == nil {
		return Event[V]{}, nil, false
	}
	if old != nil && nv != nil && s.o.Equal != nil && s.o.Equal(old, nv) {
		return Event[V]{}, nil, false
	}
	if nv == nil {
		delete(s.items[ns], name)
		if len(s.items[ns]) == 0 {
			delete(s.items, ns)
		}
	} else {
		m := s.items[ns]
		if m == nil {
			m = map[string]*V{}
			s.items[ns] = m
		}
		m[name] = nv
	}
	e := Event[V]{Namespace: ns, Name: name, Old: old, New: nv}
	if s.o.Index != nil {
		s.o.Index(e)
	}
	return e, s.handlers, true
}

func (s *Store[V]) apply(obj any, gone bool) error {
	ns, name, err := key(obj)
	if err != nil {
		return err
	}
	var nv *V
	if !gone {
		if v, keep := s.o.Slim(obj); keep {
			nv = &v
		}
	}
	if e, hs, ok := s.set(ns, name, nv); ok {
		for _, h := range hs {
			h(e)
		}
	}
	return nil
}

// Add is part of the reflector's store interface.
func (s *Store[V]) Add(obj any) error { return s.apply(obj, false) }

// Update is part of the reflector's store interface.
func (s *Store[V]) Update(obj any) error { return s.apply(obj, false) }

// Delete is part of the reflector's store interface.
func (s *Store[V]) Delete(obj any) error { return s.apply(obj, true) }

// Replace takes a full list (the first one, or a relist after the watch broke):
// objects missing from it are gone, the others are added or updated.
func (s *Store[V]) Replace(list []any, _ string) error {
	if err := s.replaceIn("", list); err != nil {
		return err
	}
	s.once.Do(func() { close(s.synced) })
	return nil
}

// replaceIn applies a full list of one namespace ("" for all).
func (s *Store[V]) replaceIn(scope string, list []any) error {
	seen := map[string]map[string]bool{}
	for _, obj := range list {
		ns, name, err := key(obj)
		if err != nil {
			return err
		}
		if seen[ns] == nil {
			seen[ns] = map[string]bool{}
		}
		seen[ns][name] = true
		if err := s.apply(obj, false); err != nil {
			return err
		}
	}
	var gone [][2]string
	s.mu.RLock()
	for ns, m := range s.items {
		if scope != "" && ns != scope {
			continue
		}
		for name := range m {
			if !seen[ns][name] {
				gone = append(gone, [2]string{ns, name})
			}
		}
	}
	s.mu.RUnlock()
	for _, g := range gone {
		if e, hs, ok := s.set(g[0], g[1], nil); ok {
			for _, h := range hs {
				h(e)
			}
		}
	}
	return nil
}

// Resync is part of the reflector's store interface (no periodic resync).
func (s *Store[V]) Resync() error { return nil }

// Transformer makes the reflector trim what it buffers during a streaming list.
func (s *Store[V]) Transformer() toolscache.TransformFunc { return s.o.Trim }

var _ toolscache.TransformingStore = &Store[struct{}]{}

// Source feeds a controller: Map turns each change into requests. It waits for the
// store's first list before the controller starts its workers.
type Source[V any] struct {
	Store *Store[V]
	Map   func(ctx context.Context, e Event[V]) []reconcile.Request
}

// Start registers the source's handler.
func (src *Source[V]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	src.Store.AddHandler(func(e Event[V]) {
		for _, r := range src.Map(ctx, e) {
			q.Add(r)
		}
	})
	return nil
}

// WaitForSync waits for the store's first list.
func (src *Source[V]) WaitForSync(ctx context.Context) error { return src.Store.WaitForSync(ctx) }

func (src *Source[V]) String() string { return "slimcache " + src.Store.o.Name }
