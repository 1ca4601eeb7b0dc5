package manager

import (
	"context"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/kube"
)

// storeCache is the fake informers with a store behind Get: what the cache holds.
type storeCache struct {
	*informertest.FakeInformers
	objs map[client.ObjectKey]*v1.Endpoint
}

func (c *storeCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	o, ok := c.objs[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "endpoints"}, key.Name)
	}
	if g := (&client.GetOptions{}).ApplyOptions(opts); g.UnsafeDisableDeepCopy != nil && *g.UnsafeDisableDeepCopy {
		*obj.(*v1.Endpoint) = *o // as the informer cache does: shared with the store
		return nil
	}
	o.DeepCopyInto(obj.(*v1.Endpoint))
	return nil
}

func ep(ns, name, id, team string) *v1.Endpoint {
	e := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": team}}}
	e.Status.APIID = id
	return e
}

func names(t *testing.T, c client.Reader, opts ...client.ListOption) []string {
	t.Helper()
	l := &v1.EndpointList{}
	if err := c.List(context.Background(), l, opts...); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	return out
}

// newIndexCache is the compact index cache over fake informers of one kind, with
// a store behind Get.
func newIndexCache(gvk schema.GroupVersionKind) (*compactIndexCache, *storeCache, *controllertest.FakeInformer) {
	inf := controllertest.NewFakeInformer()
	fake := &storeCache{FakeInformers: &informertest.FakeInformers{Scheme: NewScheme(),
		InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{gvk: inf}}, objs: map[client.ObjectKey]*v1.Endpoint{}}
	return &compactIndexCache{Cache: fake, scheme: NewScheme(), indexes: map[schema.GroupVersionKind]map[string]*kube.KeyIndex{}}, fake, inf
}

func TestCompactIndexCache(t *testing.T) {
	ctx := context.Background()
	// An informer that has not synced yet.
	gvk := v1.GroupVersion.WithKind("Endpoint")
	c, fake, inf := newIndexCache(gvk)
	const field = "polycrate.io/api-id"
	if err := c.IndexField(ctx, &v1.Endpoint{}, field, func(o client.Object) []string {
		if id := o.(*v1.Endpoint).Status.APIID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.IndexField(ctx, &v1.Endpoint{}, field, func(client.Object) []string { return nil }); err == nil {
		t.Error("a second index of the same name is refused")
	}

	// Before the index has seen the initial list, a lookup waits (here: until ctx ends).
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if err := c.List(short, &v1.EndpointList{}, client.MatchingFields{field: "id-a"}); err == nil {
		t.Error("a lookup before the initial list is answered")
	}

	add := func(e *v1.Endpoint) { fake.objs[client.ObjectKeyFromObject(e)] = e; inf.Add(e) }
	a, b, other := ep("shop", "a", "id-a", "x"), ep("shop", "b", "id-b", "y"), ep("blog", "a", "id-a", "x")
	add(a)
	add(b)
	add(other) // the same id in another namespace (a collision the callers look for)
	add(ep("shop", "none", "", "x"))
	inf.Synced()

	check := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", what, got, want)
			}
		}
	}
	check("cluster-wide", names(t, c, client.MatchingFields{field: "id-a"}), "shop/a", "blog/a")
	check("in a namespace", names(t, c, client.InNamespace("blog"), client.MatchingFields{field: "id-a"}), "blog/a")
	check("with labels", names(t, c, client.MatchingFields{field: "id-b"}, client.MatchingLabels{"team": "x"}))
	check("with matching labels", names(t, c, client.MatchingFields{field: "id-b"}, client.MatchingLabels{"team": "y"}), "shop/b")
	check("unknown value", names(t, c, client.MatchingFields{field: "id-z"}))

	// The id changes: the old key no longer finds it, the new one does.
	b2 := b.DeepCopy()
	b2.Status.APIID = "id-b2"
	fake.objs[client.ObjectKeyFromObject(b2)] = b2
	inf.Update(b, b2)
	check("after an update, old key", names(t, c, client.MatchingFields{field: "id-b"}))
	check("after an update, new key", names(t, c, client.MatchingFields{field: "id-b2"}), "shop/b")

	// The cache is ahead of the index: a deleted object is skipped, and so is
	// one whose current state no longer has the key.
	delete(fake.objs, client.ObjectKeyFromObject(other))
	check("deleted in the cache, not yet in the index", names(t, c, client.MatchingFields{field: "id-a"}), "shop/a")
	a2 := a.DeepCopy()
	a2.Status.APIID = "id-a2"
	fake.objs[client.ObjectKeyFromObject(a2)] = a2
	check("changed in the cache, not yet in the index", names(t, c, client.MatchingFields{field: "id-a"}))

	// Deletions, also as tombstones, leave nothing behind.
	inf.Update(a, a2)
	inf.Delete(other)
	check("after the updates", names(t, c, client.MatchingFields{field: "id-a2"}), "shop/a")
	x := c.indexes[gvk][field]
	x.OnDelete(b2)
	x.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/a", Obj: a2})
	if n := x.Len(); n != 0 {
		t.Errorf("%d keys left after every object is gone", n)
	}
}

// A lookup that promises not to change what it gets (client.UnsafeDisableDeepCopy)
// is answered without copies: the discovery's lookups of a source's Endpoints, on
// every event of every source, were a sixth of the operator's CPU on a restart.
func TestCompactIndexCacheWithoutCopies(t *testing.T) {
	ctx := context.Background()
	c, fake, inf := newIndexCache(v1.GroupVersion.WithKind("Endpoint"))
	const field = "team"
	if err := c.IndexField(ctx, &v1.Endpoint{}, field, func(o client.Object) []string { return []string{o.GetLabels()["team"]} }); err != nil {
		t.Fatal(err)
	}
	a := ep("shop", "a", "id-a", "x")
	fake.objs[client.ObjectKeyFromObject(a)] = a
	inf.Add(a)
	inf.Synced()

	shared := func(opts ...client.ListOption) bool {
		t.Helper()
		l := &v1.EndpointList{}
		if err := c.List(ctx, l, append(opts, client.MatchingFields{field: "x"})...); err != nil || len(l.Items) != 1 {
			t.Fatalf("list: %v %d", err, len(l.Items))
		}
		return reflect.ValueOf(l.Items[0].Labels).UnsafePointer() == reflect.ValueOf(a.Labels).UnsafePointer()
	}
	if shared() {
		t.Error("a plain lookup shares the cache's object: a caller's change would corrupt the cache")
	}
	if !shared(client.UnsafeDisableDeepCopy) {
		t.Error("a lookup with UnsafeDisableDeepCopy still copies every object")
	}
}
