package monitoring

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/agent"
	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Defaults of the endpoint_monitoring section.
const (
	DefaultAssignmentRefresh = 60 * time.Second
	DefaultMaxConcurrent     = 64
	// nudgeDelay coalesces the fetches an Endpoint sync asks for.
	nudgeDelay = time.Second
	// notRegisteredWait is how soon the agent looks again while the first health
	// report (which registers it) has not been answered.
	notRegisteredWait = 2 * time.Second
)

// assignment is one assigned endpoint as the agent knows it.
type assignment struct {
	target probe.Target
	name   string // the API's name (not unique)
	labels seriesLabels
}

// Agent is the monitoring agent: on the leader, it fetches the endpoints the
// API assigns to this operator (GET /api/v1/agent/endpoints/ with X-Agent-ID)
// every assignment_refresh_seconds and soon after an Endpoint CR was synced,
// plans their checks, and passes every outcome to the health report (Results),
// the metrics and the Endpoint CRs (status, and a CR for each endpoint defined
// in the API).
type Agent struct {
	controller.Deps
	// Namespace holds the CRs of API-defined endpoints (the operator's).
	Namespace string
	// Health is the health report's state: the agent id comes from its answer.
	Health    *agent.State
	Prober    *probe.Prober
	Scheduler *Scheduler
	Results   *Results

	status *statusWriter
	// fetches is the assignment fetch's schedule: a delaying queue of one
	// key. A fetch schedules the next after its interval, a nudge within
	// nudgeDelay; the queue keeps the earliest of the two and runs one fetch at
	// a time (a nudge during a fetch runs one more right after it).
	// Created by Start (a standby's agent holds no goroutine for it).
	fetchMu sync.Mutex
	fetches workqueue.TypedDelayingInterface[fetchKey]
	// quiet: monitoring is off and its one cleanup pass is done (refresh's loop only).
	quiet bool

	mu            sync.Mutex
	assigned      map[string]assignment
	fetchErr      string
	fetchFailures int
	unrunnable    map[string]string // endpoint id → why its check cannot run (configuration)
	origin        map[string]bool   // endpoint id → defined in the API (not by an operator)
}

// New builds the agent with its scheduler and result collector.
func New(d controller.Deps, namespace string, health *agent.State) *Agent {
	a := &Agent{Deps: d, Namespace: namespace, Health: health, Prober: &probe.Prober{},
		assigned: map[string]assignment{}, unrunnable: map[string]string{}}
	a.Scheduler = &Scheduler{Check: a.check, Done: a.done, Late: func(d time.Duration) { lateness.Observe(d.Seconds()) }}
	a.Results = NewResults(a.Scheduler.Len, a.Scheduler.Queued)
	a.status = newStatusWriter(d)
	return a
}

// SetupWithManager adds the agent to the manager and nudges it whenever an
// Endpoint CR's API object was written (a new endpoint, a changed check).
func (a *Agent) SetupWithManager(mgr manager.Manager) error {
	informer, err := mgr.GetCache().GetInformer(context.Background(), &v1.Endpoint{})
	if err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Endpoint)
			n, ok2 := newObj.(*v1.Endpoint)
			if ok1 && ok2 && n.Status.APIID != "" && (n.Status.ConfigHash != o.Status.ConfigHash || n.Status.APIID != o.Status.APIID) {
				a.Nudge()
			}
		},
		// A deleted CR's API object goes with it: stop checking it soon.
		DeleteFunc: func(any) { a.Nudge() },
	}); err != nil {
		return err
	}
	// A changed endpoint_monitoring section applies within a second.
	if err := controller.OnConfigChange(mgr, a.Config, func(context.Context) { a.Nudge() }); err != nil {
		return err
	}
	return mgr.Add(a)
}

// NeedLeaderElection: only the leader checks (one agent per operator).
func (a *Agent) NeedLeaderElection() bool { return true }

// fetchKey is the one item of the fetch schedule.
type fetchKey struct{}

