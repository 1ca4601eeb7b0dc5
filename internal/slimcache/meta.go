package slimcache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// Meta is what a metadata store keeps of an object.
type Meta struct {
	UID             types.UID
	ResourceVersion string
	Deleting        bool
	// ControllerKind and ControllerName name the controlling owner, if any.
	ControllerAPIVersion, ControllerKind, ControllerName string
	ControllerUID                                        types.UID
}

// MetaOf is the Meta of an object.
func MetaOf(o metav1.Object) Meta {
	m := Meta{UID: o.GetUID(), ResourceVersion: o.GetResourceVersion(), Deleting: o.GetDeletionTimestamp() != nil}
	if c := metav1.GetControllerOfNoCopy(o); c != nil {
		m.ControllerAPIVersion, m.ControllerKind, m.ControllerName, m.ControllerUID = c.APIVersion, c.Kind, c.Name, c.UID
	}
	return m
}

// NewMetadataStore watches one resource by metadata only (its content is never
// sent) and keeps the Meta of the objects keep accepts: cluster-wide, or in the
// given namespaces only.
func NewMetadataStore(cfg *rest.Config, gvr schema.GroupVersionResource, name string, keep func(*metav1.PartialObjectMetadata) bool, namespaces ...string) (*Store[Meta], error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	res := mc.Resource(gvr)
	listWatch := func(ri metadata.ResourceInterface) toolscache.ListerWatcher {
		return &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return ri.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return ri.Watch(ctx, o)
			},
		}
	}
	lw := listWatch(res)
	namespaced := func(ns string) toolscache.ListerWatcher { return listWatch(res.Namespace(ns)) }
	slim := func(obj any) (Meta, bool) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok || !keep(m) {
			return Meta{}, false
		}
		return MetaOf(m), true
	}
	return New(Options[Meta]{
		Name: name, ListWatch: lw, Namespaces: namespaces, NamespacedListWatch: namespaced, Example: &metav1.PartialObjectMetadata{}, Slim: slim,
		// The streaming list buffers what keep rejects as name and namespace only.
		Trim: func(obj any) (any, error) {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok || keep(m) {
				return obj, nil
			}
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}, nil
		},
		Equal: func(a, b *Meta) bool { return *a == *b },
	}), nil
}
