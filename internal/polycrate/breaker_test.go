package polycrate

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// flaky is an API whose answer the test sets; it counts what reaches it.
type flaky struct {
	status      atomic.Int32 // 0: 200 with an empty page (204 for a DELETE)
	writeStatus atomic.Int32 // the answer to writes of hosts when not 0 (else status's; 200 serves)
	retryAfter  atomic.Int32
	hits        atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	s := int(f.status.Load())
	if ws := int(f.writeStatus.Load()); ws != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead && strings.HasPrefix(r.URL.Path, "/api/v1/hosts/") {
		s = ws
	}
	if s == http.StatusOK {
		s = 0
	}
	if s == 0 && r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s == 0 {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"count":0,"next":null,"previous":null,"results":[]}`))
		return
	}
	if ra := f.retryAfter.Load(); ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(ra)))
	}
	w.WriteHeader(s)
	_, _ = w.Write([]byte(`{"type":"server_error","errors":[{"code":"error","detail":"down","attr":null}]}`))
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func breakerEnv(t *testing.T, o BreakerOptions) (*flaky, *Client, *Breaker, *clock) {
	t.Helper()
	api := &flaky{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	clk := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	o.Now = clk.now
	if o.Rand == nil {
		o.Rand = func() float64 { return 0 }
	}
	b := NewBreaker(o)
	c, err := New(Options{BaseURL: srv.URL, Token: StaticToken("secret-token"), Breaker: b, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return api, c, b, clk
}

func list(c *Client) error {
	_, err := c.Hosts().List(context.Background(), nil)
	return err
}

func TestBreakerOpensAfterFailuresInARow(t *testing.T) {
	api, c, b, _ := breakerEnv(t, BreakerOptions{Threshold: 3})
	api.status.Store(503)
	for i := 0; i < 2; i++ {
		if err := list(c); IsCircuitOpen(err) || !IsServerError(err) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	// A success in between starts the count anew.
	api.status.Store(0)
	if err := list(c); err != nil {
		t.Fatal(err)
	}
	api.status.Store(503)
	for i := 0; i < 3; i++ {
		if err := list(c); IsCircuitOpen(err) {
			t.Fatalf("open after %d failures", i)
		}
	}
	if !b.State().Open {
		t.Fatal("not open after 3 failures in a row")
	}
	hits := api.hits.Load()
	for i := 0; i < 50; i++ {
		err := list(c)
		if !IsCircuitOpen(err) || !IsTransient(err) {
			t.Fatalf("held-back request: %v", err)
		}
		if strings.Contains(err.Error(), "secret-token") {
			t.Fatal("the token leaked into the error")
		}
	}
	if n := api.hits.Load() - hits; n != 0 {
		t.Fatalf("%d requests reached the API while open", n)
	}
	if st := b.State(); st.HeldBack != 50 || st.Failures != 3 || !strings.Contains(st.Cause, "GET /api/v1/hosts/ answered 503") {
		t.Fatalf("state %+v", st)
	}
}

func TestBreakerProbesAtAGrowingJitteredWait(t *testing.T) {
	jitter := 1.0 // the most jitter: +20 %
	api, c, b, clk := breakerEnv(t, BreakerOptions{Threshold: 1, Rand: func() float64 { return jitter }})
	api.status.Store(500)
	_ = list(c)
	st := b.State()
	if !st.Open || st.NextProbe.Sub(st.Since) != 6*time.Second {
		t.Fatalf("first probe after %s, want 5 s + 20 %% jitter", st.NextProbe.Sub(st.Since))
	}
	// The waits grow by 1.25 up to 8 s (+ jitter); each lets exactly one request through.
	for i, want := range []time.Duration{7500 * time.Millisecond, 9375 * time.Millisecond, 9600 * time.Millisecond, 9600 * time.Millisecond} {
		clk.add(b.State().NextProbe.Sub(clk.now()) - time.Millisecond)
		hits := api.hits.Load()
		if err := list(c); !IsCircuitOpen(err) || api.hits.Load() != hits {
			t.Fatalf("round %d: a request went through before the probe was due: %v", i, err)
		}
		clk.add(time.Millisecond)
		if err := list(c); IsCircuitOpen(err) || api.hits.Load() != hits+1 {
			t.Fatalf("round %d: the probe was not sent: %v", i, err)
		}
		if err := list(c); !IsCircuitOpen(err) {
			t.Fatalf("round %d: a second request after the probe: %v", i, err)
		}
		if got := b.State().NextProbe.Sub(clk.now()); got != want {
			t.Fatalf("round %d: next probe in %s, want %s", i, got, want)
		}
	}
	// Never less than the floor: without jitter the wait is the floor itself.
	jitter = 0
	b.Reset()
	_ = list(c)
	if st := b.State(); st.NextProbe.Sub(st.Since) != DefaultProbeMin {
		t.Fatalf("first wait %s", st.NextProbe.Sub(st.Since))
	}
}

func TestBreakerHonoursRetryAfter(t *testing.T) {
	api, c, b, _ := breakerEnv(t, BreakerOptions{Threshold: 1})
	api.status.Store(429)
	api.retryAfter.Store(40)
	err := list(c)
	if !IsRateLimited(err) || RetryAfter(err) != 40*time.Second {
		t.Fatalf("429: %v", err)
	}
	if st := b.State(); !st.Open || st.NextProbe.Sub(st.Since) != 40*time.Second {
		t.Fatalf("the first probe must wait for Retry-After: %+v", st)
	}
}

func TestBreakerClosesOnTheFirstAnswerAndTellsSubscribers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	api, c, b, clk := breakerEnv(t, BreakerOptions{Threshold: 2, Metrics: m})
	sub := b.Subscribe()
	api.status.Store(502)
	_, _ = list(c), list(c)
	select {
	case <-sub:
	default:
		t.Fatal("no notice of the opening")
	}
	_ = list(c) // held back: not a failure of the API
	if v := promtest.ToFloat64(m.circuitOpen); v != 1 {
		t.Fatalf("gauge %v while open", v)
	}
	if v := promtest.ToFloat64(m.failedInRow); v != 2 {
		t.Fatalf("failed in a row %v after two failures and one held back", v)
	}
	// A 404 is an answer: the API serves.
	api.status.Store(404)
	clk.add(time.Minute)
	if err := list(c); !IsNotFound(err) {
		t.Fatalf("probe: %v", err)
	}
	if b.State().Open {
		t.Fatal("still open after an answer")
	}
	select {
	case <-sub:
	default:
		t.Fatal("no notice of the closing")
	}
	expected := `
# HELP polycrate_api_circuit_transitions_total Transitions of the Polycrate API circuit breaker, by the state entered (open, closed).
# TYPE polycrate_api_circuit_transitions_total counter
polycrate_api_circuit_transitions_total{state="closed"} 1
polycrate_api_circuit_transitions_total{state="open"} 1
# HELP polycrate_api_requests_held_back_total Requests to the Polycrate API the open circuit breaker answered itself (never sent).
# TYPE polycrate_api_requests_held_back_total counter
polycrate_api_requests_held_back_total 1
# HELP polycrate_api_circuit_open 1 while the circuit breaker of the Polycrate API connection is open (requests held back, one probe at a time), else 0.
# TYPE polycrate_api_circuit_open gauge
polycrate_api_circuit_open 0
# HELP polycrate_api_requests_failed_in_a_row Requests to the Polycrate API that failed (no answer, a 5xx or a 429) since the last one that was served; 0 after a success.
# TYPE polycrate_api_requests_failed_in_a_row gauge
polycrate_api_requests_failed_in_a_row 0
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(expected), "polycrate_api_circuit_transitions_total",
		"polycrate_api_requests_held_back_total", "polycrate_api_circuit_open", "polycrate_api_requests_failed_in_a_row"); err != nil {
		t.Fatal(err)
	}
}

