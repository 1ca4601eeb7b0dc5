// Package agent is the operator as an agent of the Polycrate API: its stable
// identity, and the health report that registers it, keeps it alive and
// resolves its workspace (over the connection of internal/polycrate).
package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Result is the outcome of the latest health report.
type Result struct {
	At       time.Time
	Response *polycrate.HealthResponse // set on success
	Err      error                     // set on failure
	// Failures counts consecutive failed reports.
	Failures int
}

// State is the latest health report, shared by the reporter (writer) and the
// OperatorConfig controller (reader, the only writer of the CR's status).
type State struct {
	mu      sync.RWMutex
	last    *Result
	changed chan struct{}
}

// NewState makes an empty state.
func NewState() *State { return &State{changed: make(chan struct{}, 1)} }

// Last is the latest result, nil before the first report.
func (s *State) Last() *Result {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last
}

// Changed receives a value when the outcome of the reports changes (success
// versus failure, the kind of failure, or what the API answered).
func (s *State) Changed() <-chan struct{} { return s.changed }

func (s *State) set(r *Result) {
	s.mu.Lock()
	prev := s.last
	s.last = r
	s.mu.Unlock()
	if prev == nil || outcome(prev) != outcome(r) {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
}

// outcome summarises a result for change detection (never the token).
func outcome(r *Result) string {
	if r.Err != nil {
		return "error:" + r.Err.Error()
	}
	h := r.Response
	return "ok:" + h.AgentID + "/" + h.WorkspaceID + "/" + h.WorkspaceName + "/" + ptr.Deref(h.OrganizationID, "") + "/" + ptr.Deref(h.OrganizationName, "") + "/" + h.PopName
}

// Metrics of the health report.
type Metrics struct {
	reports     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// NewMetrics registers polycrate_operator_health_reports_total{result} and
// polycrate_operator_health_report_last_success_timestamp_seconds.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polycrate_operator_health_reports_total",
			Help: "Health reports sent to the Polycrate API, by result (success, failure)."}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "polycrate_operator_health_report_last_success_timestamp_seconds",
			Help: "Unix time of the last health report the Polycrate API accepted."}),
	}
	var err error
	if m.reports, err = polycrate.Register(reg, m.reports); err != nil {
		return nil, err
	}
	if m.lastSuccess, err = polycrate.Register(reg, m.lastSuccess); err != nil {
		return nil, err
	}
	return m, nil
}

// Reporter sends the health report on an interval. It needs leader election: only
// the active replica reports.
type Reporter struct {
	Conn     *polycrate.Connection
	Config   *liveconfig.Store
	State    *State
	Metrics  *Metrics
	Identity func(ctx context.Context) (string, error)
	Version  string
	Log      logr.Logger
	// MaxBackoff caps the wait after failed reports (default 2 minutes).
	MaxBackoff time.Duration
	// Errors collects errors for POST /api/v1/agent/errors/; flushed after accepted reports.
	Errors *ErrorReporter
	// Problems names what does not work right now (e.g. synced objects in Error);
	// any makes the report "degraded" with them as its warnings. Nil: none.
	Problems func(ctx context.Context) []string
	// Checks is the monitoring agent: its results and summary ride on every
	// report, its problems make the report degraded or unhealthy. Nil: none.
	Checks CheckSource

	trigger chan struct{}
	once    sync.Once
	started time.Time
}

func (r *Reporter) init() {
	r.once.Do(func() {
		r.trigger = make(chan struct{}, 1)
		if r.MaxBackoff == 0 {
			r.MaxBackoff = 2 * time.Minute
		}
	})
}

// CheckSource is the monitoring agent as the health report sees it.
type CheckSource interface {
	// Take returns the summary and the results for one report, and a function
	// the report's outcome goes to (it returns how many results a refusal dropped).
	Take() (polycrate.CheckSummary, []polycrate.CheckResult, func(error) int)
	// Problems are warnings (degraded) and critical errors (unhealthy).
	Problems() (warnings, critical []string)
}

