package monitoring

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
)

// Refresh bounds: a CR whose check state does not change gets its lastCheckAt
// refreshed every 120 check intervals, at least every 10 minutes apart and at
// most an hour. At a 10 s interval that is one write per 120 checks (< 0.01).
const (
	refreshChecks = 120
	minRefresh    = 10 * time.Minute
	maxRefresh    = time.Hour
)

func refreshAfter(interval time.Duration) time.Duration {
	return min(max(refreshChecks*interval, minRefresh), maxRefresh)
}

// statusWriter writes the check state into the Endpoint CRs that carry the
// endpoint's API id: when the state changes (up/down, the error, the status
// code, the certificate) and otherwise every refreshAfter(interval) — never once
// per check. It writes from its own goroutine (a check never waits for the
// Kubernetes API), with optimistic locking (a concurrent status write of the
// sync is never overwritten: the next check compares again and writes then).
type statusWriter struct {
	controller.Deps
	// Reader reads a CR fresh from the kube-apiserver after a conflict (the
	// cache's copy is what the conflict was about); nil: the cache.
	Reader client.Reader
	// queue holds the endpoints to write. A conflict is retried after the
	// operator's backoff (limiter: 5 s, doubling to 60 s), never at once — with
	// watches cut and etcd compacting, an immediate retry against the same stale
	// cached copy sent thousands of rejected writes a minute.
	queue   workqueue.TypedDelayingInterface[string]
	limiter workqueue.TypedRateLimiter[string]

	mu      sync.Mutex
	desired map[string]*desired
	stale   map[string]bool      // a write of the endpoint's CRs conflicted: read them fresh
	retryAt map[string]time.Time // …and not before this (however the endpoint gets queued meanwhile)
}

type desired struct {
	mon     v1.EndpointMonitoringStatus
	refresh time.Duration
	clear   bool // unassigned: remove the check state
}

func newStatusWriter(d controller.Deps) *statusWriter {
	return &statusWriter{Deps: d, Reader: d.APIReader, desired: map[string]*desired{}, stale: map[string]bool{}, retryAt: map[string]time.Time{},
		queue:   workqueue.NewTypedDelayingQueue[string](),
		limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](controller.BaseDelay, controller.MaxDelay)}
}

// record notes one outcome and queues a write when a CR needs one.
func (w *statusWriter) record(t probe.Target, out probe.Outcome) {
	w.mu.Lock()
	prev := w.desired[t.ID]
	d := &desired{refresh: refreshAfter(Interval(t)), mon: monitoringStatus(t, out)}
	if prev != nil && !prev.clear && out.Failure != nil {
		d.mon.ConsecutiveFailures = prev.mon.ConsecutiveFailures + 1
	}
	w.desired[t.ID] = d
	backingOff := w.stale[t.ID] // a conflicted write waits out its backoff; it writes the newest desired state then
	w.mu.Unlock()
	if !backingOff && w.needed(context.Background(), t.ID, d) {
		w.queue.Add(t.ID)
	}
}

// retain clears the check state of CRs whose endpoint is no longer assigned:
// those this process checked, and any other CR that still shows a check state
// (written before a restart, or by a former leader).
func (w *statusWriter) retain(ctx context.Context, assigned map[string]bool) {
	w.mu.Lock()
	var gone []string
	for id, d := range w.desired {
		if !assigned[id] && !d.clear {
			w.desired[id] = &desired{clear: true}
			gone = append(gone, id)
		}
	}
	list := &v1.EndpointList{}
	if err := w.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err == nil {
		for i := range list.Items {
			id := list.Items[i].Status.APIID
			if list.Items[i].Status.Monitoring != nil && id != "" && !assigned[id] && w.desired[id] == nil {
				w.desired[id] = &desired{clear: true}
				gone = append(gone, id)
			}
		}
	}
	w.mu.Unlock()
	for _, id := range gone {
		w.queue.Add(id)
	}
}

func monitoringStatus(t probe.Target, out probe.Outcome) v1.EndpointMonitoringStatus {
	m := v1.EndpointMonitoringStatus{State: "up", DurationMS: out.Duration.Milliseconds()}
	if at := out.Result.CheckedAt; at != nil {
		m.LastCheckAt = &metav1.Time{Time: at.Truncate(time.Second)}
	}
	if c := out.Result.StatusCode; c != nil {
		m.StatusCode = int32(*c) //nolint:gosec // an HTTP status code
	}
	if f := out.Failure; f != nil {
		m.State, m.ErrorName, m.ErrorCategory = "down", f.Name, f.Category
		m.Message = truncate(f.Error(), 512)
		m.ConsecutiveFailures = 1
	}
	if !out.CertNotAfter.IsZero() {
		m.TLSNotAfter = &metav1.Time{Time: out.CertNotAfter.Truncate(time.Second)}
	}
	if t.Kind == "http" || t.Kind == "" {
		m.URL = probe.URL(t)
	}
	return m
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// crs are the Endpoint CRs that carry the API id (from the cache, by its index:
// no scan). Read-only callers take the cache's objects without a copy.
func (w *statusWriter) crs(ctx context.Context, id string, readOnly bool) []v1.Endpoint {
	list := &v1.EndpointList{}
	opts := []client.ListOption{client.MatchingFields{apisync.IndexAPIID: id}}
	if readOnly {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	if err := w.Client.List(ctx, list, opts...); err != nil {
		return nil
	}
	return list.Items
}

// needed says whether any CR of the endpoint differs from d (after every check:
// an index lookup in the cache and a comparison, no copy, no write).
func (w *statusWriter) needed(ctx context.Context, id string, d *desired) bool {
	crs := w.crs(ctx, id, true)
	for i := range crs {
		if _, ok := differs(&crs[i], d); ok {
			return true
		}
	}
	return false
}

// differs says whether ep must be written for d, and why ("change", "refresh").
func differs(ep *v1.Endpoint, d *desired) (string, bool) {
	m := ep.Status.Monitoring
	cond := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionAvailable)
	if d.clear {
		return "change", m != nil || cond != nil
	}
	want := d.mon
	switch {
	case m == nil, m.State != want.State, m.StatusCode != want.StatusCode, m.ErrorName != want.ErrorName,
		m.ErrorCategory != want.ErrorCategory, m.URL != want.URL, !sameTime(m.TLSNotAfter, want.TLSNotAfter),
		cond == nil, cond.Status != availability(want.State), cond.Reason != reasonOf(want):
		return "change", true
	case m.LastCheckAt == nil || want.LastCheckAt != nil && want.LastCheckAt.Sub(m.LastCheckAt.Time) >= d.refresh:
		return "refresh", true
	}
	return "", false
}

func sameTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Unix() == b.Unix()
}

