package polycrate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// The breaker's defaults (docs/reliability.md "The circuit breaker").
const (
	// DefaultBreakerThreshold failures in a row (no answer, 5xx, 429) open it.
	DefaultBreakerThreshold = 5
	// DefaultProbeMin is the first wait for a probe, and the floor of every wait:
	// while open, at most one request per 5 s reaches the API.
	DefaultProbeMin = 5 * time.Second
	// DefaultProbeMax caps the growing wait: a recovery is noticed within 9.6 s
	// (the cap plus its jitter), however long the outage lasted — small against
	// the convergence after it (docs/reliability.md).
	DefaultProbeMax = 8 * time.Second
	// probeGrowth multiplies the wait after each failed probe; probeJitter adds up
	// to this share of it (never less than the wait: the floor holds).
	probeGrowth = 1.25
	probeJitter = 0.2
)

// BreakerOptions configure a Breaker; zero values take the defaults.
type BreakerOptions struct {
	Threshold int
	ProbeMin  time.Duration
	ProbeMax  time.Duration
	// Log gets one line per transition (opened, closed).
	Log logr.Logger
	// Metrics records the state, the transitions and the requests held back.
	Metrics *Metrics
	// Now and Rand are for tests.
	Now  func() time.Time
	Rand func() float64
}

// Breaker is the circuit breaker of the API connection, shared by everything
// that calls the API (controllers, health report, monitoring, webhooks): after
// Threshold failures in a row — no answer, a 5xx or a 429 — it opens, and every
// request fails at once with a *CircuitOpenError instead of reaching the API.
// One probe request at a time is let through after a growing, jittered wait
// (never less than ProbeMin nor less than a Retry-After the API sent); the first
// answer that is no failure closes it, and Subscribe's channels learn of it.
// Safe for concurrent use.
type Breaker struct {
	opts BreakerOptions

	mu        sync.Mutex
	failures  int
	open      bool
	since     time.Time // opened at
	openedBy  string    // the failure that opened it
	nextProbe time.Time
	wait      time.Duration // the current wait between probes
	probing   bool          // a probe is in flight
	heldBack  int64         // requests refused during this opening
	subs      []chan struct{}
	// failingSince is, per kind of request (a resource's reads or its writes:
	// requestKind), when its current streak of failures began; a kind whose
	// last request was served has no entry. A brownout may fail only the writes
	// (or one resource's) while the other answers keep the breaker closed.
	failingSince map[requestKind]time.Time
	recoveries   []chan struct{}
}

// NewBreaker returns a closed breaker.
func NewBreaker(o BreakerOptions) *Breaker {
	if o.Threshold <= 0 {
		o.Threshold = DefaultBreakerThreshold
	}
	if o.ProbeMin <= 0 {
		o.ProbeMin = DefaultProbeMin
	}
	if o.ProbeMax < o.ProbeMin {
		o.ProbeMax = max(DefaultProbeMax, o.ProbeMin)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	o.Metrics.breakerState(false)
	o.Metrics.failures(0)
	return &Breaker{opts: o}
}

// CircuitOpenError is the answer to a request the open breaker held back: no
// request was sent. It is transient: the request may succeed once the API answers
// again (Subscribe says when).
type CircuitOpenError struct {
	Since    time.Time
	Failures int
	// Cause is the failure that opened the breaker (no token, no query).
	Cause string
}

func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("requests to the Polycrate API are held back: it failed %d times in a row (circuit open since %s; last: %s); one probe at a time checks whether it answers again",
		e.Failures, e.Since.UTC().Format(time.RFC3339), e.Cause)
}

// IsCircuitOpen: the request was held back by the open breaker (never sent).
func IsCircuitOpen(err error) bool {
	var e *CircuitOpenError
	return errors.As(err, &e)
}

// BreakerState is a snapshot of the breaker.
type BreakerState struct {
	Open      bool
	Since     time.Time
	Failures  int
	Cause     string
	NextProbe time.Time
	HeldBack  int64
}

