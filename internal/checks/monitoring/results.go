package monitoring

import (
	"slices"
	"sync"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// MaxResultsPerReport bounds the check results one health report carries.
const MaxResultsPerReport = 500

// Results collects check results for the health report, the only channel the API
// has for them. The rule (docs/monitoring.md): a report carries the newest result
// of each endpoint checked since the last accepted report — a newer result of an
// endpoint replaces an older unsent one — at most MaxResultsPerReport of them,
// state changes first, then failures, then the longest waiting; the rest go with
// the next report. Nothing is dropped while the API is away; the summary's counts
// are exact (every check counts, sent or replaced).
type Results struct {
	// Max overrides MaxResultsPerReport (tests).
	Max int

	mu                        sync.Mutex
	pending                   map[string]pending
	seq                       uint64
	reported                  map[string]bool // the success last sent per endpoint
	total, successful, failed int
	sinceReport               int
	lastReport                time.Time
	monitored, queued         func() int
}

type pending struct {
	result polycrate.CheckResult
	seq    uint64
}

// NewResults makes an empty collector; monitored and queued feed the summary.
func NewResults(monitored, queued func() int) *Results {
	return &Results{pending: map[string]pending{}, reported: map[string]bool{}, monitored: monitored, queued: queued,
		lastReport: time.Now()}
}

// Add records one check's result.
func (r *Results) Add(res polycrate.CheckResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	r.pending[res.EndpointID] = pending{result: res, seq: r.seq}
	r.total++
	r.sinceReport++
	if res.Success {
		r.successful++
	} else {
		r.failed++
	}
}

// Retain forgets the unsent results of endpoints no longer assigned.
func (r *Results) Retain(assigned map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.pending {
		if !assigned[id] {
			delete(r.pending, id)
		}
	}
	for id := range r.reported {
		if !assigned[id] {
			delete(r.reported, id)
		}
	}
}

// Take returns the summary and the results for one report, and done, which the
// reporter calls with the report's outcome: nil drops what was sent; a refusal
// of the results themselves (400) drops them too (counted, logged by the
// caller) so that one bad result cannot block every later report; any other
// error keeps them for the next report.
func (r *Results) Take() (polycrate.CheckSummary, []polycrate.CheckResult, func(error) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	limit := r.Max
	if limit <= 0 {
		limit = MaxResultsPerReport
	}
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	rank := func(id string) int {
		p := r.pending[id]
		last, sent := r.reported[id]
		switch {
		case !sent || last != p.result.Success:
			return 0 // a state change
		case !p.result.Success:
			return 1
		}
		return 2
	}
	slices.SortFunc(ids, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return int(r.pending[a].seq - r.pending[b].seq) //nolint:gosec // sequence numbers, no overflow
	})
	if len(ids) > limit {
		ids = ids[:limit]
	}
	taken := make(map[string]pending, len(ids))
	out := make([]polycrate.CheckResult, 0, len(ids))
	for _, id := range ids {
		taken[id] = r.pending[id]
		out = append(out, r.pending[id].result)
	}
	minutes := max(time.Since(r.lastReport).Minutes(), 1.0/60)
	since := r.sinceReport
	summary := polycrate.CheckSummary{TotalChecks: r.total, SuccessfulChecks: r.successful, FailedChecks: r.failed,
		ChecksSinceLastReport: since, ChecksPerMinute: float64(since) / minutes}
	if r.monitored != nil {
		summary.MonitoredEndpoints = r.monitored()
	}
	if r.queued != nil {
		summary.ChecksInQueue = r.queued()
	}
	return summary, out, func(err error) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil && !polycrate.IsValidation(err) {
			return 0
		}
		for id, sent := range taken {
			if p, ok := r.pending[id]; ok && p.seq == sent.seq { // not replaced meanwhile
				delete(r.pending, id)
			}
			if err == nil {
				r.reported[id] = sent.result.Success
			}
		}
		r.sinceReport -= since
		r.lastReport = time.Now()
		if err != nil {
			return len(taken)
		}
		return 0
	}
}

// Pending is the number of endpoints with an unsent result.
func (r *Results) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}
