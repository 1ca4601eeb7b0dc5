package agent

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// TestReportNoticesTheAPIsReturn: when nothing but the health report asks the
// API (a cold start while it was down), a report that failed because the API
// was away is tried again at the breaker's probe cadence, so the report is
// accepted within about 10 s of the API's return — never after a backoff of up
// to two minutes.
func TestReportNoticesTheAPIsReturn(t *testing.T) {
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() { srv.Close(); _ = api.Close() })
	if err := api.SetFaults(emulator.FaultRule{Path: "/api/v1/*", Status: 503}); err != nil {
		t.Fatal(err)
	}
	breaker := polycrate.NewBreaker(polycrate.BreakerOptions{Log: logr.Discard()})
	conn := polycrate.NewConnection(polycrate.Options{Breaker: breaker, MaxRetries: -1})
	if _, err := conn.Configure(srv.URL, "", emulator.DevAgentToken); err != nil {
		t.Fatal(err)
	}
	cfg := &liveconfig.Store{}
	snap := &liveconfig.Snapshot{Namespace: "polycrate"}
	snap.Spec.APISync.HealthReportIntervalSeconds = 1
	snap.Spec.APISync.Enabled = ptr.To(true)
	cfg.Set(snap)
	state := NewState()
	r := &Reporter{Conn: conn, Config: cfg, State: state, Version: "0.0.1-test", Log: logr.Discard(),
		Identity: func(context.Context) (string, error) { return "agent-under-test", nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Start(ctx) }()

	// Six failures in a row: a doubling backoff (1, 2, 4, 8, 16 s) would now wait 32 s.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return state.Last() != nil && state.Last().Failures >= 6, nil
	}); err != nil {
		t.Fatalf("the report did not fail 6 times in a row: %+v", state.Last())
	}
	if !breaker.State().Open {
		t.Fatal("the breaker did not open")
	}
	if err := api.SetFaults(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 12*time.Second, true, func(context.Context) (bool, error) {
		return state.Last().Err == nil, nil
	}); err != nil {
		last := state.Last()
		t.Fatalf("the report was not accepted within 12 s of the API's return (%d failures, last: %v)", last.Failures, last.Err)
	}
	t.Logf("the report was accepted %s after the API answered again", time.Since(back).Round(100*time.Millisecond))
}
