// Package specs holds the Gomega helpers the integration suites share (kept out
// of testutil, which the demo links).
package specs

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // test helpers
	. "github.com/onsi/gomega"    //nolint:revive // test helpers
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// Timeout and Poll are the suites' Eventually settings.
const (
	Timeout = 30 * time.Second
	Poll    = 100 * time.Millisecond
)

var seq atomic.Int64

// Namespace creates a namespace "<prefix>-<n>" and returns its name.
func Namespace(c client.Client, prefix string) string {
	GinkgoHelper()
	name := fmt.Sprintf("%s-%d", prefix, seq.Add(1))
	Expect(c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// UpdateOperatorConfig edits the singleton's spec, retrying on conflicts, and
// waits until the operator has published the new generation (status
// observedGeneration): from then on every reconcile acts on the change, so a test
// that creates objects next cannot race the configuration (docs/configuration.md).
func UpdateOperatorConfig(c client.Client, change func(*v1.OperatorConfig)) {
	GinkgoHelper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: testutil.OperatorNamespace, Name: v1.DefaultOperatorConfigName}
	var generation int64
	Eventually(func() error {
		oc := &v1.OperatorConfig{}
		if err := c.Get(ctx, key, oc); err != nil {
			return err
		}
		change(oc)
		if err := c.Update(ctx, oc); err != nil {
			return err
		}
		generation = oc.Generation
		return nil
	}, Timeout, Poll).Should(Succeed())
	Eventually(func() (int64, error) {
		oc := &v1.OperatorConfig{}
		err := c.Get(ctx, key, oc)
		return oc.Status.ObservedGeneration, err
	}, Timeout, Poll).Should(BeNumerically(">=", generation), "the operator did not publish OperatorConfig generation %d", generation)
}

// Quiet waits until count (e.g. the emulator's write counter) stays the same
// across one interval: the system has settled.
func Quiet(count func() int, interval time.Duration) {
	GinkgoHelper()
	prev := -1
	Eventually(func() bool {
		n := count()
		settled := n == prev
		prev = n
		return settled
	}, Timeout, interval).Should(BeTrue())
}

// ExpectEvent waits for an event of the type and reason about the named object.
func ExpectEvent(c client.Client, namespace, name, typ, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(c.List(context.Background(), list, client.InNamespace(namespace))).To(Succeed())
		found := false
		for _, e := range list.Items {
			found = found || (e.Reason == reason && e.Type == typ && e.Regarding.Name == name)
		}
		g.Expect(found).To(BeTrue(), "no %s event %s about %s/%s", typ, reason, namespace, name)
	}, Timeout, Poll).Should(Succeed())
}

// OperatorSuite is a package's whole suite set-up: one operator (envtest, the
// API emulator, every controller; testutil.StartOperatorEnv) started before the
// package's specs and stopped after them. ready receives it (the suite keeps
// its parts in package variables). Use as `var _ = specs.OperatorSuite(...)`.
func OperatorSuite(o testutil.OperatorEnvOptions, ready func(*testutil.OperatorEnv)) bool {
	var oe *testutil.OperatorEnv
	BeforeSuite(func() {
		if o.Log.GetSink() == nil {
			o.Log = GinkgoLogr
		}
		var err error
		oe, err = testutil.StartOperatorEnv(o)
		Expect(err).NotTo(HaveOccurred())
		ready(oe)
	})
	AfterSuite(func() {
		if oe != nil {
			Expect(oe.Stop()).To(Succeed())
		}
	})
	return true
}

// Scrape answers as the operator's /metrics does (controller-runtime's metrics
// server: the registry, and an error in any collector fails the whole scrape
// with a 500): the status code and the body.
func Scrape() (int, string) {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Code, rec.Body.String()
}

// MetricValue sums the samples of a metric in the operator's registry whose
// labels include want.
func MetricValue(name string, want map[string]string) float64 {
	GinkgoHelper()
	sum := 0.0
	for _, m := range series(name, want) {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

// HasSeries says whether the operator's registry holds a series of the metric
// whose labels include want.
func HasSeries(name string, want map[string]string) bool {
	GinkgoHelper()
	return len(series(name, want)) > 0
}

// series are the samples of a metric whose labels include want.
func series(name string, want map[string]string) []*dto.Metric {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue samples
				}
			}
			out = append(out, m)
		}
	}
	return out
}
