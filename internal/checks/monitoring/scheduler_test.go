package monitoring

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func target(id string, interval int) probe.Target {
	return probe.Target{ID: id, Kind: "http", Address: id + ".example.com",
		Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Interval: interval}}}
}

// recorder counts checks per target and the most that ran at once, overall and
// per target.
type recorder struct {
	mu                 sync.Mutex
	checks             map[string]int
	running, most      int
	perTarget, overlap map[string]int
	delay              time.Duration
}

func newRecorder(delay time.Duration) *recorder {
	return &recorder{checks: map[string]int{}, perTarget: map[string]int{}, overlap: map[string]int{}, delay: delay}
}

func (r *recorder) check(ctx context.Context, t probe.Target) probe.Outcome {
	r.mu.Lock()
	r.running++
	r.most = max(r.most, r.running)
	r.perTarget[t.ID]++
	r.overlap[t.ID] = max(r.overlap[t.ID], r.perTarget[t.ID])
	r.mu.Unlock()
	select {
	case <-time.After(r.delay):
	case <-ctx.Done():
	}
	r.mu.Lock()
	r.running--
	r.perTarget[t.ID]--
	r.checks[t.ID]++
	r.mu.Unlock()
	return probe.Outcome{}
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checks[id]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func start(t *testing.T, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestIntervalPerKind(t *testing.T) {
	cases := []struct {
		t    probe.Target
		want time.Duration
	}{
		{target("a", 30), 30 * time.Second},
		{target("a", 0), probe.DefaultInterval},
		{probe.Target{Kind: "tcp", Spec: polycrate.EndpointSpec{TCP: &polycrate.TCPSpec{Interval: 15}}}, 15 * time.Second},
		{probe.Target{Kind: "dns", Spec: polycrate.EndpointSpec{DNS: &polycrate.DNSSpec{Interval: 120}}}, 120 * time.Second},
		{probe.Target{Kind: "icmp", Spec: polycrate.EndpointSpec{ICMP: &polycrate.ICMPSpec{Interval: 1}}}, probe.DefaultInterval},
	}
	for i, c := range cases {
		if got := Interval(c.t); got != c.want {
			t.Errorf("%d: %s, want %s", i, got, c.want)
		}
	}
}

func TestEveryTargetOnItsIntervalNeverTwiceAtOnce(t *testing.T) {
	// Checks take 120 ms; "slow" is due every 50 ms (it overruns), "fast" every 300 ms.
	rec := newRecorder(120 * time.Millisecond)
	s := &Scheduler{Check: rec.check, MaxConcurrent: 8, intervalOf: func(t probe.Target) time.Duration {
		return map[string]time.Duration{"slow": 50 * time.Millisecond, "fast": 300 * time.Millisecond}[t.ID]
	}}
	s.Set([]probe.Target{target("slow", 1), target("fast", 1)})
	start(t, s)
	waitFor(t, "five checks of fast", func() bool { return rec.count("fast") >= 5 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.overlap["slow"] != 1 || rec.overlap["fast"] != 1 {
		t.Fatalf("a target ran twice at once: %v", rec.overlap)
	}
	// slow overran every time: it ran back to back, about as often as 120 ms allow.
	if rec.checks["slow"] < rec.checks["fast"] {
		t.Fatalf("checks %v", rec.checks)
	}
}

func TestBoundedConcurrency(t *testing.T) {
	rec := newRecorder(50 * time.Millisecond)
	s := &Scheduler{Check: rec.check, MaxConcurrent: 3, intervalOf: func(probe.Target) time.Duration { return 20 * time.Millisecond }}
	var targets []probe.Target
	for i := range 20 {
		targets = append(targets, target(fmt.Sprint(i), 1))
	}
	s.Set(targets)
	start(t, s)
	waitFor(t, "every target checked twice", func() bool {
		for i := range 20 {
			if rec.count(fmt.Sprint(i)) < 2 {
				return false
			}
		}
		return true
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.most > 3 {
		t.Fatalf("%d checks at once, limit 3", rec.most)
	}
}

func TestFirstChecksAreSpread(t *testing.T) {
	s := &Scheduler{}
	var targets []probe.Target
	for i := range 500 {
		targets = append(targets, target(fmt.Sprint(i), 60))
	}
	before := time.Now()
	s.Set(targets)
	// 500 new targets start over 500/50 = 10 s, not at once.
	var first, last time.Time
	buckets := map[int]int{}
	for _, e := range s.queue {
		if first.IsZero() || e.due.Before(first) {
			first = e.due
		}
		if e.due.After(last) {
			last = e.due
		}
		buckets[int(e.due.Sub(before)/time.Second)]++
	}
	if last.Sub(before) > 10*time.Second+100*time.Millisecond || last.Sub(first) < 8*time.Second {
		t.Fatalf("first checks from %s to %s after the plan", first.Sub(before), last.Sub(before))
	}
	for sec, n := range buckets {
		if n > 100 {
			t.Fatalf("%d first checks in second %d: a herd", n, sec)
		}
	}
	// One new target among them starts within a second.
	s.Set(append(targets, target("late", 60)))
	if d := s.entries["late"].due.Sub(time.Now()); d > time.Second {
		t.Fatalf("a single new target waits %s", d)
	}
}

func TestReplan(t *testing.T) {
	var mu sync.Mutex
	var done []string
	rec := newRecorder(0)
	s := &Scheduler{Check: rec.check, Done: func(t probe.Target, _ probe.Outcome) {
		mu.Lock()
		done = append(done, t.ID+t.Spec.HTTP.Path)
		mu.Unlock()
	}}
	s.Set([]probe.Target{target("keep", 3600), target("change", 3600), target("drop", 3600)})
	keepDue := s.entries["keep"].due
	changed := target("change", 3600)
	changed.Spec.HTTP.Path = "/v2"
	s.Set([]probe.Target{target("keep", 3600), changed})
	if !s.entries["keep"].due.Equal(keepDue) {
		t.Fatal("an unchanged target was re-planned")
	}
	if _, ok := s.entries["drop"]; ok || s.Len() != 2 {
		t.Fatal("a removed target stays planned")
	}
	start(t, s)
	// Each checked once within a second or so (new ones spread over ≤ 1 s), the
	// changed one with its new spec.
	waitFor(t, "both checked", func() bool { return rec.count("keep") == 1 && rec.count("change") == 1 })
	mu.Lock()
	defer mu.Unlock()
	for _, d := range done {
		if d == "change" {
			t.Fatal("checked with the old spec")
		}
	}
	if rec.count("drop") != 0 {
		t.Fatal("a removed target was checked")
	}
}

func TestRemovedWhileRunningDropsTheResult(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	var results atomic.Int32
	s := &Scheduler{
		Check: func(ctx context.Context, _ probe.Target) probe.Outcome {
			started.Add(1)
			<-release
			return probe.Outcome{}
		},
		Done: func(probe.Target, probe.Outcome) { results.Add(1) },
	}
	s.Set([]probe.Target{target("gone", 3600)})
	start(t, s)
	waitFor(t, "the check to start", func() bool { return started.Load() == 1 })
	s.Set(nil)
	close(release)
	waitFor(t, "the check to finish", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.running == 0 })
	if results.Load() != 0 {
		t.Fatal("the result of an unassigned endpoint was kept")
	}
}