// Nudge asks for a fetch of the assignment within about a second (an Endpoint
// was synced: its new configuration should reach its next check soon).
// Before Start there is nothing to nudge: Start fetches at once.
func (a *Agent) Nudge() {
	a.fetchMu.Lock()
	q := a.fetches
	a.fetchMu.Unlock()
	if q != nil {
		q.AddAfter(fetchKey{}, nudgeDelay)
	}
}

// Start runs the agent until ctx ends.
func (a *Agent) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		// No longer the agent (stopped, or no longer the leader): no series of its endpoints.
		a.mu.Lock()
		for id := range a.assigned {
			forget(id)
		}
		a.mu.Unlock()
	}()
	fetches := workqueue.NewTypedDelayingQueue[fetchKey]()
	a.fetchMu.Lock()
	a.fetches = fetches
	a.fetchMu.Unlock()
	wg.Add(3)
	go func() { defer wg.Done(); _ = a.Scheduler.Start(ctx) }()
	go func() { defer wg.Done(); a.status.run(ctx) }()
	go func() { defer wg.Done(); <-ctx.Done(); fetches.ShutDown() }()
	fetches.Add(fetchKey{}) // the first fetch at once
	for {
		key, shutdown := fetches.Get()
		if shutdown {
			return nil
		}
		wait := a.refresh(ctx)
		fetches.Done(key)
		fetches.AddAfter(key, wait) // after a shutdown: ignored
	}
}

// config reads the endpoint_monitoring section with its defaults.
func config(snap *liveconfig.Snapshot) (enabled bool, refresh time.Duration, concurrent int, icmp probe.ICMPMode) {
	refresh, concurrent = DefaultAssignmentRefresh, DefaultMaxConcurrent
	if snap == nil {
		return false, refresh, concurrent, probe.ICMPAuto
	}
	m := snap.Spec.EndpointMonitoring
	if m.AssignmentRefreshSeconds > 0 {
		refresh = time.Duration(m.AssignmentRefreshSeconds) * time.Second
	}
	if m.MaxConcurrentChecks > 0 {
		concurrent = int(m.MaxConcurrentChecks)
	}
	if m.ICMPMode != "auto" {
		icmp = probe.ICMPMode(m.ICMPMode)
	}
	return liveconfig.Enabled(m.Enabled) && liveconfig.Enabled(snap.Spec.APISync.Enabled), refresh, concurrent, icmp
}

// refresh fetches the assignment and applies it; it returns the wait before the
// next fetch. A failed fetch keeps the current plan (checks go on while the API
// is away; their results wait for the next report).
func (a *Agent) refresh(ctx context.Context) time.Duration {
	snap := a.Config.Get()
	if snap == nil {
		return notRegisteredWait // the OperatorConfig is not read yet: change nothing
	}
	enabled, interval, concurrent, icmp := config(snap)
	a.Scheduler.setConcurrency(concurrent)
	a.Prober.ICMP = icmp
	if !enabled {
		// Switched off: one pass lets go of every check and clears the CRs'
		// monitoring status; while it stays off there is nothing to do (each pass
		// lists every Endpoint: at 40,000 of them, 5 % of the operator's CPU
		// during a convergence, for nothing).
		if !a.quiet {
			a.apply(ctx, nil, snap)
			a.quiet = true
		}
		return interval
	}
	a.quiet = false
	c := a.Conn.Client()
	last := a.Health.Last()
	if c == nil || last == nil || last.Response == nil || last.Response.AgentID == "" {
		return notRegisteredWait // not connected, or the first health report has not registered the agent yet
	}
	list, err := c.AssignedEndpoints(ctx, last.Response.AgentID)
	if err != nil {
		assignmentFetches.WithLabelValues("failure").Inc()
		a.mu.Lock()
		a.fetchFailures++
		first := a.fetchErr == ""
		a.fetchErr = err.Error()
		a.mu.Unlock()
		if first {
			a.Log.Info("cannot fetch the assigned endpoints; checking the known ones meanwhile", "error", err.Error())
		}
		return interval
	}
	assignmentFetches.WithLabelValues("success").Inc()
	a.mu.Lock()
	if a.fetchErr != "" {
		a.Log.Info("assigned endpoints fetched again", "endpoints", len(list))
	}
	a.fetchErr, a.fetchFailures = "", 0
	a.mu.Unlock()
	a.apply(ctx, list, snap)
	return interval
}

