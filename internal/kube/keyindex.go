package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeyIndex is a compact secondary index over the objects of one informer: an
// object has a few keys (an API id, a source), and a key leads to the names of
// the objects that have it — usually one or two.
//
// client-go's indexers, under controller-runtime's field indexes, keep a set per
// value and store every value twice (per namespace and cluster-wide): about 550
// bytes per object for a unique key, a quarter of the operator's live heap at
// 10,000 Endpoints (docs/performance.md). Here a key is a map slot and a short
// slice of names whose strings the cached object already holds (~80 bytes).
//
// The index follows the informer through an event handler, so it trails the
// cache by the handler's queue: a lookup may miss an object the cache has had
// for a moment, or name one just deleted (a Get then finds nothing). Its
// callers tolerate both, as they tolerate the cache trailing the API server.
type KeyIndex struct {
	keys func(client.Object) []string

	mu     sync.RWMutex
	m      map[string][]types.NamespacedName
	synced atomic.Bool
	reg    toolscache.ResourceEventHandlerRegistration
}

// NewKeyIndex makes an index of the keys keys returns for an object (nil for
// none); Register attaches it to an informer.
func NewKeyIndex(keys func(client.Object) []string) *KeyIndex {
	return &KeyIndex{keys: keys, m: map[string][]types.NamespacedName{}}
}

// Register attaches the index to the cache's informer for obj's kind (created
// if needed; it starts with the cache).
func (x *KeyIndex) Register(ctx context.Context, c cache.Cache, obj client.Object) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(x)
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.reg = reg
	x.mu.Unlock()
	return nil
}

// OnAdd, OnUpdate and OnDelete make the index an informer's event handler.
func (x *KeyIndex) OnAdd(obj any, _ bool) { x.update(nil, obj) }

func (x *KeyIndex) OnUpdate(old, cur any) { x.update(old, cur) }

func (x *KeyIndex) OnDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	x.update(obj, nil)
}

var _ toolscache.ResourceEventHandler = &KeyIndex{}

func (x *KeyIndex) update(old, cur any) {
	var before, after []string
	var oldName, curName types.NamespacedName
	if o, ok := old.(client.Object); ok {
		before, oldName = x.keys(o), types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	}
	if o, ok := cur.(client.Object); ok {
		after, curName = x.keys(o), types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	}
	if old != nil && cur != nil && slices.Equal(before, after) {
		return // the common update: nothing the index holds changed
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range before {
		names := slices.DeleteFunc(x.m[k], func(n types.NamespacedName) bool { return n == oldName })
		if len(names) == 0 {
			delete(x.m, k)
		} else {
			x.m[k] = slices.Clip(names)
		}
	}
	for _, k := range after {
		if !slices.Contains(x.m[k], curName) {
			x.m[k] = append(x.m[k], curName)
		}
	}
}

// Lookup returns the names of the objects with the key (a copy), once the
// index has seen the informer's initial list; until then it waits, or fails
// when ctx ends.
func (x *KeyIndex) Lookup(ctx context.Context, key string) ([]types.NamespacedName, error) {
	if !x.synced.Load() {
		x.mu.RLock()
		reg := x.reg
		x.mu.RUnlock()
		if reg == nil {
			return nil, fmt.Errorf("the index is not registered with an informer")
		}
		if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			return nil, fmt.Errorf("the index has not seen the cache's objects yet: %w", context.Cause(ctx))
		}
		x.synced.Store(true)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.m[key]), nil
}

// Keys are the keys the index takes of obj.
func (x *KeyIndex) Keys(obj client.Object) []string { return x.keys(obj) }

// Len is the number of keys (for tests and metrics).
func (x *KeyIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.m)
}
