package manager

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/polycrate/polycrate-operator/internal/kube"
)

// compactIndexCache is the manager's cache with field indexes of its own
// (kube.KeyIndex): IndexField registers one, and a List by one exact field
// match is answered from it — the same calls every controller already makes
// (client.MatchingFields, with or without a namespace), at about a seventh of
// the memory of controller-runtime's field indexes (kube.KeyIndex says why).
// Every other call goes to controller-runtime's cache unchanged.
type compactIndexCache struct {
	cache.Cache
	scheme *runtime.Scheme

	mu      sync.RWMutex
	indexes map[schema.GroupVersionKind]map[string]*kube.KeyIndex
}

func newCompactIndexCache(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, o)
	if err != nil {
		return nil, err
	}
	return &compactIndexCache{Cache: c, scheme: o.Scheme, indexes: map[schema.GroupVersionKind]map[string]*kube.KeyIndex{}}, nil
}

// IndexField registers a compact index of obj's kind by field.
func (c *compactIndexCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.indexes[gvk][field] != nil {
		c.mu.Unlock()
		return fmt.Errorf("an index named %q of %s exists already", field, gvk.Kind)
	}
	x := kube.NewKeyIndex(func(o client.Object) []string { return extract(o) })
	if c.indexes[gvk] == nil {
		c.indexes[gvk] = map[string]*kube.KeyIndex{}
	}
	c.indexes[gvk][field] = x
	c.mu.Unlock()
	return x.Register(ctx, c.Cache, obj)
}

// List answers a list by one exact field match of a compact index from it:
// the names the index holds, each read from the cache (a copy), filtered by
// namespace and labels as asked.
func (c *compactIndexCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector == nil || o.FieldSelector.Empty() || len(o.FieldSelector.Requirements()) != 1 {
		return c.Cache.List(ctx, list, opts...)
	}
	listGVK, err := apiutil.GVKForObject(list, c.scheme)
	if err != nil || !strings.HasSuffix(listGVK.Kind, "List") {
		return c.Cache.List(ctx, list, opts...)
	}
	gvk := listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List"))
	req := o.FieldSelector.Requirements()[0]
	c.mu.RLock()
	x := c.indexes[gvk][req.Field]
	c.mu.RUnlock()
	value, exact := o.FieldSelector.RequiresExactMatch(req.Field)
	if x == nil || !exact {
		return c.Cache.List(ctx, list, opts...)
	}
	names, err := x.Lookup(ctx, value)
	if err != nil {
		return err
	}
	items := make([]runtime.Object, 0, len(names))
	for _, n := range names {
		if o.Namespace != "" && n.Namespace != o.Namespace {
			continue
		}
		ro, err := c.scheme.New(gvk)
		if err != nil {
			return err
		}
		obj, ok := ro.(client.Object)
		if !ok {
			return fmt.Errorf("%s is not an object", gvk)
		}
		if err := c.Cache.Get(ctx, n, obj, &client.GetOptions{UnsafeDisableDeepCopy: o.UnsafeDisableDeepCopy}); err != nil {
			if apierrors.IsNotFound(err) {
				continue // deleted since the index saw it
			}
			return err
		}
		// The cache's copy may be newer than what the index saw.
		if !contains(x, obj, value) {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		items = append(items, obj)
	}
	return meta.SetList(list, items)
}

func contains(x *kube.KeyIndex, obj client.Object, value string) bool {
	for _, k := range x.Keys(obj) {
		if k == value {
			return true
		}
	}
	return false
}