func TestBreakerIgnoresWhatSaysNothingOfTheAPI(t *testing.T) {
	api, c, b, _ := breakerEnv(t, BreakerOptions{Threshold: 1})
	api.status.Store(503)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Hosts().List(ctx, nil); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	// Bad input, a missing object, a refused token: the API serves.
	for _, s := range []int{400, 401, 403, 404, 409} {
		api.status.Store(int32(s))
		_ = list(c)
	}
	if b.State().Open {
		t.Fatal("opened without a failure of the API")
	}
	noToken, err := New(Options{BaseURL: "http://127.0.0.1:1", Breaker: b, MaxRetries: -1,
		Token: func(context.Context) (string, error) { return "", errors.New("no Secret") }})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, _ = noToken.Hosts().List(context.Background(), nil)
	}
	if b.State().Open {
		t.Fatal("a missing token opened the breaker")
	}
}

func TestClientRetriesStopWhenTheBreakerOpens(t *testing.T) {
	api, _, b, _ := breakerEnv(t, BreakerOptions{Threshold: 2})
	srv := httptest.NewServer(api)
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL, Token: StaticToken("t"), Breaker: b, MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(context.Context, time.Duration) error { return nil }
	api.status.Store(503)
	err = list(c)
	if IsCircuitOpen(err) || !IsServerError(err) {
		t.Fatalf("the caller gets the API's failure, not the breaker's: %v", err)
	}
	if n := api.hits.Load(); n != 2 {
		t.Fatalf("%d requests: the retries must stop once the breaker opened", n)
	}
}

