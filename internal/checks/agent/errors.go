package agent

import (
	"context"
	"sync"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// maxRecent bounds the recent errors kept between two reports.
const maxRecent = 20

// ErrorReporter collects errors worth the API's attention (repeated sync failures,
// critical conditions) and sends them batched to POST /api/v1/agent/errors/ at most
// once per Interval, so a failing operator never floods the API. Safe for
// concurrent use.
type ErrorReporter struct {
	// Interval is the minimum time between two reports (default 5 minutes).
	Interval time.Duration
	// Now is the clock (tests).
	Now func() time.Time

	mu       sync.Mutex
	counts   map[string]int
	critical []string
	recent   []map[string]any
	total    int
	lastSent time.Time
}

// Record notes an error under a category (e.g. "health_report", "local_cluster").
// Messages must not contain secrets; they are API error texts and condition messages.
func (e *ErrorReporter) Record(category, message string, critical bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = map[string]int{}
	}
	e.counts[category]++
	e.total++
	if critical {
		e.critical = append(e.critical, category+": "+message)
		if len(e.critical) > maxRecent {
			e.critical = e.critical[len(e.critical)-maxRecent:]
		}
	}
	e.recent = append(e.recent, map[string]any{"category": category, "message": message, "at": e.now().UTC().Format(time.RFC3339)})
	if len(e.recent) > maxRecent {
		e.recent = e.recent[len(e.recent)-maxRecent:]
	}
}

func (e *ErrorReporter) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Pending is the number of errors recorded since the last report.
func (e *ErrorReporter) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// Flush sends the pending errors when there are any and Interval has passed since
// the last report. On failure they stay pending for the next try.
func (e *ErrorReporter) Flush(ctx context.Context, c *polycrate.Client, agentID string) error {
	interval := e.Interval
	if interval == 0 {
		interval = 5 * time.Minute
	}
	e.mu.Lock()
	if e.total == 0 || c == nil || (!e.lastSent.IsZero() && e.now().Sub(e.lastSent) < interval) {
		e.mu.Unlock()
		return nil
	}
	report := polycrate.ErrorReport{AgentID: agentID, Timestamp: e.now().UTC(), TotalErrors: e.total,
		ErrorCounts: map[string]int{}, CriticalErrors: append([]string{}, e.critical...),
		RecentErrors: append([]map[string]any{}, e.recent...), SystemInfo: map[string]any{}}
	for k, v := range e.counts {
		report.ErrorCounts[k] = v
	}
	e.mu.Unlock()

	if _, err := c.ReportErrors(ctx, report); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// Subtract what was sent; errors recorded meanwhile stay pending.
	e.total -= report.TotalErrors
	for k, v := range report.ErrorCounts {
		if e.counts[k] -= v; e.counts[k] <= 0 {
			delete(e.counts, k)
		}
	}
	e.critical = e.critical[min(len(report.CriticalErrors), len(e.critical)):]
	e.recent = e.recent[min(len(report.RecentErrors), len(e.recent)):]
	e.lastSent = e.now()
	return nil
}