// apply makes list the plan: targets, metrics, results, CRs.
func (a *Agent) apply(ctx context.Context, list []polycrate.AgentEndpoint, snap *liveconfig.Snapshot) {
	var crs map[string]crRef
	if len(list) > 0 {
		crs = a.endpointCRs(ctx)
	}
	next := make(map[string]assignment, len(list))
	targets := make([]probe.Target, 0, len(list))
	ids := make(map[string]bool, len(list))
	labels := seriesLabelsOf(list, crs)
	for _, e := range list {
		t := probe.Target{ID: e.ID, Name: e.Name, Kind: e.Kind, Address: e.RemoteAddress, Port: ptr.Deref(e.RemotePort, 0),
			ExpectedBody: crs[e.ID].expectedBody}
		if e.Spec != nil {
			t.Spec = *e.Spec
		}
		next[e.ID] = assignment{target: t, name: e.Name, labels: labels[e.ID]}
		targets = append(targets, t)
		ids[e.ID] = true
	}
	a.mu.Lock()
	relabel(labels) // under a.mu, as observe: a check finishing now uses the new labels
	for id := range a.assigned {
		if _, ok := next[id]; !ok {
			forget(id) // under a.mu: a check finishing now cannot bring the series back
		}
	}
	a.assigned = next
	for id := range a.unrunnable {
		if !ids[id] {
			delete(a.unrunnable, id)
		}
	}
	for id := range a.origin {
		if !ids[id] {
			delete(a.origin, id)
		}
	}
	a.mu.Unlock()
	a.Results.Retain(ids)
	a.Scheduler.Set(targets)
	assignedEndpoints.Set(float64(len(list)))
	a.status.retain(ctx, ids)
	if snap != nil {
		mirrored, err := a.mirror(ctx, list)
		if err != nil {
			a.Log.Info("cannot mirror the API-defined endpoints as Endpoint CRs; next fetch retries", "error", err.Error())
		}
		a.labelMirrors(list, crs, mirrored)
	}
}

// labelMirrors names the series of endpoints whose mirror CR was just made
// after their CR (their labels were set before it existed).
func (a *Agent) labelMirrors(list []polycrate.AgentEndpoint, crs map[string]crRef, mirrored map[string]bool) {
	changed := false
	for _, e := range list {
		if _, ok := crs[e.ID]; !ok && mirrored[e.ID] {
			if crs == nil {
				crs = map[string]crRef{}
			}
			crs[e.ID] = crRef{namespace: a.Namespace, name: mirrorName(e)}
			changed = true
		}
	}
	if !changed {
		return
	}
	labels := seriesLabelsOf(list, crs)
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, as := range a.assigned {
		if l, ok := labels[id]; ok {
			as.labels = l
			a.assigned[id] = as
		}
	}
	relabel(labels)
}

// crRef is the Endpoint CR that carries an API endpoint.
type crRef struct {
	namespace, name string
	// expectedBody: the API's spec has no field for it; the CR carries the
	// seed's example 4 (endpoints.polycrate.io/expected-body).
	expectedBody string
}