// State returns the breaker's state.
func (b *Breaker) State() BreakerState {
	if b == nil {
		return BreakerState{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return BreakerState{Open: b.open, Since: b.since, Failures: b.failures, Cause: b.openedBy, NextProbe: b.nextProbe, HeldBack: b.heldBack}
}

// Subscribe returns a channel that receives a value after each transition
// (coalesced: a slow reader sees one value for several). Read State then.
func (b *Breaker) Subscribe() <-chan struct{} { return b.subscribe(&b.subs) }

// Recovered returns a channel that receives a value each time requests that
// failed are served again (coalesced like Subscribe's): when the breaker
// closes, and when a kind of request — one resource's reads, or its writes —
// is served after failing for at least ProbeMin while the breaker stayed
// closed. A brownout that fails only the writes keeps the breaker closed (the
// reads are answered, and each answer resets the count), so its end is no
// transition; without this signal the objects whose writes failed would wait
// out their backoff (up to a minute) after the API recovered. At most one
// signal per streak of a kind, and a streak lasts at least ProbeMin: a
// flapping API is not answered with a burst of retries more often than that.
func (b *Breaker) Recovered() <-chan struct{} { return b.subscribe(&b.recoveries) }

// subscribe adds a channel to one of the breaker's lists of subscribers.
func (b *Breaker) subscribe(list *[]chan struct{}) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	*list = append(*list, ch)
	b.mu.Unlock()
	return ch
}

// allow is asked before each request: nil lets it go (probe: it is the one probe
// of an open breaker, and must be answered with done), else the error to return.
func (b *Breaker) allow() (probe bool, err error) {
	if b == nil {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return false, nil
	}
	if !b.probing && !b.opts.Now().Before(b.nextProbe) {
		b.probing = true
		return true, nil
	}
	b.heldBack++
	b.opts.Metrics.heldBack()
	return false, &CircuitOpenError{Since: b.since, Failures: b.failures, Cause: b.openedBy}
}

// outcome of one request for the breaker.
type outcome int

const (
	// served: the API answered with anything but a 5xx or 429.
	served outcome = iota
	// failed: no answer, a 5xx or a 429.
	failed
	// abandoned: the caller gave up (its context ended): says nothing of the API.
	abandoned
)

// requestKind is a kind of request whose failures are followed apart
// (failingSince): a resource's writes (any method but GET and HEAD) or its reads.
type requestKind struct {
	resource string
	write    bool
}

func (k requestKind) String() string {
	if k.write {
		return k.resource + " writes"
	}
	return k.resource + " reads"
}

// done records a request's outcome; retryAfter is what a 429/503 asked for.
func (b *Breaker) done(probe bool, kind requestKind, o outcome, retryAfter time.Duration, cause string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	if probe {
		b.probing = false
	}
	var notify, recovered bool
	switch o {
	case abandoned:
	case served:
		b.failures = 0
		b.opts.Metrics.failures(0)
		if since, ok := b.failingSince[kind]; ok {
			delete(b.failingSince, kind)
			if !b.open && b.opts.Now().Sub(since) >= b.opts.ProbeMin {
				recovered = true
				b.opts.Log.Info("Polycrate API serves again what failed while the circuit stayed closed", "requests", kind.String(),
					"failingFor", b.opts.Now().Sub(since).Round(time.Millisecond).String())
			}
		}
		if b.open {
			held, openFor := b.heldBack, b.opts.Now().Sub(b.since)
			b.open, b.heldBack, b.openedBy = false, 0, ""
			notify = true
			b.opts.Metrics.breakerState(false)
			b.opts.Metrics.transition(false)
			b.opts.Log.Info("Polycrate API circuit closed: the API answers again", "openFor", openFor.Round(time.Millisecond).String(),
				"requestsHeldBack", held)
		}
	case failed:
		b.failures++
		b.opts.Metrics.failures(b.failures)
		now := b.opts.Now()
		if _, ok := b.failingSince[kind]; !ok {
			if b.failingSince == nil {
				b.failingSince = map[requestKind]time.Time{}
			}
			b.failingSince[kind] = now
		}
		switch {
		case !b.open && b.failures >= b.opts.Threshold:
			b.open, b.since, b.openedBy, b.wait = true, now, cause, b.opts.ProbeMin
			b.nextProbe = now.Add(max(b.jittered(b.wait), retryAfter))
			notify = true
			b.opts.Metrics.breakerState(true)
			b.opts.Metrics.transition(true)
			b.opts.Log.Info("Polycrate API circuit opened: requests are held back, one probe at a time checks for a recovery",
				"failuresInARow", b.failures, "lastFailure", cause, "firstProbeIn", b.nextProbe.Sub(now).Round(time.Millisecond).String())
		case b.open && probe:
			b.wait = min(time.Duration(float64(b.wait)*probeGrowth), b.opts.ProbeMax)
			b.nextProbe = now.Add(max(b.jittered(b.wait), retryAfter))
			b.opts.Log.V(1).Info("Polycrate API probe failed; circuit stays open", "failure", cause,
				"nextProbeIn", b.nextProbe.Sub(now).Round(time.Millisecond).String())
		case b.open && retryAfter > 0 && now.Add(retryAfter).After(b.nextProbe):
			b.nextProbe = now.Add(retryAfter) // a request in flight when it opened asks for a longer pause
		}
	}
	var subs []chan struct{}
	if notify {
		subs = append(subs, b.subs...)
	}
	if recovered || (notify && !b.open) {
		subs = append(subs, b.recoveries...)
	}
	b.mu.Unlock()
	signal(subs)
}

// signal sends each channel a value unless one is waiting already.
func signal(chs []chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (b *Breaker) jittered(d time.Duration) time.Duration {
	return d + time.Duration(float64(d)*probeJitter*b.opts.Rand())
}

// Reset closes the breaker without a transition (a new API URL: what failed
// was another API).
func (b *Breaker) Reset() {
	if b == nil {
		return
	}
	b.mu.Lock()
	wasOpen := b.open
	b.failures, b.open, b.probing, b.heldBack, b.openedBy = 0, false, false, 0, ""
	clear(b.failingSince)
	subs := append(append([]chan struct{}{}, b.subs...), b.recoveries...)
	b.mu.Unlock()
	b.opts.Metrics.breakerState(false)
	b.opts.Metrics.failures(0)
	if wasOpen {
		signal(subs)
	}
}

// Probe runs until ctx ends: while the breaker is open and nobody else's request
// took the probe when it was due, it sends one itself with ping (a cheap GET), so a
// recovery is noticed even when every caller is parked. Run it once per breaker.
func (b *Breaker) Probe(ctx context.Context, ping func(ctx context.Context)) {
	transitions := b.Subscribe()
	for {
		var wake <-chan time.Time
		var t *time.Timer
		if st := b.State(); st.Open {
			// A little after the probe is due: a caller's own request goes first.
			t = time.NewTimer(max(time.Until(st.NextProbe), 0) + 100*time.Millisecond)
			wake = t.C
		}
		select {
		case <-ctx.Done():
		case <-transitions:
		case <-wake:
			if b.State().Open {
				ping(ctx)
			}
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}