// ReportNow asks for a report as soon as possible (the token or URL changed).
func (r *Reporter) ReportNow() {
	r.init()
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// earlyReportGap bounds ReportSoon to one early report per interval.
const earlyReportGap = 5 * time.Second

// ReportSoon asks for an early report while the last one failed: another request
// just got an answer, so the API may be back, and APIConnected should not wait
// for the report's backoff (up to MaxBackoff) to say so. At most one early report
// per earlyReportGap, so a health endpoint that keeps failing while others answer
// is not hammered.
func (r *Reporter) ReportSoon() {
	last := r.State.Last()
	if last == nil || last.Err == nil || time.Since(last.At) < earlyReportGap {
		return
	}
	r.ReportNow()
}

// NeedLeaderElection: only the leader reports.
func (r *Reporter) NeedLeaderElection() bool { return true }

// Start reports until ctx ends: at once, then every interval; after failures the
// wait doubles up to MaxBackoff, so a dead API is not hammered.
func (r *Reporter) Start(ctx context.Context) error {
	r.init()
	r.started = time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-r.trigger:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		timer.Reset(r.report(ctx))
	}
}

// report sends one report and returns the wait before the next.
func (r *Reporter) report(ctx context.Context) time.Duration {
	snap := r.Config.Get()
	interval := 30 * time.Second
	if snap != nil && snap.Spec.APISync.HealthReportIntervalSeconds > 0 {
		interval = time.Duration(snap.Spec.APISync.HealthReportIntervalSeconds) * time.Second
	}
	c := r.Conn.Client()
	if snap == nil || !liveconfig.Enabled(snap.Spec.APISync.Enabled) || c == nil {
		return interval // nothing to report to; ReportNow wakes us when that changes
	}
	id, err := r.Identity(ctx)
	if err != nil {
		r.Log.Error(err, "cannot determine the operator's agent id; reporting without it")
	}
	uptime := int64(time.Since(r.started).Seconds())
	start := r.started.UTC()
	now := time.Now().UTC()
	report := polycrate.HealthReport{
		ReportedAgentID: id, Version: r.Version, Kind: "operator", Status: "healthy",
		UptimeSeconds: &uptime, StartTime: &start, ReportedAt: &now, APIConnected: polycrate.Ptr(true),
		CheckSummary: &polycrate.CheckSummary{},
	}
	if r.Problems != nil {
		if problems := r.Problems(ctx); len(problems) > 0 {
			// The API's view of the agent must be true: it works, but not everything.
			report.Status, report.Warnings = "degraded", problems
		}
	}
	var checksDone func(error) int
	if r.Checks != nil {
		summary, results, done := r.Checks.Take()
		report.CheckSummary, report.CheckResults, checksDone = &summary, results, done
		warnings, critical := r.Checks.Problems()
		if len(warnings) > 0 {
			report.Status, report.Warnings = "degraded", append(report.Warnings, warnings...)
		}
		if len(critical) > 0 {
			report.Status, report.CriticalErrors = "unhealthy", critical
		}
	}
	resp, err := c.ReportHealth(ctx, report)
	if checksDone != nil {
		if dropped := checksDone(err); dropped > 0 {
			r.Log.Info("the API refused the check results of a health report (an endpoint deleted meanwhile?); they are dropped and the report is sent again without them",
				"results", dropped, "error", err.Error())
			// The heartbeat must not be lost with them.
			report.CheckResults = nil
			resp, err = c.ReportHealth(ctx, report)
		}
	}
	if errors.Is(err, polycrate.ErrFenced) {
		// Not sent: this replica's leadership is not confirmed; whoever leads reports.
		r.Log.V(1).Info("health report not sent: leadership not confirmed", "error", err.Error())
		return min(interval, 2*time.Second)
	}
	res := r.record(ctx, c, id, now, resp, err)
	r.State.set(res)
	if res.Failures == 0 {
		return interval
	}
	return r.retryWait(res, interval)
}