// endpointCRs are the Endpoint CRs by API id. Should two CRs carry one id (a
// copy made by hand), the first in namespace/name order counts.
func (a *Agent) endpointCRs(ctx context.Context) map[string]crRef {
	list := &v1.EndpointList{}
	if err := a.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	out := make(map[string]crRef, len(list.Items))
	for i := range list.Items {
		ep := &list.Items[i]
		if ep.Status.APIID == "" {
			continue
		}
		if have, ok := out[ep.Status.APIID]; ok && have.namespace+"/"+have.name < ep.Namespace+"/"+ep.Name {
			continue
		}
		out[ep.Status.APIID] = crRef{namespace: ep.Namespace, name: ep.Name, expectedBody: ep.Spec.ExpectedBody}
	}
	return out
}

// seriesLabelsOf names every assigned endpoint's series: its CR's namespace and
// name, or, without a CR here, an empty namespace and the mirror's name. A label
// set that two endpoints would share (two ids with one name and one id prefix,
// no CR) gets each endpoint's whole id appended, so no two series collide.
func seriesLabelsOf(list []polycrate.AgentEndpoint, crs map[string]crRef) map[string]seriesLabels {
	out := make(map[string]seriesLabels, len(list))
	count := make(map[seriesLabels]int, len(list))
	for _, e := range list {
		l := seriesLabels{endpoint: mirrorName(e), organization: e.Organization["name"]}
		if ref, ok := crs[e.ID]; ok {
			l.namespace, l.endpoint = ref.namespace, ref.name
		}
		out[e.ID] = l
		count[seriesLabels{namespace: l.namespace, endpoint: l.endpoint}]++
	}
	for _, e := range list {
		l := out[e.ID]
		if count[seriesLabels{namespace: l.namespace, endpoint: l.endpoint}] > 1 {
			l.endpoint += "-" + e.ID
			out[e.ID] = l
		}
	}
	return out
}

// check runs one check with the prober.
func (a *Agent) check(ctx context.Context, t probe.Target) probe.Outcome { return a.Prober.Run(ctx, t) }

// done takes one outcome to the report, the metrics and the CR.
func (a *Agent) done(t probe.Target, out probe.Outcome) {
	a.mu.Lock()
	as, ok := a.assigned[t.ID]
	if ok {
		if f := out.Failure; f != nil && f.Category == probe.CategoryConfiguration {
			a.unrunnable[t.ID] = fmt.Sprintf("%s (%s): %s", as.name, t.Kind, f.Error())
		} else {
			delete(a.unrunnable, t.ID)
		}
		observe(as, out)
	}
	a.mu.Unlock()
	if !ok {
		return // unassigned meanwhile
	}
	a.Results.Add(out.Result)
	a.status.record(t, out)
}

// Take hands the collected results to a health report (agent.CheckSource). A
// refusal of the results (an endpoint deleted since its check) also fetches the
// assignment again, so that the deleted endpoint leaves the plan.
func (a *Agent) Take() (polycrate.CheckSummary, []polycrate.CheckResult, func(error) int) {
	summary, results, done := a.Results.Take()
	return summary, results, func(err error) int {
		dropped := done(err)
		if dropped > 0 {
			a.Nudge()
		}
		return dropped
	}
}

// Problems are what the health report says about monitoring: warnings make it
// degraded (some checks cannot run, the assignment cannot be fetched), critical
// errors unhealthy (no assigned check can run at all).
func (a *Agent) Problems() (warnings, critical []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fetchErr != "" {
		warnings = append(warnings, fmt.Sprintf("cannot fetch the assigned endpoints (%d attempts): %s", a.fetchFailures, a.fetchErr))
	}
	if n := len(a.unrunnable); n > 0 {
		var why []string
		for _, w := range a.unrunnable {
			why = append(why, w)
		}
		sort.Strings(why)
		if len(why) > 3 {
			why = append(why[:3], fmt.Sprintf("and %d more", n-3))
		}
		msg := fmt.Sprintf("%d assigned endpoint(s) cannot be checked: %s", n, strings.Join(why, "; "))
		if n == len(a.assigned) {
			critical = append(critical, msg)
		} else {
			warnings = append(warnings, msg)
		}
	}
	return warnings, critical
}
