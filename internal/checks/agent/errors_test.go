package agent

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func TestErrorReporterBatchesAndRateLimits(t *testing.T) {
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.ReportHealth(ctx, polycrate.HealthReport{Kind: "operator", ReportedAgentID: "op"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	e := &ErrorReporter{Interval: time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	sent := func() int { return api.Counters()["agent/errors"].Writes }

	if err := e.Flush(ctx, c, "op"); err != nil || sent() != 0 {
		t.Fatalf("nothing pending must send nothing: %v, %d", err, sent())
	}
	for i := 0; i < 3; i++ {
		e.Record("local_cluster", "validation failed", false)
	}
	e.Record("health_report", "401", true)
	if err := e.Flush(ctx, c, "op"); err != nil {
		t.Fatal(err)
	}
	if sent() != 1 || e.Pending() != 0 {
		t.Fatalf("one batched report expected: sent %d, pending %d", sent(), e.Pending())
	}
	// Within the interval: kept, not sent.
	e.Record("local_cluster", "again", false)
	if err := e.Flush(ctx, c, "op"); err != nil || sent() != 1 || e.Pending() != 1 {
		t.Fatalf("rate limit: sent %d, pending %d, %v", sent(), e.Pending(), err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if err := e.Flush(ctx, c, "op"); err != nil || sent() != 2 || e.Pending() != 0 {
		t.Fatalf("after the interval: sent %d, pending %d, %v", sent(), e.Pending(), err)
	}
	// A rejected report stays pending.
	e.Record("x", "y", false)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if err := e.Flush(ctx, c, "unknown-agent"); !polycrate.IsNotFound(err) || e.Pending() != 1 {
		t.Fatalf("unknown agent: %v, pending %d", err, e.Pending())
	}
	// Bounded memory however many errors pile up.
	for i := 0; i < 1000; i++ {
		e.Record("flood", "z", true)
	}
	if len(e.recent) > maxRecent || len(e.critical) > maxRecent {
		t.Fatalf("unbounded: %d recent, %d critical", len(e.recent), len(e.critical))
	}
}
