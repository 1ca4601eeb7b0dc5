// Package monitoring makes the operator the monitoring agent of the endpoints
// the Polycrate API assigns to it: it fetches the assignment, plans every
// endpoint's checks (Scheduler), runs them (internal/checks/probe), and hands the
// results to the health report, the metrics and the Endpoint CRs.
package monitoring

import (
	"container/heap"
	"context"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/polycrate/polycrate-operator/internal/checks/probe"
)

// Scheduler runs each target's check on its own interval: first checks spread
// with jitter (no thundering herd after a restart or a failover), at most
// MaxConcurrent at once, never two of one target at once (a check that overruns
// its interval delays the next one instead), each bounded by its timeout.
// Set re-plans without disturbing unchanged targets.
type Scheduler struct {
	// Check runs one check (probe.Prober.Run).
	Check func(context.Context, probe.Target) probe.Outcome
	// Done receives every outcome, with the target as it was checked.
	Done func(probe.Target, probe.Outcome)
	// MaxConcurrent bounds the checks running at once (default 64).
	MaxConcurrent int
	// Late observes how late each check started (scheduling lateness).
	Late func(time.Duration)

	// intervalOf is Interval, replaced by tests that need milliseconds.
	intervalOf func(probe.Target) time.Duration

	mu      sync.Mutex
	entries map[string]*entry
	queue   entryHeap
	wake    chan struct{}
	waiting int // due, waiting for a free slot
	running int
	freed   chan struct{}
	jobs    chan job // to an idle worker (unbuffered: only a waiting one takes it)
}

type entry struct {
	target   probe.Target
	hash     uint64
	interval time.Duration
	due      time.Time
	index    int // in the heap; -1 while running or removed
	running  bool
	removed  bool
	changed  bool // re-planned while running: check again soon
}

// MinInterval is the shortest interval a target is checked at.
const MinInterval = time.Second

// spreadRate is how many new targets per second a re-plan starts at most: a
// bulk of new targets (a restart, a failover) spreads over up to one interval.
const spreadRate = 50

// batchWindow: when the scheduler wakes, it also starts the checks due within
// this window (at most a twentieth of their interval), that much early. At 200
// checks a second the process then wakes about 10 times a second instead of
// 200, and the checks of one batch share the poller's wake-ups; each wake-up of
// an idle Go process (a timer, the poller, an OS thread taken out of its sleep)
// cost more CPU than the check's own work: 611 → 193 CPU-µs per check in
// BenchmarkInUse2000 together with the reused workers and the HTTP client of
// internal/checks/probe (docs/monitoring.md, "Performance"). A check's next one stays
// one interval after the time it was due (no drift).
const batchWindow = 100 * time.Millisecond

// early is how early e may start with others.
func (e *entry) early() time.Duration { return min(batchWindow, e.interval/20) }

func (s *Scheduler) init() {
	if s.intervalOf == nil {
		s.intervalOf = Interval
	}
	if s.entries == nil {
		s.entries = map[string]*entry{}
		s.wake = make(chan struct{}, 1)
		s.freed = make(chan struct{}, 1)
		s.jobs = make(chan job)
	}
}

// Interval is how often a target is checked: its kind's spec interval (icmp's
// spec interval spaces the echo requests of one check), default 60 s.
func Interval(t probe.Target) time.Duration {
	seconds := 0.0
	switch t.Kind {
	case "tcp":
		if t.Spec.TCP != nil {
			seconds = float64(t.Spec.TCP.Interval)
		}
	case "dns":
		if t.Spec.DNS != nil {
			seconds = float64(t.Spec.DNS.Interval)
		}
	case "icmp":
	default:
		if t.Spec.HTTP != nil {
			seconds = float64(t.Spec.HTTP.Interval)
		}
	}
	if seconds <= 0 {
		return probe.DefaultInterval
	}
	return max(time.Duration(seconds*float64(time.Second)), MinInterval)
}

