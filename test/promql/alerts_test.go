package promql_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/prometheus/model/labels"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

// Each alert of the chart on the history of the failure it names, recorded
// from the running operator in that failure (history_test.go), run through
// Prometheus's rules manager: inactive while the operator is healthy, pending
// once the failure shows, firing after its `for:` with the labels a route
// needs, resolved (and Alertmanager told so) after the recovery.
var _ = Describe("each alert through Prometheus's rules manager, on the recorded history of its failure", Ordered, func() {
	const (
		healthyFor   = 4 * time.Second
		healthyLasts = 10 * time.Minute
	)
	var ns string

	BeforeAll(func() {
		ns = specs.Namespace(oe.K8s, "alerts")
		// No object of another spec in Error: SyncErrors starts inactive here.
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_objects", map[string]string{"phase": "Error"})
		}, specs.Timeout, specs.Poll).Should(BeZero())
	})

	// expect checks one alert instance's course: inactive in the healthy
	// phase, pending in the failing one, firing `hold` after it went pending
	// and before the failure ended, resolved within `resolveIn` of the recovery.
	expect := func(ev *evaluation, spans []span, alert string, match map[string]string, hold, pendingIn, resolveIn time.Duration,
		want map[string]string) track {
		GinkgoHelper()
		tr := ev.track(alert, match)
		healthy, failing, recovered := spans[0], spans[1], spans[len(spans)-1]
		course := strings.Join(tr.states, " → ")
		Expect(tr.pending).NotTo(BeZero(), "%s never pending: %s", alert, course)
		Expect(tr.pending).To(BeTemporally(">", healthy.end), "%s pending while healthy: %s", alert, course)
		Expect(tr.pending).To(BeTemporally("<=", failing.start.Add(pendingIn)), "%s pending late: %s", alert, course)
		Expect(tr.firing).NotTo(BeZero(), "%s never fired: %s", alert, course)
		Expect(tr.firing.Sub(tr.pending)).To(BeNumerically(">=", hold), "%s fired before its for: %s", alert, course)
		Expect(tr.firing.Sub(tr.pending)).To(BeNumerically("<=", hold+evalInterval), "%s fired late: %s", alert, course)
		Expect(tr.firing).To(BeTemporally("<=", failing.end), "%s did not fire during the failure: %s", alert, course)
		Expect(tr.resolved).NotTo(BeZero(), "%s never resolved: %s", alert, course)
		Expect(tr.resolved).To(BeTemporally(">=", recovered.start), "%s resolved during the failure: %s", alert, course)
		Expect(tr.resolved).To(BeTemporally("<=", recovered.start.Add(resolveIn)), "%s resolved late: %s", alert, course)
		Expect(ev.sentResolved(alert, match)).To(BeTrue(), "%s: Alertmanager was not told it resolved", alert)
		for k, v := range want {
			Expect(tr.firingLabels.Get(k)).To(Equal(v), "%s: label %s of %s", alert, k, tr.firingLabels)
		}
		tr.annots.Range(func(l labels.Label) {
			Expect(l.Value).NotTo(ContainSubstring("error expanding template"), "%s: annotation %s", alert, l.Name)
			Expect(l.Value).NotTo(ContainSubstring("<no value>"), "%s: annotation %s", alert, l.Name)
		})
		GinkgoWriter.Printf("%s: %s\n", alert, course)
		return tr
	}
	// quiet checks that an alert never fired on the history.
	quiet := func(ev *evaluation, alert string) {
		GinkgoHelper()
		tr := ev.track(alert, nil)
		Expect(tr.firing).To(BeZero(), "%s fired: %s", alert, strings.Join(tr.states, " → "))
	}
	run := func(phases ...phase) (*evaluation, []span) {
		GinkgoHelper()
		st, spans := history(phases...)
		return evaluate(st, spans[0].start, spans[len(spans)-1].end), spans
	}
	healthReports := func() float64 {
		return specs.MetricValue("polycrate_operator_health_reports_total", map[string]string{"result": "success"})
	}
	sel := map[string]string{"namespace": "polycrate"}

	It("PolycrateOperatorSyncErrors: the API refuses an Endpoint until its owner corrects it", func() {
		healthy := record("healthy", healthyFor, healthyLasts)
		Expect(oe.API.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Method: "POST", Status: 400})).To(Succeed())
		DeferCleanup(func() { Expect(oe.API.SetFaults()).To(Succeed()) })
		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"},
			Spec: v1.EndpointSpec{DisplayName: "refused", RemoteAddress: "refused.example.com", RemotePort: 443, Kind: "http", TLS: ptr.To(true),
				Path: "/", Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}}}
		Expect(oe.K8s.Create(ctx, ep)).To(Succeed())
		phase := func() (string, error) {
			err := oe.K8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)
			return ep.Status.Phase, err
		}
		Eventually(phase, specs.Timeout, specs.Poll).Should(Equal("error"))
		refused := record("refused", healthyFor, 40*time.Minute)
		// The owner corrects it (the API accepts it now).
		Expect(oe.API.SetFaults()).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator writes the status meanwhile
			if err := oe.K8s.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
				return err
			}
			ep.Spec.DisplayName = "corrected"
			return oe.K8s.Update(ctx, ep)
		})).To(Succeed())
		Eventually(phase, specs.Timeout, specs.Poll).Should(Equal("synced"))
		corrected := record("corrected", healthyFor, 10*time.Minute)

		ev, spans := run(healthy, refused, corrected)
		expect(ev, spans, "PolycrateOperatorSyncErrors", nil, 30*time.Minute, time.Minute, time.Minute,
			map[string]string{"kind": "Endpoint", "namespace": "polycrate", "severity": "warning"})
		for _, a := range []string{"PolycrateOperatorDown", "PolycrateOperatorAPIUnreachable", "PolycrateOperatorHealthReportsFailing", "PolycrateOperatorQueueStuck"} {
			quiet(ev, a)
		}
	})

	It("PolycrateCertificateExpiring: a certificate 5 days from its end, until it is renewed", func() {
		healthy := record("healthy", healthyFor, healthyLasts)
		expiry := func(at time.Time) {
			GinkgoHelper()
			c := &v1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-tls"}}
			_, err := controllerutil.CreateOrUpdate(ctx, oe.K8s, c, func() error {
				na := metav1.NewTime(at.UTC().Truncate(time.Second))
				c.Spec = v1.CertificateSpec{Name: "api-tls", Namespace: ns, SecretName: "api-tls", NotAfter: &na}
				return nil
			})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() float64 {
				return specs.MetricValue("polycrate_operator_certificate_expiration_timestamp_seconds",
					map[string]string{"certificate_namespace": ns, "certificate": "api-tls"})
			}, specs.Timeout, specs.Poll).Should(Equal(float64(at.UTC().Truncate(time.Second).Unix())))
		}
		expiry(time.Now().Add(5 * 24 * time.Hour))
		expiring := record("expires in 5 days", healthyFor, 75*time.Minute)
		expiry(time.Now().Add(90 * 24 * time.Hour))
		renewed := record("renewed", healthyFor, 10*time.Minute)

		ev, spans := run(healthy, expiring, renewed)
		match := map[string]string{"certificate": "api-tls"}
		tr := expect(ev, spans, "PolycrateCertificateExpiring", match, time.Hour, time.Minute, time.Minute,
			map[string]string{"certificate_namespace": ns, "namespace": "polycrate", "severity": "warning"})
		Expect(tr.annots.Get("description")).To(ContainSubstring("Certificate " + ns + "/api-tls expires in 4d 2"))
	})

	It("PolycrateOperatorHealthReportsFailing (and not APIUnreachable): the API rejects the operator's token", func() {
		healthy := record("healthy", healthyFor, healthyLasts)
		Expect(oe.API.SetFaults(emulator.FaultRule{Path: "*", Status: 401})).To(Succeed())
		DeferCleanup(func() { Expect(oe.API.SetFaults()).To(Succeed()) })
		rejected := record("token rejected", 10*time.Second, 20*time.Minute)
		reports := healthReports()
		Expect(oe.API.SetFaults()).To(Succeed())
		Eventually(healthReports, time.Minute, specs.Poll).Should(BeNumerically(">", reports))
		accepted := record("token accepted", healthyFor, 10*time.Minute)

		ev, spans := run(healthy, rejected, accepted)
		// No success for healthReportMaxAgeMinutes (10) after the last one.
		expect(ev, spans, "PolycrateOperatorHealthReportsFailing", sel, 5*time.Minute, 11*time.Minute, time.Minute,
			map[string]string{"severity": "warning"})
		quiet(ev, "PolycrateOperatorAPIUnreachable")
		quiet(ev, "PolycrateOperatorDown")
	})

	It("PolycrateOperatorAPIUnreachable: the API does not answer", func() {
		healthy := record("healthy", healthyFor, healthyLasts)
		Expect(oe.API.SetFaults(emulator.FaultRule{Path: "*", Drop: true})).To(Succeed())
		DeferCleanup(func() { Expect(oe.API.SetFaults()).To(Succeed()) })
		down := record("API down", 30*time.Second, 20*time.Minute)
		reports := healthReports()
		Expect(oe.API.SetFaults()).To(Succeed())
		Eventually(healthReports, time.Minute, specs.Poll).Should(BeNumerically(">", reports))
		back := record("API back", healthyFor, 15*time.Minute)

		ev, spans := run(healthy, down, back)
		// The error share over 5 minutes crosses the threshold within them.
		expect(ev, spans, "PolycrateOperatorAPIUnreachable", sel, 10*time.Minute, 5*time.Minute, 5*time.Minute,
			map[string]string{"severity": "critical"})
		quiet(ev, "PolycrateOperatorDown")
	})

	It("PolycrateOperatorAPIUnreachable: the API answers 503 with a Retry-After of 10 minutes", func() {
		failedInARow := func() float64 { return specs.MetricValue("polycrate_api_requests_failed_in_a_row", nil) }
		failed := func() float64 {
			return specs.MetricValue("polycrate_api_requests_total", map[string]string{"code": "503"})
		}
		healthy := record("healthy", healthyFor, healthyLasts)
		Expect(oe.API.SetFaults(emulator.FaultRule{Path: "*", Status: 503, RetryAfter: 600})).To(Succeed())
		DeferCleanup(func() { Expect(oe.API.SetFaults()).To(Succeed()) })
		// Every caller got its 503 and now waits out the Retry-After: no request
		// reaches the API, so no 5-minute window of the history holds one.
		Eventually(failedInARow, specs.Timeout, specs.Poll).Should(BeNumerically(">=", 1))
		last, since := -1.0, time.Now()
		Eventually(func() time.Duration {
			if v := failed(); v != last {
				last, since = v, time.Now()
			}
			return time.Since(since)
		}, time.Minute, specs.Poll).Should(BeNumerically(">=", 3*time.Second), "the 503s go on")
		atStart := failed()
		throttled := record("API throttled", 5*time.Second, 20*time.Minute)
		Expect(failed()).To(Equal(atStart), "a request reached the API while recording: the error share would show the failure")
		// The API answers again; the next request (a new Endpoint's sync) is served.
		Expect(oe.API.SetFaults()).To(Succeed())
		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after-throttling"},
			Spec: v1.EndpointSpec{DisplayName: "after", RemoteAddress: "after.example.com", RemotePort: 443, Kind: "http", TLS: ptr.To(true),
				Path: "/", Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}}}
		Expect(oe.K8s.Create(ctx, ep)).To(Succeed())
		Eventually(failedInARow, specs.Timeout, specs.Poll).Should(BeZero())
		back := record("API back", healthyFor, 15*time.Minute)

		ev, spans := run(healthy, throttled, back)
		// No request, no error share: only the count of failures since the last success shows it.
		expect(ev, spans, "PolycrateOperatorAPIUnreachable", sel, 10*time.Minute, time.Minute, time.Minute,
			map[string]string{"severity": "critical"})
		quiet(ev, "PolycrateOperatorDown")
	})

	It("PolycrateOperatorQueueStuck: the kube-apiserver stops answering, a reconcile hangs", func() {
		// Scrapes while the API server is frozen: a token whose review and
		// authorization the operator has just cached (for a minute).
		Expect(newScrapeToken(oe.K8s)).To(Succeed())
		healthy := record("healthy", healthyFor, healthyLasts)
		Expect(healthy.scrapes[0].families).NotTo(BeNil())
		// A new Endpoint whose sync is under way when the API server stops
		// answering: its finalizer is written, the API takes 3 s to create it,
		// the status write then gets no answer.
		Expect(oe.API.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Method: "POST", LatencyMS: 3000})).To(Succeed())
		DeferCleanup(func() { Expect(oe.API.SetFaults()).To(Succeed()) })
		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hangs"},
			Spec: v1.EndpointSpec{DisplayName: "hangs", RemoteAddress: "hangs.example.com", RemotePort: 443, Kind: "http", TLS: ptr.To(true),
				Path: "/", Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}}}
		Expect(oe.K8s.Create(ctx, ep)).To(Succeed())
		Eventually(func() ([]string, error) {
			err := oe.K8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)
			return ep.Finalizers, err
		}, specs.Timeout, 20*time.Millisecond).ShouldNot(BeEmpty())
		done := make(chan struct{})
		go func() { defer GinkgoRecover(); defer close(done); oe.Proxy.Freeze(20 * time.Second) }()
		frozen := record("kube-apiserver frozen", 16*time.Second, 40*time.Minute)
		Eventually(done, time.Minute).Should(BeClosed())
		for _, sc := range frozen.scrapes {
			Expect(sc.families).NotTo(BeNil(), "the scrape at %s failed: the history would be of an operator gone", sc.at)
		}
		// The hung requests are answered; the operator goes on.
		Expect(oe.K8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
		back := record("kube-apiserver back", healthyFor, 10*time.Minute)

		ev, spans := run(healthy, frozen, back)
		// A reconcile running for over 10 minutes: pending 10 minutes in.
		tr := expect(ev, spans, "PolycrateOperatorQueueStuck", sel, 15*time.Minute, 11*time.Minute, time.Minute,
			map[string]string{"severity": "warning"})
		Expect(tr.firingLabels.Get("name")).To(Equal("sync-endpoint"))
		Eventually(func() (string, error) {
			err := oe.K8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)
			return ep.Status.Phase, err
		}, specs.Timeout, specs.Poll).Should(Equal("synced"), "the hung sync goes on")
	})

	It("PolycrateOperatorDown: the operator is gone, then back", func() {
		healthy := record("healthy", healthyFor, healthyLasts)
		Expect(oe.StopOperator()).To(Succeed())
		gone := record("gone", 3*time.Second, 15*time.Minute)
		Expect(oe.StartOperator()).To(Succeed())
		Eventually(func() error { _, err := tryScrape(2 * time.Second); return err }, time.Minute, specs.Poll).Should(Succeed())
		back := record("back", healthyFor, 5*time.Minute)

		ev, spans := run(healthy, gone, back)
		// Prometheus marks the target's series stale at the failed scrape: absent() at once.
		expect(ev, spans, "PolycrateOperatorDown", nil, 10*time.Minute, time.Minute, time.Minute,
			map[string]string{"severity": "critical", "job": scrapeSel["job"], "namespace": "polycrate"})
	})
})