func availability(state string) metav1.ConditionStatus {
	if state == "up" {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// reasonOf is the Available condition's reason: CheckSucceeded, or the failure's
// name in CamelCase (UnexpectedStatusCode, TlsCertificateExpired, …).
func reasonOf(m v1.EndpointMonitoringStatus) string {
	if m.State == "up" {
		return v1.ReasonCheckSucceeded
	}
	var b strings.Builder
	for _, part := range strings.Split(m.ErrorName, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	if b.Len() == 0 {
		return "CheckFailed"
	}
	return b.String()
}

// run writes queued statuses until ctx ends.
func (w *statusWriter) run(ctx context.Context) {
	go func() { <-ctx.Done(); w.queue.ShutDown() }()
	for {
		id, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.write(ctx, id)
		w.queue.Done(id)
	}
}

// writeOne brings one CR to d when it differs, with its event on a change of
// state; it reports a conflict (the CR changed since it was read).
func (w *statusWriter) writeOne(ctx context.Context, ep *v1.Endpoint, d *desired) (conflicted bool) {
	cause, ok := differs(ep, d)
	if !ok {
		return false
	}
	before := ep.DeepCopy()
	prev := ep.Status.Monitoring
	if d.clear {
		ep.Status.Monitoring = nil
		meta.RemoveStatusCondition(&ep.Status.Conditions, v1.ConditionAvailable)
	} else {
		mon := d.mon
		mon.LastTransitionTime = mon.LastCheckAt
		if prev != nil && prev.State == mon.State && prev.LastTransitionTime != nil {
			mon.LastTransitionTime = prev.LastTransitionTime
		}
		ep.Status.Monitoring = &mon
		msg := "the last check succeeded"
		if mon.State == "down" {
			msg = mon.Message
		}
		controller.SetCondition(&ep.Status.Conditions, metav1.Condition{Type: v1.ConditionAvailable, Status: availability(mon.State),
			Reason: reasonOf(mon), Message: msg, ObservedGeneration: ep.Generation})
	}
	err := w.Client.Status().Patch(ctx, ep, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return true
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		w.Log.Info("cannot write the check state of an Endpoint", "namespace", ep.Namespace, "name", ep.Name, "error", err.Error())
		return false
	}
	statusWrites.WithLabelValues(cause).Inc()
	if d.clear || cause != "change" {
		return false
	}
	switch {
	case ep.Status.Monitoring.State == "down" && (prev == nil || prev.State != "down" || prev.ErrorName != ep.Status.Monitoring.ErrorName):
		w.Events("Check").Event(ep, corev1.EventTypeWarning, v1.ReasonEndpointDown, ep.Status.Monitoring.Message)
	case ep.Status.Monitoring.State == "up" && prev != nil && prev.State == "down":
		w.Events("Check").Event(ep, corev1.EventTypeNormal, v1.ReasonEndpointUp, "the check succeeds again")
	}
	return false
}

// write brings every CR of the endpoint to what the checks found.
func (w *statusWriter) write(ctx context.Context, id string) {
	w.mu.Lock()
	if time.Now().Before(w.retryAt[id]) {
		w.mu.Unlock()
		return // queued again before its retry is due (the retry is queued already)
	}
	d := w.desired[id]
	if d != nil && d.clear {
		delete(w.desired, id)
	}
	fresh := w.stale[id]
	delete(w.stale, id)
	delete(w.retryAt, id)
	w.mu.Unlock()
	if d == nil {
		w.limiter.Forget(id)
		return
	}
	conflicted := false
	for _, ep := range w.crs(ctx, id, false) {
		if fresh && w.Reader != nil {
			// After a conflict the cache may still hold the copy that conflicted.
			if err := w.Reader.Get(ctx, client.ObjectKeyFromObject(&ep), &ep); err != nil {
				if !apierrors.IsNotFound(err) {
					w.Log.Info("cannot read an Endpoint to write its check state", "namespace", ep.Namespace, "name", ep.Name, "error", err.Error())
					conflicted = true
				}
				continue
			}
		}
		if w.writeOne(ctx, &ep, d) {
			conflicted = true // changed meanwhile: compare again, later, with a fresh read
		}
	}
	if conflicted {
		wait := w.limiter.When(id)
		w.mu.Lock()
		w.stale[id], w.retryAt[id] = true, time.Now().Add(wait)
		w.mu.Unlock()
		w.queue.AddAfter(id, wait)
		return
	}
	w.limiter.Forget(id)
}