// record keeps the outcome of a report (consecutive failures, the metric, the
// log line on a change, the error report) and returns it.
func (r *Reporter) record(ctx context.Context, c *polycrate.Client, id string, now time.Time, resp *polycrate.HealthResponse, err error) *Result {
	prev := r.State.Last()
	res := &Result{At: now}
	if err != nil {
		res.Err = err
		if prev != nil {
			res.Failures = prev.Failures + 1
		} else {
			res.Failures = 1
		}
		r.Metrics.observe(false)
		r.Log.Info("health report failed", "error", err.Error(), "consecutiveFailures", res.Failures)
		if r.Errors != nil {
			r.Errors.Record("health_report", err.Error(), polycrate.IsUnauthorized(err) || polycrate.IsForbidden(err))
		}
	} else {
		res.Response = resp
		r.Metrics.observe(true)
		if prev == nil || prev.Err != nil {
			r.Log.Info("health report accepted", "agentID", resp.AgentID, "workspace", resp.WorkspaceName,
				"organization", ptr.Deref(resp.OrganizationName, ""), "pop", resp.PopName)
		}
		if r.Errors != nil {
			if ferr := r.Errors.Flush(ctx, c, id); ferr != nil {
				r.Log.Info("error report not accepted; kept for the next try", "error", ferr.Error())
			}
		}
	}
	return res
}

// retryWait is the wait after a failed report: doubling from the interval up
// to MaxBackoff, but no longer than the breaker's probe cadence while the
// failure may pass on its own, and never shorter than a Retry-After.
func (r *Reporter) retryWait(res *Result, interval time.Duration) time.Duration {
	wait := min(interval<<min(res.Failures-1, 10), max(r.MaxBackoff, interval))
	switch {
	case polycrate.IsCircuitOpen(res.Err):
		// Held back, not sent: try again when the breaker lets its next probe
		// through. The report is then the probe that notices the API's return:
		// nothing else may be asking the API (a cold start while it was down),
		// and a report waiting out a long backoff kept APIConnected and Ready
		// False for up to two minutes after the API answered again.
		// (At least a second apart: while another request is the probe, every
		// try is held back.)
		wait = min(wait, max(time.Until(r.Conn.Breaker().State().NextProbe)+probeSlack, time.Second))
	case polycrate.IsTransient(res.Err):
		// The API did not answer, or failed: look again at the breaker's own
		// probe cadence — at most one request per RecoveryProbe while it fails
		// (once the breaker opens, it holds the rest back).
		wait = min(wait, RecoveryProbe)
	}
	return max(wait, polycrate.RetryAfter(res.Err)) // the API asked for a longer pause
}

// RecoveryProbe is the longest wait after a failed report while the failure
// may pass on its own (no answer, 5xx, 429, the circuit open): the breaker's
// longest probe wait, so the API's return shows within about 10 s. A refused
// token backs off up to MaxBackoff instead (fixing it reconfigures the
// connection, which reports at once).
const RecoveryProbe = polycrate.DefaultProbeMax

// probeSlack lets the breaker's next probe time pass before the report asks.
const probeSlack = 100 * time.Millisecond

func (m *Metrics) observe(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reports.WithLabelValues("success").Inc()
		m.lastSuccess.SetToCurrentTime()
	} else {
		m.reports.WithLabelValues("failure").Inc()
	}
}

// ClusterIdentity is a stable agent id for this cluster's operator: it survives
// restarts and leader changes because it derives from the kube-system namespace's
// UID (the de-facto cluster id) and the operator's namespace.
func ClusterIdentity(reader client.Reader, operatorNamespace string) func(ctx context.Context) (string, error) {
	var mu sync.Mutex
	var id string
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if id != "" {
			return id, nil
		}
		ns := &corev1.Namespace{}
		if err := reader.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
			return "", err
		}
		id = "polycrate-operator-" + string(ns.UID)
		if operatorNamespace != "polycrate" {
			id += "-" + operatorNamespace
		}
		return id, nil
	}
}
