package k8sapps

import (
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// The restart window of an app (the API's pods_restart_count_last_hour): the
// restarts observed in 5-minute buckets, kept for an hour in the K8sApp's
// status so that the count survives a restart of the operator. Small counters,
// no history of Pods: 13 buckets per app at most, and in memory each counted
// Pod's restart count at the last look (a name and a number).
const (
	RestartBucket  = 5 * time.Minute
	RestartHorizon = time.Hour
)

// The window's sizes in use (tests shrink them: SetRestartWindow).
var windowBucket, windowHorizon atomic.Int64

func init() { SetRestartWindow(RestartBucket, RestartHorizon) }

// SetRestartWindow sets the bucket and the horizon of the restart window (for
// tests, which cannot wait an hour for a restart to age out).
func SetRestartWindow(bucket, horizon time.Duration) {
	windowBucket.Store(int64(bucket))
	windowHorizon.Store(int64(horizon))
}

// restartsSince is how many restarts the app's Pods added since the last look.
// last holds the restart count of each Pod at the last look (nil: no look in
// this process yet). A Pod seen for the first time is the baseline: its
// restarts so far are history (a Pod is seen when it is created, before it
// could restart, or it joined the app with its past); a Pod with fewer
// restarts than before was recreated under its name (a StatefulSet's) and
// brings all of them. Without a last look the app-level counter of the status
// is the baseline: what the Pods added while no operator watched; for an app
// never written (just discovered) the restarts so far are history too.
func restartsSince(pods []*Pod, last map[string]int32, st *v1.K8sAppStatus) int32 {
	if last == nil {
		if st.PodsStatusHash == "" {
			return 0
		}
		var sum int32
		for _, p := range pods {
			sum += p.Restarts
		}
		return max(0, sum-st.PodsRestarts)
	}
	var added int32
	for _, p := range pods {
		before, seen := last[p.Name]
		switch {
		case !seen:
		case p.Restarts > before:
			added += p.Restarts - before
		case p.Restarts < before:
			added += p.Restarts
		}
	}
	return added
}

// restartCounts is each Pod's restart count (the next look's last).
func restartCounts(pods []*Pod) map[string]int32 {
	out := make(map[string]int32, len(pods))
	for _, p := range pods {
		out[p.Name] = p.Restarts
	}
	return out
}

// advanceWindow drops the buckets that began an hour or more before now, adds
// the new restarts to now's bucket, and returns the window with its sum.
func advanceWindow(window []v1.K8sAppRestartBucket, now time.Time, added int32) ([]v1.K8sAppRestartBucket, int32) {
	var out []v1.K8sAppRestartBucket
	var sum int32
	for _, b := range window {
		if now.Sub(b.Start.Time) < time.Duration(windowHorizon.Load()) {
			out = append(out, b)
			sum += b.Restarts
		}
	}
	if added > 0 {
		start := metav1.NewTime(now.UTC().Truncate(time.Duration(windowBucket.Load())))
		if n := len(out); n > 0 && out[n-1].Start.Equal(&start) {
			out[n-1].Restarts += added
		} else {
			out = append(out, v1.K8sAppRestartBucket{Start: start, Restarts: added})
		}
		sum += added
	}
	return out, sum
}

// windowExpiry is how long until the window's oldest bucket leaves it (0: an
// empty window never changes by itself).
func windowExpiry(window []v1.K8sAppRestartBucket, now time.Time) time.Duration {
	if len(window) == 0 {
		return 0
	}
	return max(time.Second, window[0].Start.Add(time.Duration(windowHorizon.Load())).Sub(now)+time.Second)
}