func hashOf(t probe.Target) uint64 {
	b, _ := json.Marshal(t)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// Set makes targets the plan. Unchanged targets keep their schedule; a changed
// one is checked again within a second; new ones start spread over a window of
// len(new)/50 seconds (at least 1 s, at most their interval); removed ones are
// never checked again (a running check finishes, its result is dropped).
func (s *Scheduler) Set(targets []probe.Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	now := time.Now()
	keep := make(map[string]bool, len(targets))
	var fresh []*entry
	for _, t := range targets {
		keep[t.ID] = true
		h := hashOf(t)
		e := s.entries[t.ID]
		switch {
		case e == nil:
			e = &entry{target: t, hash: h, interval: s.intervalOf(t), index: -1}
			s.entries[t.ID] = e
			fresh = append(fresh, e)
		case e.hash != h:
			e.target, e.hash, e.interval = t, h, s.intervalOf(t)
			if e.running {
				e.changed = true
			} else {
				e.due = now.Add(rand.N(time.Second))
				heap.Fix(&s.queue, e.index)
			}
		}
	}
	window := max(time.Second, time.Duration(len(fresh))*time.Second/spreadRate)
	for _, e := range fresh {
		e.due = now.Add(rand.N(min(window, e.interval)))
		heap.Push(&s.queue, e)
	}
	for id, e := range s.entries {
		if keep[id] {
			continue
		}
		e.removed = true
		if e.index >= 0 {
			heap.Remove(&s.queue, e.index)
		}
		delete(s.entries, id)
	}
	s.signal()
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Len is the number of planned targets.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Queued is the number of checks that are due and wait for a free slot.
func (s *Scheduler) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// setConcurrency changes MaxConcurrent of a running scheduler.
func (s *Scheduler) setConcurrency(n int) {
	s.mu.Lock()
	s.init()
	changed := s.MaxConcurrent != n
	s.MaxConcurrent = n
	s.mu.Unlock()
	if changed {
		select {
		case s.freed <- struct{}{}:
		default:
		}
	}
}

// acquire waits for a free slot; false when ctx ended.
func (s *Scheduler) acquire(ctx context.Context) bool {
	for {
		s.mu.Lock()
		limit := s.MaxConcurrent
		if limit <= 0 {
			limit = 64
		}
		if s.running < limit {
			s.running++
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		select {
		case <-s.freed:
		case <-ctx.Done():
			return false
		}
	}
}

func (s *Scheduler) release() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// Start runs the plan until ctx ends; running checks are cancelled then.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	s.init()
	s.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		var due []*entry
		for s.queue.Len() > 0 && !s.queue[0].due.After(now.Add(s.queue[0].early())) {
			e := heap.Pop(&s.queue).(*entry)
			e.running = true
			due = append(due, e)
		}
		next := time.Hour
		if s.queue.Len() > 0 {
			next = s.queue[0].due.Sub(now)
		}
		s.waiting = len(due)
		s.mu.Unlock()

		for _, e := range due {
			if !s.acquire(ctx) {
				return nil
			}
			s.mu.Lock()
			s.waiting--
			target, scheduled := e.target, e.due
			s.mu.Unlock()
			if s.Late != nil {
				s.Late(max(0, time.Since(scheduled)))
			}
			j := job{e: e, target: target, scheduled: scheduled}
			select {
			case s.jobs <- j: // an idle worker takes it
			default:
				wg.Add(1)
				go s.work(ctx, &wg, j)
			}
		}
		if len(due) > 0 {
			continue // the clock moved while starting them: look again
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// job is one check to run.
type job struct {
	e         *entry
	target    probe.Target
	scheduled time.Time
}

// workerIdle is how long a worker waits for its next check before it exits.
const workerIdle = time.Minute

// work runs j and then the checks handed to it while it waits (idle workers
// are reused: a new goroutine per check grew its stack anew each time, 5 % of
// the agent's CPU), until it has waited workerIdle for one or ctx ends.
func (s *Scheduler) work(ctx context.Context, wg *sync.WaitGroup, j job) {
	defer wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		s.run(ctx, j)
		idle.Reset(workerIdle)
		select {
		case j = <-s.jobs:
		case <-idle.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// run runs one check in a slot and passes its outcome on.
func (s *Scheduler) run(ctx context.Context, j job) {
	defer s.release()
	out := s.Check(ctx, j.target)
	if ctx.Err() != nil {
		return
	}
	if s.finish(j.e, j.scheduled) && s.Done != nil {
		s.Done(j.target, out)
	}
}

// finish plans a target's next check: one interval after the last was due (no
// drift), or now when that has passed (an overrun), or within a second when it
// changed meanwhile. It reports false for a target removed meanwhile (its result
// is dropped).
func (s *Scheduler) finish(e *entry, scheduled time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.running = false
	if e.removed {
		return false
	}
	now := time.Now()
	switch {
	case e.changed:
		e.changed = false
		e.due = now.Add(rand.N(time.Second))
	default:
		e.due = scheduled.Add(e.interval)
		if e.due.Before(now) {
			e.due = now
		}
	}
	heap.Push(&s.queue, e)
	if e.index == 0 {
		s.signal() // the next check to run: the scheduler's timer is set for a later one
	}
	return true
}

// entryHeap orders entries by due time.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
