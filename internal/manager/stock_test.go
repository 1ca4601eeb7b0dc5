package manager

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// TestStockCacheIsStockControllerRuntime: --cache-mode=stock builds the cache
// as controller-runtime does (its cache.New); fast builds the operator's own
// (compact indexes). Both strip managedFields. The Endpoint informer's list
// and watch follow the same switch (endpointInformers; the endpoints discovery
// suite runs in both modes).
func TestStockCacheIsStockControllerRuntime(t *testing.T) {
	fn := func(f any) uintptr { return reflect.ValueOf(f).Pointer() }
	shutdown := time.Second
	for _, c := range []struct {
		stock bool
		cache uintptr
	}{{false, fn(newCompactIndexCache)}, {true, fn(cache.New)}} {
		o := managerOptions(&rest.Config{Host: "https://127.0.0.1:1"}, Options{StockCache: c.stock}, nil, &shutdown, nil, nil)
		if got := fn(o.NewCache); got != c.cache {
			t.Errorf("stock=%v: NewCache is not the expected constructor", c.stock)
		}
		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "e", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
		if _, err := o.Cache.DefaultTransform(ep); err != nil {
			t.Fatal(err)
		}
		if ep.ManagedFields != nil {
			t.Errorf("stock=%v: managedFields kept", c.stock)
		}
	}
}
