package kube

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
)

// MemoryReleaser hands the heap memory the garbage collector has freed back to
// the operating system once the process is at rest.
//
// Go's runtime keeps freed heap for reuse: with the default GOGC=100 the heap
// grows to twice the live objects before a collection, and the runtime returns
// only what lies above about 110 % of that goal. After a burst of work (a start
// with 10,000 Endpoints to sync, 20,000 Pods arriving) the operator therefore
// keeps about as much free heap as it has live objects, for as long as it runs:
// at 5,000 Ingresses about 30 MiB of its resident memory (docs/performance.md).
// An operator spends nearly all its time at rest, so that is what it costs the
// node. When the process allocated less than a twentieth of its live heap in
// the last interval (at rest: no burst of work), and at least a sixteenth of
// the live heap (and 4 MiB) lies free, it returns the free heap at once
// (debug.FreeOSMemory: one collection, then the free pages released). The
// runtime's own scavenger would keep such an amount for good: it returns only
// what lies above the heap goal, twice the live heap. (It was an eighth and
// 8 MiB until 2026-12-02; at 5,000 Ingresses 5.4 MiB then stayed free at rest.)
//
// Under load nothing changes: the release is skipped while the process
// allocates, so it costs no collection and no page faults during the work; the
// peak resident memory is the runtime's as before. It runs on every replica.
type MemoryReleaser struct {
	// Interval between two looks (default 5 s).
	Interval time.Duration
	Log      logr.Logger

	// read and release are the runtime's, replaced in tests.
	read    func() MemorySample
	release func()
}

// MemorySample is what the releaser decides on, from runtime/metrics.
type MemorySample struct {
	// Allocated is the bytes allocated since the process started.
	Allocated uint64
	// Live is the bytes of heap objects (live or not yet swept).
	Live uint64
	// Free is the heap the runtime holds free and has not returned.
	Free uint64
}

const (
	minReleaseBytes = 4 << 20
	// restFraction: allocating less than Live/restFraction per interval is rest.
	restFraction = 20
	// freeFraction: free heap of at least Live/freeFraction is worth returning.
	freeFraction = 16
)

// ShouldRelease decides from two consecutive samples.
func ShouldRelease(prev, cur MemorySample) bool {
	if cur.Allocated < prev.Allocated { // a new process's counter
		return false
	}
	atRest := cur.Allocated-prev.Allocated <= cur.Live/restFraction
	return atRest && cur.Free >= minReleaseBytes && cur.Free >= cur.Live/freeFraction
}

// NeedLeaderElection: every replica holds its own memory.
func (m *MemoryReleaser) NeedLeaderElection() bool { return false }

// Start looks every Interval until ctx ends.
func (m *MemoryReleaser) Start(ctx context.Context) error {
	interval := m.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	read, release := m.read, m.release
	if read == nil {
		read = readMemory
	}
	if release == nil {
		release = debug.FreeOSMemory
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	prev := read()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur := read()
		if ShouldRelease(prev, cur) {
			release()
			m.Log.V(1).Info("returned the free heap to the OS at rest", "freeMiB", cur.Free>>20, "liveMiB", cur.Live>>20)
			cur = read() // the release's own collection is not new work
		}
		prev = cur
	}
}

var memoryMetrics = []string{"/gc/heap/allocs:bytes", "/memory/classes/heap/objects:bytes", "/memory/classes/heap/free:bytes"}

func readMemory() MemorySample {
	s := make([]metrics.Sample, len(memoryMetrics))
	for i, name := range memoryMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return MemorySample{Allocated: v(0), Live: v(1), Free: v(2)}
}
