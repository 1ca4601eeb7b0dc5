package slimcache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// obj is a Secret-like metadata object: kept when its name ends in ".poly".
func obj(ns, name, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
}

func keepPoly(m *metav1.PartialObjectMetadata) bool {
	return len(m.Name) > 5 && m.Name[len(m.Name)-5:] == ".poly"
}

func newTestStore(t *testing.T) (*Store[Meta], *[]string) {
	t.Helper()
	var events []string
	s := New(Options[Meta]{Name: "test",
		Slim: func(o any) (Meta, bool) {
			m := o.(*metav1.PartialObjectMetadata)
			return MetaOf(m), keepPoly(m)
		},
		Equal: func(a, b *Meta) bool { return *a == *b },
	})
	s.AddHandler(func(e Event[Meta]) {
		kind := "update"
		switch {
		case e.Old == nil:
			kind = "add"
		case e.New == nil:
			kind = "delete"
		}
		events = append(events, kind+" "+e.Namespace+"/"+e.Name)
	})
	return s, &events
}

func TestStoreKeepsOnlyWhatSlimAccepts(t *testing.T) {
	s, events := newTestStore(t)
	must(t, s.Add(obj("a", "app.poly", "1")))
	must(t, s.Add(obj("a", "unrelated", "1")))
	must(t, s.Update(obj("a", "app.poly", "1"))) // nothing changed: no event
	must(t, s.Update(obj("a", "app.poly", "2")))
	must(t, s.Delete(obj("a", "unrelated", "1"))) // never kept: no event
	must(t, s.Delete(obj("a", "app.poly", "2")))
	want := []string{"add a/app.poly", "update a/app.poly", "delete a/app.poly"}
	if !slices.Equal(*events, want) {
		t.Fatalf("events = %v, want %v", *events, want)
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after the deletion", s.Len())
	}
}

// A relist (the watch broke) tells what vanished meanwhile, and closes Synced once.
func TestStoreReplace(t *testing.T) {
	s, events := newTestStore(t)
	select {
	case <-s.Synced():
		t.Fatal("synced before the first list")
	default:
	}
	must(t, s.Replace([]any{obj("a", "x.poly", "1"), obj("b", "y.poly", "1"), obj("b", "z", "1")}, "10"))
	if err := s.WaitForSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	*events = nil
	must(t, s.Replace([]any{obj("b", "y.poly", "2")}, "20"))
	want := []string{"update b/y.poly", "delete a/x.poly"}
	if !slices.Equal(*events, want) {
		t.Fatalf("events = %v, want %v", *events, want)
	}
	if v, ok := s.Get("b", "y.poly"); !ok || v.ResourceVersion != "2" {
		t.Fatalf("Get = %+v, %v", v, ok)
	}
}

// A handler added late gets the kept objects replayed as additions.
func TestStoreReplaysToLateHandlers(t *testing.T) {
	s, _ := newTestStore(t)
	must(t, s.Add(obj("a", "x.poly", "1")))
	must(t, s.Add(obj("b", "y.poly", "1")))
	var got []string
	s.AddHandler(func(e Event[Meta]) { got = append(got, e.Namespace+"/"+e.Name) })
	slices.Sort(got)
	if !slices.Equal(got, []string{"a/x.poly", "b/y.poly"}) {
		t.Fatalf("replayed %v", got)
	}
	var ns []string
	s.Range("b", func(n, name string, _ *Meta) { ns = append(ns, n+"/"+name) })
	if !slices.Equal(ns, []string{"b/y.poly"}) {
		t.Fatalf("Range(b) = %v", ns)
	}
}

// An object that stops being kept (an owner reference removed by hand) is a
// deletion carrying its old value, so the former owner hears of it.
func TestStoreObjectLeavingTheFilter(t *testing.T) {
	s := New(Options[Meta]{Name: "owned",
		Slim: func(o any) (Meta, bool) {
			m := MetaOf(o.(*metav1.PartialObjectMetadata))
			return m, m.ControllerKind == "S3Bucket"
		},
		Equal: func(a, b *Meta) bool { return *a == *b },
	})
	var last Event[Meta]
	s.AddHandler(func(e Event[Meta]) { last = e })
	owned := obj("a", "creds", "1")
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "polycrate.io/v1alpha1", Kind: "S3Bucket", Name: "b1", UID: "u1", Controller: &yes}}
	must(t, s.Add(owned))
	must(t, s.Update(obj("a", "creds", "2")))
	if last.New != nil || last.Old == nil || last.Old.ControllerName != "b1" {
		t.Fatalf("last event = %+v", last)
	}
}

func TestWaitForSyncHonoursTheContext(t *testing.T) {
	s, _ := newTestStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.WaitForSync(ctx); err == nil {
		t.Fatal("WaitForSync returned nil before any list")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStorePerNamespace: a store limited to named namespaces runs one lister
// each, is synced once every one listed, and a relist of one namespace leaves
// the others' objects alone.
func TestStorePerNamespace(t *testing.T) {
	s, events := newTestStore(t)
	lists := map[string][]metav1.PartialObjectMetadata{
		"a": {*obj("a", "one.poly", "1"), *obj("a", "other", "1")},
		"b": {*obj("b", "two.poly", "1")},
	}
	var mu sync.Mutex
	asked := map[string]bool{}
	s.o.Example = &metav1.PartialObjectMetadata{}
	s.o.Namespaces = []string{"a", "b"}
	s.o.NamespacedListWatch = func(ns string) toolscache.ListerWatcher {
		return &toolscache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				mu.Lock()
				asked[ns] = true
				mu.Unlock()
				return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: lists[ns]}, nil
			},
			WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
				if o.SendInitialEvents != nil && *o.SendInitialEvents {
					return nil, errors.New("no streaming lists here") // the reflector falls back to a list
				}
				return watch.NewFake(), nil
			},
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Start(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := s.WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 || !asked["a"] || !asked["b"] {
		t.Fatalf("after the first lists: %d kept, listed %v", s.Len(), asked)
	}
	// A relist of a without one.poly removes it, and nothing of b.
	sc := &scoped[Meta]{Store: s, ns: "a", first: func() {}}
	must(t, sc.Replace(nil, "2"))
	if _, ok := s.Get("b", "two.poly"); !ok || s.Len() != 1 {
		t.Fatalf("a relist of a touched b: %d kept", s.Len())
	}
	if last := (*events)[len(*events)-1]; last != "delete a/one.poly" {
		t.Fatalf("events %v", *events)
	}
}