func TestBreakerProbeRunner(t *testing.T) {
	b := NewBreaker(BreakerOptions{Threshold: 1, ProbeMin: 20 * time.Millisecond, ProbeMax: 40 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pings atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Probe(ctx, func(context.Context) {
			probe, err := b.allow()
			if err != nil {
				return
			}
			if pings.Add(1) < 3 {
				b.done(probe, requestKind{resource: "pops"}, failed, 0, "down")
			} else {
				b.done(probe, requestKind{resource: "pops"}, served, 0, "")
			}
		})
	}()
	b.done(false, requestKind{resource: "pops"}, failed, 0, "down")
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return !b.State().Open, nil })
	if b.State().Open || pings.Load() != 3 {
		t.Fatalf("open %v after %d pings", b.State().Open, pings.Load())
	}
	cancel()
	<-done
}

func TestFenceRefusesBeforeAnyByteIsSent(t *testing.T) {
	api, _, b, _ := breakerEnv(t, BreakerOptions{Threshold: 1})
	srv := httptest.NewServer(api)
	defer srv.Close()
	var fenced atomic.Bool
	c, err := New(Options{BaseURL: srv.URL, Token: StaticToken("t"), Breaker: b, MaxRetries: -1, Fence: func() error {
		if fenced.Load() {
			return fmt.Errorf("%w: paused", ErrFenced)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := list(c); err != nil {
		t.Fatal(err)
	}
	fenced.Store(true)
	hits := api.hits.Load()
	for i := 0; i < 3; i++ {
		_, err := c.Hosts().Create(context.Background(), HostRequest{Name: "h", Hostname: "h"})
		var fe *FencedError
		if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) {
			t.Fatalf("fenced write: %v", err)
		}
		if err := list(c); !errors.Is(err, ErrFenced) {
			t.Fatalf("fenced read: %v", err)
		}
	}
	if api.hits.Load() != hits {
		t.Fatal("a fenced request reached the API")
	}
	if b.State().Open {
		t.Fatal("a fenced request counted as an API failure")
	}
	fenced.Store(false)
	if err := list(c); err != nil {
		t.Fatalf("after the fence lifted: %v", err)
	}
}

// A brownout that fails only the writes: the reads are answered, so the breaker
// stays closed and its end is no transition. Recovered still says when the
// writes are served again — once per streak, and only after one of ProbeMin.
func TestBreakerSignalsWritesServedAgain(t *testing.T) {
	api, c, b, clk := breakerEnv(t, BreakerOptions{Threshold: 3})
	recovered, transitions := b.Recovered(), b.Subscribe()
	quiet := func(what string) {
		t.Helper()
		select {
		case <-recovered:
			t.Fatalf("a recovery signal %s", what)
		default:
		}
	}
	write := func() error { return c.Hosts().Delete(context.Background(), "h1") }

	api.writeStatus.Store(503)
	for i := 0; i < 12; i++ { // a failing write, then an answered read: never 3 failures in a row
		if err := write(); !IsServerError(err) {
			t.Fatalf("write %d: %v", i, err)
		}
		if err := list(c); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		// Another resource's writes are served: they say nothing of the hosts'.
		if err := c.Endpoints().Delete(context.Background(), "e1"); err != nil {
			t.Fatalf("another resource's write %d: %v", i, err)
		}
		clk.add(time.Second)
	}
	if b.State().Open {
		t.Fatal("opened though every other request was answered")
	}
	quiet("while the writes fail")
	api.writeStatus.Store(0)
	if err := write(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-recovered:
	default:
		t.Fatal("no recovery signal when the writes were served again after 11 s of failures")
	}
	select {
	case <-transitions:
		t.Fatal("a transition signal without a transition")
	default:
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	quiet("for a second served write: one per streak")

	// A short streak (a blip under ProbeMin) wakes nothing.
	api.writeStatus.Store(503)
	_ = write()
	clk.add(4 * time.Second)
	api.writeStatus.Store(0)
	if err := write(); err != nil {
		t.Fatal(err)
	}
	quiet("after a blip of 4 s")

	// Reads that fail while the writes are answered are followed apart.
	api.writeStatus.Store(http.StatusOK)
	api.status.Store(502)
	_ = list(c)
	clk.add(6 * time.Second)
	if err := write(); err != nil {
		t.Fatal(err)
	}
	quiet("for a served write while the reads fail")
	api.status.Store(0)
	if err := list(c); err != nil {
		t.Fatal(err)
	}
	select {
	case <-recovered:
	default:
		t.Fatal("no recovery signal when the reads were served again")
	}
}

// The breaker's closing is a recovery too; its opening is not.
func TestBreakerClosingSignalsRecovery(t *testing.T) {
	api, c, b, clk := breakerEnv(t, BreakerOptions{Threshold: 2})
	recovered := b.Recovered()
	api.status.Store(503)
	_, _ = list(c), list(c)
	if !b.State().Open {
		t.Fatal("not open")
	}
	select {
	case <-recovered:
		t.Fatal("the opening signalled a recovery")
	default:
	}
	api.status.Store(0)
	clk.add(time.Minute)
	if err := list(c); err != nil {
		t.Fatal(err)
	}
	select {
	case <-recovered:
	default:
		t.Fatal("no recovery signal when the breaker closed")
	}
}
