package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

func TestShouldRelease(t *testing.T) {
	const mib = 1 << 20
	live := uint64(48 * mib)
	for _, tc := range []struct {
		name      string
		prev, cur MemorySample
		want      bool
	}{
		{"at rest after a burst: half the live heap free", MemorySample{Allocated: 1000 * mib}, MemorySample{Allocated: 1001 * mib, Live: live, Free: 30 * mib}, true},
		{"at rest, a sixteenth free but under 4 MiB", MemorySample{Allocated: 1000 * mib}, MemorySample{Allocated: 1000 * mib, Live: 40 * mib, Free: 3 * mib}, false},
		{"at rest, a sixteenth free and 4 MiB", MemorySample{Allocated: 1000 * mib}, MemorySample{Allocated: 1000 * mib, Live: 64 * mib, Free: 4 * mib}, true},
		{"at rest, 5.4 MiB of 47 (the 5,000-Ingress figure the old eighth kept)", MemorySample{Allocated: 1000 * mib}, MemorySample{Allocated: 1000 * mib, Live: 47 * mib, Free: 54 * mib / 10}, true},
		{"at rest, under a sixteenth free", MemorySample{Allocated: 1000 * mib}, MemorySample{Allocated: 1000 * mib, Live: 128 * mib, Free: 7 * mib}, false},
		{"at rest, a small process: under 4 MiB free is not worth it", MemorySample{}, MemorySample{Live: 10 * mib, Free: 3 * mib}, false},
		{"working: allocating more than a twentieth of the live heap", MemorySample{Allocated: 1000 * mib}, MemorySample{Allocated: 1003 * mib, Live: live, Free: 40 * mib}, false},
		{"a twentieth exactly is still rest", MemorySample{Allocated: 0}, MemorySample{Allocated: live / 20, Live: live, Free: 40 * mib}, true},
		{"a counter that went back (another process)", MemorySample{Allocated: 5000 * mib}, MemorySample{Allocated: 10, Live: live, Free: 40 * mib}, false},
	} {
		if got := ShouldRelease(tc.prev, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMemoryReleaserReleasesOnlyAtRest drives the loop with scripted samples:
// a burst (no release), rest with free heap (one release), rest after it (the
// release's own collection is not taken for work, and nothing is free: none).
func TestMemoryReleaserReleasesOnlyAtRest(t *testing.T) {
	const mib = 1 << 20
	script := []MemorySample{
		{Allocated: 0, Live: 40 * mib},                            // start
		{Allocated: 400 * mib, Live: 48 * mib, Free: 30 * mib},    // burst: allocating
		{Allocated: 401 * mib, Live: 48 * mib, Free: 40 * mib},    // rest, free heap: release
		{Allocated: 402 * mib, Live: 48 * mib, Free: 0},           // read after the release
		{Allocated: 402*mib + 100, Live: 48 * mib, Free: 1 * mib}, // rest, nothing free
		{Allocated: 402*mib + 200, Live: 48 * mib, Free: 1 * mib}, // rest
	}
	var mu sync.Mutex
	i, releases := 0, 0
	done := make(chan struct{})
	m := &MemoryReleaser{Interval: time.Millisecond, Log: testr.New(t),
		read: func() MemorySample {
			mu.Lock()
			defer mu.Unlock()
			if i >= len(script) {
				if i == len(script) {
					close(done)
				}
				i++
				return script[len(script)-1]
			}
			s := script[i]
			i++
			return s
		},
		release: func() { mu.Lock(); releases++; mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = m.Start(ctx); close(stopped) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the releaser did not read its samples")
	}
	cancel()
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	if releases != 1 {
		t.Fatalf("%d releases, want exactly 1 (at rest after the burst)", releases)
	}
}
