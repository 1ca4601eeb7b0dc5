package apisync

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// recentTTL is how long a remembered write stands in for the cache: the cache
// catches up within milliseconds, seconds on a loaded API server. It bounds the
// memory too: at most the writes of the last 30 s are kept (a few thousand
// entries of ~150 bytes while thousands of objects converge, none when idle).
const recentTTL = 30 * time.Second

// write is a sync status this process wrote.
type write struct{ id, hash string }

// recentWrites remembers the sync statuses this process wrote until the cache
// shows them (see Reconciler.recall): apimachinery's expiring cache, whose every
// write sweeps what expired, so it stays small whatever the number of objects.
type recentWrites struct {
	once  sync.Once
	c     *utilcache.Expiring
	clock clock.Clock // nil: the real one (tests set a fake)
}

func (w *recentWrites) cache() *utilcache.Expiring {
	w.once.Do(func() {
		if w.clock == nil {
			w.clock = clock.RealClock{}
		}
		w.c = utilcache.NewExpiringWithClock(w.clock)
	})
	return w.c
}

func (w *recentWrites) put(uid types.UID, v write) { w.cache().Set(uid, v, recentTTL) }

func (w *recentWrites) get(uid types.UID) (write, bool) {
	v, ok := w.cache().Get(uid)
	if !ok {
		return write{}, false
	}
	return v.(write), true
}

func (w *recentWrites) forget(uid types.UID) { w.cache().Delete(uid) }
