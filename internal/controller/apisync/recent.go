package apisync

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// recentTTL is how long a remembered write stands in for the cache: the cache
// catches up within milliseconds, seconds on a loaded API server. It bounds the
// memory too: at most the writes of the last 30 s are kept (a few thousand
// entries of ~150 bytes while thousands of objects converge, none when idle).
const recentTTL = 30 * time.Second

// write is a sync status this process wrote.
type write struct {
	id, hash string
	at       time.Time
}

// recentWrites remembers the sync statuses this process wrote until the cache
// shows them (see Reconciler.recall). It holds only writes of the last
// recentTTL, so it stays small whatever the number of objects.
type recentWrites struct {
	mu     sync.Mutex
	m      map[types.UID]write
	puts   int
	now    func() time.Time
	expiry time.Duration
}

func (w *recentWrites) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

func (w *recentWrites) ttl() time.Duration {
	if w.expiry > 0 {
		return w.expiry
	}
	return recentTTL
}

func (w *recentWrites) put(uid types.UID, v write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.UID]write{}
	}
	now := w.clock()
	v.at = now
	w.m[uid] = v
	if w.puts++; w.puts%1024 == 0 { // amortised sweep of what the cache never re-read
		for k, e := range w.m {
			if now.Sub(e.at) > w.ttl() {
				delete(w.m, k)
			}
		}
	}
}

func (w *recentWrites) get(uid types.UID) (write, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.m[uid]
	if ok && w.clock().Sub(v.at) > w.ttl() {
		delete(w.m, uid)
		return write{}, false
	}
	return v, ok
}

func (w *recentWrites) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, uid)
}

func (w *recentWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
