package manager

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// TestStockCacheIsStockControllerRuntime: --cache-mode=stock builds the cache
// and logger as controller-runtime does (its cache.New, managedFields stripped
// but no strings interned, the logger as given); fast builds the operator's own.
func TestStockCacheIsStockControllerRuntime(t *testing.T) {
	fn := func(f any) uintptr { return reflect.ValueOf(f).Pointer() }
	log := funcr.New(func(string, string) {}, funcr.Options{})
	shutdown := time.Second
	for _, c := range []struct {
		stock bool
		cache uintptr
	}{{false, fn(newCompactIndexCache)}, {true, fn(cache.New)}} {
		o := managerOptions(&rest.Config{Host: "https://127.0.0.1:1"}, Options{StockCache: c.stock, Logger: log}, nil, &shutdown, nil, nil)
		if got := fn(o.NewCache); got != c.cache {
			t.Errorf("stock=%v: NewCache is not the expected constructor", c.stock)
		}
		sameSink := reflect.TypeOf(o.Logger.GetSink()) == reflect.TypeOf(log.GetSink())
		if sameSink != c.stock {
			t.Errorf("stock=%v: the logger is the one given: %v", c.stock, sameSink)
		}
		// Both strip managedFields; only fast keeps a namespace's string once.
		objs := make([]*v1.Endpoint, 2)
		for i := range objs {
			objs[i] = &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte("team-a")), Name: "e",
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
			if _, err := o.Cache.DefaultTransform(objs[i]); err != nil {
				t.Fatal(err)
			}
			if objs[i].ManagedFields != nil {
				t.Errorf("stock=%v: managedFields kept", c.stock)
			}
		}
		shared := unsafe.StringData(objs[0].Namespace) == unsafe.StringData(objs[1].Namespace)
		if shared == c.stock {
			t.Errorf("stock=%v: the namespace string is shared: %v", c.stock, shared)
		}
	}
}
