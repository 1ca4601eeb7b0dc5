package monitoring

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/agent"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// The scale phase of make bench (docs/monitoring.md, "Performance"): 5,000
// assigned endpoints at a 10 s interval, checked for real (http, a fresh
// connection each) against a loopback server, for three rounds after the first.
const (
	scaleEndpoints = 5000
	scaleInterval  = 10 * time.Second
	scaleRounds    = 3
)

func scaleAssignment(port int) []polycrate.AgentEndpoint {
	list := make([]polycrate.AgentEndpoint, scaleEndpoints)
	for i := range list {
		list[i] = polycrate.AgentEndpoint{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Name: fmt.Sprintf("ep-%d", i), Kind: "http",
			RemoteAddress: "127.0.0.1", RemotePort: ptr.To(port), Organization: map[string]string{"name": "acme"},
			Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/", Timeout: 5, Interval: int(scaleInterval.Seconds())}}}
	}
	return list
}

func scaleTarget(b *testing.B) int {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	b.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// runScale runs the agent on the assignment for the first round and scaleRounds
// more; it returns the lateness of every check and the checks run.
func runScale(b *testing.B, a *Agent, list []polycrate.AgentEndpoint, onRound func(round int)) []time.Duration {
	b.Helper()
	var mu sync.Mutex
	var late []time.Duration
	a.Scheduler.Late = func(d time.Duration) { mu.Lock(); late = append(late, d); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = a.Scheduler.Start(ctx) }()
	go func() { defer wg.Done(); a.status.run(ctx) }()
	a.apply(ctx, list, nil)
	for round := 0; round <= scaleRounds; round++ {
		time.Sleep(scaleInterval)
		if onRound != nil {
			onRound(round)
		}
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return late
}

func reportLateness(b *testing.B, late []time.Duration) {
	slices.Sort(late)
	q := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	b.ReportMetric(float64(q(0.50).Microseconds())/1000, "late-p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "late-p99-ms")
	b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "late-max-ms")
	b.ReportMetric(float64(len(late)), "checks")
}

// BenchmarkScale5000 is lateness and memory: the agent's own state per endpoint
// (plan, assignment, pending result, metric series, status bookkeeping), no CRs.
func BenchmarkScale5000(b *testing.B) {
	port := scaleTarget(b)
	for range b.N {
		c := fake.NewClientBuilder().WithScheme(benchScheme()).WithIndex(&v1.Endpoint{}, apisync.IndexAPIID, apiIDIndex).Build()
		a := New(controller.Deps{Client: c, Recorder: events.NewFakeRecorder(16), Log: logr.Discard()}, "polycrate", agent.NewState())
		list := scaleAssignment(port)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		late := runScale(b, a, list, nil)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(list)
		runtime.KeepAlive(a)
		reportLateness(b, late)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/scaleEndpoints, "heap-B/endpoint")
	}
}

// BenchmarkScaleWrites5000 is Kubernetes writes per check in steady state: every
// endpoint has an Endpoint CR; the first round writes each one's state, the
// next rounds change nothing.
func BenchmarkScaleWrites5000(b *testing.B) {
	port := scaleTarget(b)
	for range b.N {
		list := scaleAssignment(port)
		objs := make([]client.Object, 0, len(list))
		keys := map[string]client.ObjectKey{}
		for i, e := range list {
			objs = append(objs, &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("ep-%d", i)},
				Spec:   v1.EndpointSpec{RemoteAddress: "127.0.0.1"},
				Status: v1.EndpointStatus{APIID: e.ID, Phase: "synced"}})
			keys[e.ID] = client.ObjectKey{Namespace: "shop", Name: fmt.Sprintf("ep-%d", i)}
		}
		var writes atomic.Int64
		c := fake.NewClientBuilder().WithScheme(benchScheme()).WithStatusSubresource(&v1.Endpoint{}).WithObjects(objs...).
			WithIndex(&v1.Endpoint{}, apisync.IndexAPIID, apiIDIndex).
			WithInterceptorFuncs(cacheLike(keys, &writes)).Build()
		a := New(controller.Deps{Client: c, Recorder: events.NewFakeRecorder(16), Log: logr.Discard()}, "polycrate", agent.NewState())
		var steadyWrites, steadyChecks int64
		checksAt := func() int64 { return int64(counterSum(checksTotal)) }
		var startWrites, startChecks int64
		late := runScale(b, a, list, func(round int) {
			if round == 0 {
				startWrites, startChecks = writes.Load(), checksAt()
			}
			if round == scaleRounds {
				steadyWrites, steadyChecks = writes.Load()-startWrites, checksAt()-startChecks
			}
		})
		reportLateness(b, late)
		b.ReportMetric(float64(startWrites), "first-round-writes")
		b.ReportMetric(float64(steadyWrites)/float64(max(steadyChecks, 1)), "writes/check")
	}
}

func apiIDIndex(o client.Object) []string {
	if ep, ok := o.(*v1.Endpoint); ok && ep.Status.APIID != "" {
		return []string{ep.Status.APIID}
	}
	return nil
}

// counterSum adds up every series of a counter.
func counterSum(v *prometheus.CounterVec) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { v.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			sum += d.GetCounter().GetValue()
		}
	}
	return sum
}

// cacheLike makes the fake client behave as the informer cache does for the
// agent's one lookup (Endpoints by API id: an index, not a scan of every object,
// which the fake client would do; with UnsafeDisableDeepCopy the stored object
// itself, not the fake client's serialised copy), and counts status writes.
func cacheLike(keys map[string]client.ObjectKey, writes *atomic.Int64) interceptor.Funcs {
	var mu sync.Mutex
	store := map[string]*v1.Endpoint{} // by API id, as the informer holds them
	stored := func(ctx context.Context, c client.Client, id string, refresh bool) (*v1.Endpoint, error) {
		mu.Lock()
		defer mu.Unlock()
		if ep, ok := store[id]; ok && !refresh {
			return ep, nil
		}
		key, ok := keys[id]
		if !ok {
			return nil, nil
		}
		ep := &v1.Endpoint{}
		if err := c.Get(ctx, key, ep); err != nil {
			return nil, err
		}
		store[id] = ep
		return ep, nil
	}
	return interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := &client.ListOptions{}
			o.ApplyOptions(opts)
			eps, ok := list.(*v1.EndpointList)
			if !ok || o.FieldSelector == nil {
				return c.List(ctx, list, opts...)
			}
			id, found := o.FieldSelector.RequiresExactMatch(apisync.IndexAPIID)
			if !found {
				return c.List(ctx, list, opts...)
			}
			eps.Items = nil
			ep, err := stored(ctx, c, id, false)
			if err != nil || ep == nil {
				return err
			}
			if o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
				eps.Items = append(eps.Items, *ep)
			} else {
				eps.Items = append(eps.Items, *ep.DeepCopy())
			}
			return nil
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch,
			opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if ep, ok := obj.(*v1.Endpoint); ok {
				_, err := stored(ctx, c, ep.Status.APIID, true) // the informer sees the write
				return err
			}
			return nil
		},
	}
}

func benchScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
