package monitoring

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/agent"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/benchtarget"
)

// inUseWindow is how long BenchmarkInUse2000 measures (after one interval of
// warm-up); make bench uses the default.
var (
	inUseWindow  = flag.Duration("inuse.window", 60*time.Second, "measuring window of BenchmarkInUse2000")
	inUseProfile = flag.String("inuse.cpuprofile", "", "write a CPU profile of BenchmarkInUse2000's measuring window to this file")
)

// TestMain doubles as the in-use benchmark's target (another process).
func TestMain(m *testing.M) { benchtarget.Main(m) }

func processCPU() time.Duration {
	user, sys := benchtarget.CPU()
	return user + sys
}

// BenchmarkInUse2000 is the agent's CPU per check in use, as an operator runs:
// 2,000 http endpoints at a 10 s interval (200 checks a second), each checked
// on a fresh connection against a target in another process, through the real
// scheduler, prober, results and CR status bookkeeping (every endpoint has an
// Endpoint CR, looked up as in the informer cache), with a gzip scrape of
// /metrics every 15 s and a health report's results taken and encoded every
// 30 s. It reports the process's CPU per check over the window (after one
// interval of warm-up) and checks per CPU-second.
func BenchmarkInUse2000(b *testing.B) {
	const endpoints, interval = 2000, 10 * time.Second
	host, port := benchtarget.Start(b)
	for range b.N {
		list := make([]polycrate.AgentEndpoint, endpoints)
		objs := make([]client.Object, 0, endpoints)
		keys := map[string]client.ObjectKey{}
		for i := range list {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			list[i] = polycrate.AgentEndpoint{ID: id, Name: fmt.Sprintf("ep-%d", i), Kind: "http", RemoteAddress: host, RemotePort: ptr.To(port),
				Organization: map[string]string{"name": "acme"},
				Spec:         &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/", Timeout: 5, Interval: int(interval.Seconds())}}}
			key := client.ObjectKey{Namespace: "shop", Name: fmt.Sprintf("ep-%d", i)}
			objs = append(objs, &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: v1.EndpointSpec{RemoteAddress: host}, Status: v1.EndpointStatus{APIID: id, Phase: "synced"}})
			keys[id] = key
		}
		var writes atomic.Int64
		c := fake.NewClientBuilder().WithScheme(benchScheme()).WithStatusSubresource(&v1.Endpoint{}).WithObjects(objs...).
			WithIndex(&v1.Endpoint{}, apisync.IndexAPIID, apiIDIndex).WithInterceptorFuncs(cacheLike(keys, &writes)).Build()
		a := New(controller.Deps{Client: c, Recorder: events.NewFakeRecorder(16), Log: logr.Discard()}, "polycrate", agent.NewState())

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = a.Scheduler.Start(ctx) }()
		go func() { defer wg.Done(); a.status.run(ctx) }()
		a.apply(ctx, list, nil)
		time.Sleep(interval + interval/2) // every endpoint checked once, its CR written once

		scrapes, reports := 0, 0
		scrape := promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
		if *inUseProfile != "" {
			f, err := os.Create(*inUseProfile)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
		checks0, cpu0 := counterSum(checksTotal), processCPU()
		user0, sys0 := benchtarget.CPU()
		scrapeTick, reportTick := time.NewTicker(15*time.Second), time.NewTicker(30*time.Second)
		end := time.After(*inUseWindow)
	measure:
		for {
			select {
			case <-scrapeTick.C:
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept-Encoding", "gzip")
				rec := httptest.NewRecorder()
				scrape.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
				}
				scrapes++
			case <-reportTick.C:
				summary, results, done := a.Take()
				if _, err := json.Marshal(struct {
					Summary polycrate.CheckSummary  `json:"check_summary"`
					Results []polycrate.CheckResult `json:"check_results"`
				}{summary, results}); err != nil {
					b.Fatal(err)
				}
				done(nil)
				reports++
			case <-end:
				break measure
			}
		}
		used, checks := processCPU()-cpu0, counterSum(checksTotal)-checks0
		user1, sys1 := benchtarget.CPU()
		if *inUseProfile != "" {
			pprof.StopCPUProfile()
		}
		scrapeTick.Stop()
		reportTick.Stop()
		cancel()
		wg.Wait()
		if failed := failures(); failed > 0 {
			b.Fatalf("%v checks failed: the target or the machine could not keep up", failed)
		}
		b.ReportMetric(float64(used.Microseconds())/checks, "cpu-µs/check")
		b.ReportMetric(checks/used.Seconds(), "checks/cpu-s")
		b.ReportMetric(float64((user1-user0).Microseconds())/checks, "user-µs/check")
		b.ReportMetric(float64((sys1-sys0).Microseconds())/checks, "sys-µs/check")
		b.ReportMetric(checks, "checks")
		b.ReportMetric(float64(scrapes+reports), "scrapes+reports")
	}
}

// failures counts the failed checks so far.
func failures() float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { checksTotal.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "result" && l.GetValue() == "failure" {
				sum += d.GetCounter().GetValue()
			}
		}
	}
	return sum
}
