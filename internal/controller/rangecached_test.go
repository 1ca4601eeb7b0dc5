package controller

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// storeInformers answers GetInformer with an informer over a filled store, as
// controller-runtime's cache does (its informers are client-go's).
type storeInformers struct {
	cache.Informers
	inf    toolscache.SharedIndexInformer
	synced bool
}

type syncedInformer struct {
	toolscache.SharedIndexInformer
	synced bool
}

func (s syncedInformer) HasSynced() bool { return s.synced }

func (s storeInformers) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return syncedInformer{s.inf, s.synced}, nil
}

func filledInformers(t testing.TB, n int, synced bool) storeInformers {
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &v1.Endpoint{}, 0, toolscache.Indexers{})
	for i := 0; i < n; i++ {
		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("ep-%d", i)}}
		if i%3 == 0 {
			ep.Status.Phase = v1.PhaseSynced
		}
		if err := inf.GetStore().Add(ep); err != nil {
			t.Fatal(err)
		}
	}
	return storeInformers{inf: inf, synced: synced}
}

// RangeCached reads the cached objects themselves: what a scrape at rest
// allocates does not grow with the number of objects (a List from the cache
// copied every one into a new list: 5 MiB per scrape at 10,000 Endpoints).
func TestRangeCachedCopiesNothing(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{100, 10000} {
		infs := filledInformers(t, n, true)
		synced, seen := 0, 0
		if err := RangeCached(ctx, infs, &v1.Endpoint{}, func(o client.Object) {
			seen++
			if o.(*v1.Endpoint).Status.Phase == v1.PhaseSynced {
				synced++
			}
		}); err != nil {
			t.Fatal(err)
		}
		if seen != n || synced != (n+2)/3 {
			t.Fatalf("%d objects: saw %d, %d synced; want %d, %d", n, seen, synced, n, (n+2)/3)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 10
		for i := 0; i < runs; i++ {
			_ = RangeCached(ctx, infs, &v1.Endpoint{}, func(client.Object) {})
		}
		runtime.ReadMemStats(&after)
		bytes := int64(after.TotalAlloc-before.TotalAlloc) / runs
		// One slice of interface values (16 B per object) and a few small
		// allocations; a copy of each Endpoint would be over 500 B per object.
		if limit := int64(n)*24 + 8192; bytes > limit {
			t.Errorf("%d objects: %d B allocated per range, more than %d (the objects are being copied)", n, bytes, limit)
		}
	}
}

// An informer that has not synced is an error, as a List from the cache would
// be after its context ended: no partial count.
func TestRangeCachedUnsynced(t *testing.T) {
	err := RangeCached(context.Background(), filledInformers(t, 3, false), &v1.Endpoint{}, func(client.Object) {
		t.Fatal("an object of an unsynced cache was read")
	})
	if err == nil {
		t.Fatal("no error for an unsynced cache")
	}
}

// countingInformer syncs at the nth look.
type countingInformer struct {
	toolscache.SharedIndexInformer
	looks *atomic.Int32
	n     int32
}

func (c countingInformer) HasSynced() bool { return c.looks.Add(1) >= c.n }

type countingInformers struct {
	cache.Informers
	inf countingInformer
}

func (s countingInformers) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return s.inf, nil
}

// CachedObjects hands out the store's own objects (no copies), once the
// informer synced: it waits for that as a List from the cache does, and fails
// when its context ends first.
func TestCachedObjects(t *testing.T) {
	filled := filledInformers(t, 30, true)
	infs := countingInformers{inf: countingInformer{SharedIndexInformer: filled.inf, looks: &atomic.Int32{}, n: 3}}
	objs, err := CachedObjects(context.Background(), infs, &v1.Endpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 30 || infs.inf.looks.Load() < 3 {
		t.Fatalf("%d objects after %d looks at the sync; want 30 after 3", len(objs), infs.inf.looks.Load())
	}
	for _, o := range objs {
		cached, ok, _ := filled.inf.GetStore().Get(o)
		if !ok || cached.(*v1.Endpoint) != o.(*v1.Endpoint) {
			t.Fatalf("%s is not the store's own object", o.GetName())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := countingInformers{inf: countingInformer{SharedIndexInformer: filled.inf, looks: &atomic.Int32{}, n: 1 << 30}}
	if objs, err := CachedObjects(ctx, never, &v1.Endpoint{}); err == nil {
		t.Fatalf("no error for a cache that never synced; got %d objects", len(objs))
	}
}
