package promql_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/helmchart"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

func TestPromQL(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Alerts and dashboard (Prometheus's parser and engine, against a running operator's series)")
}

var (
	oe  *testutil.OperatorEnv
	ctx = context.Background()
	pql = parser.NewParser(parser.Options{})

	// The chart as a platform team enables it.
	rules     *rulefmt.RuleGroups
	queries   []query
	scrapeSel = map[string]string{"job": helmchart.Release + "-metrics", "namespace": helmchart.Namespace}
)

// The operator runs as the chart's ServiceAccount under the chart's RBAC and
// serves /metrics as the chart configures it (HTTPS, readers only); the
// suite scrapes it as Prometheus does with a ServiceMonitor: over HTTPS, with
// the token of a ServiceAccount the chart binds to its metrics-reader role.
var (
	metricsAddr  = freeAddr()
	scrapeToken  string
	prometheusSA = map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
)

var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.APISync.HealthReportIntervalSeconds = 2
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(true)
}, As: helmchart.OperatorSA, MetricsAddr: metricsAddr, MetricsSecure: true, BeforeStart: applyChartRBAC,
	// The kube-apiserver's faults (alerts_test.go: a frozen API server).
	KubeProxy: true},
	func(e *testutil.OperatorEnv) { oe = e; readChart() })

// applyChartRBAC creates the chart's roles and bindings (metrics.readers: the
// Prometheus ServiceAccount) and a token of that ServiceAccount.
func applyChartRBAC(e *testutil.OperatorEnv) error {
	ch, err := helmchart.Load()
	if err != nil {
		return err
	}
	objs, err := helmchart.Objects(ch, map[string]any{"metrics": map[string]any{"readers": []any{prometheusSA}}})
	if err != nil {
		return err
	}
	if _, err := helmchart.ApplyRBAC(ctx, e.K8s, objs); err != nil {
		return err
	}
	ns := prometheusSA["namespace"].(string)
	if err := e.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prometheusSA["name"].(string)}}
	if err := e.K8s.Create(ctx, sa); err != nil {
		return err
	}
	return newScrapeToken(e.K8s)
}

// newScrapeToken gives the scraper a token of its own ServiceAccount. The
// operator's metrics server caches a token's review for a minute and its
// authorization for five: the first scrape with a new token asks the API
// server, the next ones do not.
func newScrapeToken(k8s client.Client) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: prometheusSA["namespace"].(string), Name: prometheusSA["name"].(string)}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		return err
	}
	scrapeToken = tr.Status.Token
	return nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// readChart renders the chart with the alerts and the dashboard on, as a platform
// team enables them, and reads their expressions.
func readChart() {
	GinkgoHelper()
	ch, err := helmchart.Load()
	Expect(err).NotTo(HaveOccurred())
	objs, err := helmchart.Objects(ch, map[string]any{"metrics": map[string]any{
		"prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}}})
	Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		switch o.GetKind() {
		case "PrometheusRule":
			// The spec of a PrometheusRule is a Prometheus rule file: Prometheus's own
			// loader checks it strictly (unknown fields, durations, PromQL, label and
			// annotation templates).
			b, err := yaml.Marshal(o.Object["spec"])
			Expect(err).NotTo(HaveOccurred())
			var errs []error
			rules, errs = rulefmt.Parse(b, false, model.UTF8Validation, pql, nil)
			Expect(errs).To(BeEmpty(), "the PrometheusRule's groups as Prometheus loads them")
		case "ConfigMap":
			queries = dashboardQueries(o)
		}
	}
	Expect(rules).NotTo(BeNil(), "the chart renders a PrometheusRule")
	Expect(queries).NotTo(BeEmpty(), "the chart renders the dashboard")
}

// query is one PromQL expression of the dashboard, with where it stands.
type query struct{ where, expr string }

// grafana replaces the dashboard's variables by what a ServiceMonitor scrape of
// the release yields, and Grafana's interval variables by a range.
var grafana = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m",
	"$namespace", helmchart.Namespace, "$job", helmchart.Release+"-metrics")

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// dashboardQueries reads every panel target (rows included) and every templating
// query of the dashboard ConfigMap.
func dashboardQueries(cm *unstructured.Unstructured) []query {
	GinkgoHelper()
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	Expect(json.Unmarshal([]byte(data["polycrate-operator.json"]), &dash)).To(Succeed())
	var out []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), expr: grafana.Replace(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		out = append(out, query{where: "variable " + v.Name, expr: grafana.Replace(fmt.Sprint(q["query"]))})
	}
	return out
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// promQL returns the PromQL of a query: a label_values() variable's series
// selector, else the expression itself, and the label a variable reads.
func (q query) promQL() (expr, label string) {
	if m := labelValues.FindStringSubmatch(q.expr); m != nil {
		return m[1], m[2]
	}
	return q.expr, ""
}

// metricNames lists the metric names an expression selects.
func metricNames(e parser.Expr) []string {
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					out = append(out, m.Value)
				}
			}
		}
		return nil
	})
	return out
}

// scrape reads the operator's /metrics as Prometheus does with the chart's
// ServiceMonitor (tryScrape); the metrics server starts with the manager, so
// the first scrapes may find no listener.
func scrape() map[string]*dto.MetricFamily {
	GinkgoHelper()
	var families map[string]*dto.MetricFamily
	Eventually(func() (err error) {
		families, err = tryScrape(30 * time.Second)
		return err
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	return families
}

// tryScrape scrapes once as the chart's ServiceMonitor does: HTTPS
// (insecureSkipVerify: the self-signed certificate), the bearer token of a
// ServiceAccount bound to the metrics-reader ClusterRole.
func tryScrape(timeout time.Duration) (map[string]*dto.MetricFamily, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // as the chart's ServiceMonitor
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+scrapeToken)
	resp, err := (&http.Client{Transport: tr, Timeout: timeout}).Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// seriesNames are the names of the series a scrape of these families stores
// (a histogram's _bucket, _sum and _count).
func seriesNames(families map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// store appends a scrape to st at ts, with the target labels a ServiceMonitor
// scrape adds (job, namespace).
func store(st *memStore, families map[string]*dto.MetricFamily, ts time.Time) {
	for _, s := range flatten(families) {
		st.add(s.labels, ts.UnixMilli(), s.v)
	}
}

// eval runs expr at ts on st with Prometheus's query engine.
func eval(st storage.Queryable, expr string, ts time.Time) promql.Vector {
	GinkgoHelper()
	q, err := engine.NewInstantQuery(ctx, st, nil, expr, ts)
	Expect(err).NotTo(HaveOccurred(), expr)
	defer q.Close()
	res := q.Exec(ctx)
	Expect(res.Err).NotTo(HaveOccurred(), expr)
	switch v := res.Value.(type) {
	case promql.Vector:
		return v
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V}}
	}
	Fail(fmt.Sprintf("%s: a %s, not a vector", expr, res.Value.Type()))
	return nil
}

// alert returns the expression of the named alert.
func alert(name string) string {
	GinkgoHelper()
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r.Expr
			}
		}
	}
	Fail("no alert " + name)
	return ""
}

func alertNames() []string {
	var out []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Alert)
		}
	}
	sort.Strings(out)
	return out
}

// labelsOf lists each result series' value of label.
func labelsOf(v promql.Vector, label string) []string {
	var out []string
	for _, s := range v {
		out = append(out, s.Metric.Get(label))
	}
	return out
}

var _ = Describe("the chart's alerts and dashboard", Ordered, ContinueOnFailure, func() {
	var (
		live       *memStore
		now        time.Time
		exported   map[string]bool
		soon, late = time.Now().Add(5 * 24 * time.Hour).UTC().Truncate(time.Second), time.Now().Add(90 * 24 * time.Hour).UTC().Truncate(time.Second)
	)

	BeforeAll(func() {
		// A running operator that has done what the panels show: synced an object,
		// had one refused, mirrored certificates, reported its health.
		k8s := oe.K8s
		ns := specs.Namespace(k8s, "promql")
		endpoint := func(host string) *v1.Endpoint {
			return &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(host, ".", "-")},
				Spec: v1.EndpointSpec{DisplayName: host, RemoteAddress: host, RemotePort: 443, Kind: "http", TLS: ptr.To(true),
					Path: "/", Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}}}
		}
		phase := func(name string) func() (string, error) {
			return func() (string, error) {
				ep := &v1.Endpoint{}
				err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)
				return ep.Status.Phase, err
			}
		}
		Expect(k8s.Create(ctx, endpoint("ok.example.com"))).To(Succeed())
		Eventually(phase("ok-example-com"), specs.Timeout, specs.Poll).Should(Equal("synced"))
		// An endpoint the monitoring agent checks for real (a local server).
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
		DeferCleanup(target.Close)
		local := endpoint("127.0.0.1")
		local.Spec.RemotePort, local.Spec.TLS, local.Spec.Interval = int32(target.Listener.Addr().(*net.TCPAddr).Port), ptr.To(false), 1 //nolint:gosec // a port
		Expect(k8s.Create(ctx, local)).To(Succeed())
		Eventually(func() float64 {
			return specs.MetricValue("probe_success", map[string]string{"endpoint_namespace": ns, "endpoint": local.Name})
		}, specs.Timeout, specs.Poll).Should(Equal(1.0))
		Expect(oe.API.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Method: "POST", Status: 400})).To(Succeed())
		DeferCleanup(func() { Expect(oe.API.SetFaults()).To(Succeed()) })
		refused := endpoint("refused.example.com")
		Expect(k8s.Create(ctx, refused)).To(Succeed())
		Eventually(phase("refused-example-com"), specs.Timeout, specs.Poll).Should(Equal("error"))
		// Gone after these specs: the alert specs start without an object in Error.
		DeferCleanup(func() {
			Expect(k8s.Delete(ctx, refused)).To(Succeed())
			Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(refused), &v1.Endpoint{}) }, specs.Timeout, specs.Poll).
				Should(WithTransform(apierrors.IsNotFound, BeTrue()))
		})

		for name, notAfter := range map[string]time.Time{"soon": soon, "late": late} {
			na := metav1.NewTime(notAfter)
			Expect(k8s.Create(ctx, &v1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: v1.CertificateSpec{Name: name, Namespace: ns, SecretName: name, NotAfter: &na}})).To(Succeed())
		}
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_certificate_expiration_timestamp_seconds", map[string]string{"certificate_namespace": ns})
		}, specs.Timeout, specs.Poll).Should(Equal(float64(soon.Unix() + late.Unix())))
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_health_reports_total", map[string]string{"result": "success"})
		}, specs.Timeout, specs.Poll).Should(BeNumerically(">=", 1))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())

		// Two scrapes, as Prometheus takes them, into Prometheus's storage: rates
		// and increases need two samples.
		live = newMemStore()
		first := time.Now()
		store(live, scrape(), first)
		// The second scrape after more work: another accepted health report.
		reports := specs.MetricValue("polycrate_operator_health_reports_total", map[string]string{"result": "success"})
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_health_reports_total", map[string]string{"result": "success"})
		}, specs.Timeout, specs.Poll).Should(BeNumerically(">", reports))
		families := scrape()
		now = first.Add(30 * time.Second)
		store(live, families, now)
		exported = seriesNames(families)
	})

	It("has every expression parse with Prometheus's PromQL parser, naming only series the operator exports", func() {
		var all []query
		all = append(all, queries...)
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				all = append(all, query{where: "alert " + r.Alert, expr: r.Expr})
			}
		}
		// Exported by controller-runtime only with --leader-elect, which the
		// chart always passes (internal/cli/cluster_test.go scrapes it from a
		// leader and a standby); the operator here runs alone, without.
		withLeaderElection := map[string]bool{"leader_election_master_status": true}
		named := 0
		for _, q := range all {
			src, _ := q.promQL()
			e, err := pql.ParseExpr(src)
			Expect(err).NotTo(HaveOccurred(), "%s: %s", q.where, src)
			names := metricNames(e)
			Expect(names).NotTo(BeEmpty(), "%s reads no metric: %s", q.where, src)
			for _, n := range names {
				if withLeaderElection[n] {
					named++
					continue
				}
				Expect(exported).To(HaveKey(n), "%s names %s, which the running operator does not export", q.where, n)
				named++
			}
		}
		Expect(named).To(BeNumerically(">=", len(all)))
	})

	It("has every panel and variable show data from a running operator's scrape", func() {
		for _, q := range queries {
			src, label := q.promQL()
			v := eval(live, src, now)
			Expect(v).NotTo(BeEmpty(), "%s shows nothing: %s", q.where, src)
			if label != "" {
				Expect(labelsOf(v, label)).To(ContainElement(Not(BeEmpty())), "%s: no series has the label %s", q.where, label)
			}
		}
	})

	It("fires on the running operator exactly what is wrong with it: the refused Endpoint, the certificate that expires in 5 days", func() {
		Expect(alertNames()).To(Equal([]string{"PolycrateCertificateExpiring", "PolycrateOperatorAPIUnreachable", "PolycrateOperatorDown",
			"PolycrateOperatorHealthReportsFailing", "PolycrateOperatorQueueStuck", "PolycrateOperatorSyncErrors"}))
		Expect(labelsOf(eval(live, alert("PolycrateOperatorSyncErrors"), now), "kind")).To(ConsistOf("Endpoint"))
		expiring := eval(live, alert("PolycrateCertificateExpiring"), now)
		Expect(labelsOf(expiring, "certificate")).To(ContainElement("soon"))
		Expect(labelsOf(expiring, "certificate")).NotTo(ContainElement("late"))
		for _, quiet := range []string{"PolycrateOperatorDown", "PolycrateOperatorAPIUnreachable", "PolycrateOperatorHealthReportsFailing"} {
			Expect(eval(live, alert(quiet), now)).To(BeEmpty(), "%s fires on a healthy operator", quiet)
		}
	})

	// Each alert on series as a failing and a healthy operator would export them
	// (Prometheus's series notation of its rule tests: start+step x count, one
	// sample a minute from time 0).
	sel := `job="polycrate-operator-metrics", namespace="polycrate"`
	DescribeTable("each alert fires on its failure and not on a healthy operator",
		func(name, failing, healthy string, want map[string]string) {
			at := time.Unix(0, 0).Add(20 * time.Minute)
			fired := eval(loaded(failing), alert(name), at)
			Expect(fired).To(HaveLen(1), "%s on\n%s", name, failing)
			for k, v := range want {
				Expect(fired[0].Metric.Get(k)).To(Equal(v), "%s: label %s", name, k)
			}
			Expect(eval(loaded(healthy), alert(name), at)).To(BeEmpty(), "%s on\n%s", name, healthy)
		},
		Entry("no operator scraped", "PolycrateOperatorDown",
			`  up{`+sel+`} 1x20`,
			`  polycrate_operator_info{version="v1", `+sel+`} 1x20`, nil),
		Entry("the API does not answer", "PolycrateOperatorAPIUnreachable",
			`  polycrate_api_requests_total{code="error", resource="agents", method="POST", `+sel+`} 0+10x20
  polycrate_api_requests_total{code="200", resource="endpoints", method="GET", `+sel+`} 0+1x20`,
			`  polycrate_api_requests_total{code="error", resource="agents", method="POST", `+sel+`} 0+1x20
  polycrate_api_requests_total{code="200", resource="endpoints", method="GET", `+sel+`} 0+10x20`,
			map[string]string{"namespace": "polycrate"}),
		Entry("the API answers 503 with a Retry-After of 10 minutes (one failed request per 10 minutes: no 5-minute window holds one; a standby's stale failure does not count)",
			"PolycrateOperatorAPIUnreachable",
			`  polycrate_api_requests_total{code="503", resource="agents", method="POST", `+sel+`} 1x9 2x10
  polycrate_api_requests_failed_in_a_row{`+sel+`} 1x9 2x10`,
			`  polycrate_api_requests_total{code="200", resource="agents", method="POST", instance="a", `+sel+`} 0+1x20
  polycrate_api_requests_failed_in_a_row{instance="a", `+sel+`} 0x20
  polycrate_api_requests_failed_in_a_row{instance="b", `+sel+`} 1x20
  leader_election_master_status{name="polycrate-operator.polycrate.io", instance="a", `+sel+`} 1x20
  leader_election_master_status{name="polycrate-operator.polycrate.io", instance="b", `+sel+`} 0x20`,
			map[string]string{"namespace": "polycrate"}),
		Entry("no successful health report for 10 minutes (the last at 1m; never, on the other replica)", "PolycrateOperatorHealthReportsFailing",
			`  polycrate_operator_health_report_last_success_timestamp_seconds{pod="a", `+sel+`} 60x20
  polycrate_operator_health_report_last_success_timestamp_seconds{pod="b", `+sel+`} 0x20`,
			`  polycrate_operator_health_report_last_success_timestamp_seconds{pod="a", `+sel+`} 0+60x20
  polycrate_operator_health_report_last_success_timestamp_seconds{pod="b", `+sel+`} 0x20`,
			map[string]string{"namespace": "polycrate"}),
		Entry("objects in Error", "PolycrateOperatorSyncErrors",
			`  polycrate_operator_objects{kind="Host", phase="Error", `+sel+`} 2x20
  polycrate_operator_objects{kind="Endpoint", phase="Error", `+sel+`} 0x20`,
			`  polycrate_operator_objects{kind="Host", phase="Error", `+sel+`} 0x20
  polycrate_operator_objects{kind="Host", phase="Synced", `+sel+`} 5x20`,
			map[string]string{"kind": "Host"}),
		Entry("a certificate expires in 5 days", "PolycrateCertificateExpiring",
			`  polycrate_operator_certificate_expiration_timestamp_seconds{certificate_namespace="shop", certificate="api-tls", `+sel+`} `+fmt.Sprint(1200+5*86400)+`x20`,
			`  polycrate_operator_certificate_expiration_timestamp_seconds{certificate_namespace="shop", certificate="api-tls", `+sel+`} `+fmt.Sprint(1200+30*86400)+`x20`,
			map[string]string{"certificate": "api-tls", "certificate_namespace": "shop"}),
		Entry("a queue holds items and nothing is done", "PolycrateOperatorQueueStuck",
			`  workqueue_depth{name="sync-endpoint", controller="sync-endpoint", `+sel+`} 3x20
  workqueue_work_duration_seconds_count{name="sync-endpoint", controller="sync-endpoint", `+sel+`} 10x20`,
			`  workqueue_depth{name="sync-endpoint", controller="sync-endpoint", `+sel+`} 3x20
  workqueue_work_duration_seconds_count{name="sync-endpoint", controller="sync-endpoint", `+sel+`} 10+5x20`,
			map[string]string{"name": "sync-endpoint"}),
		Entry("a reconcile runs for over 10 minutes", "PolycrateOperatorQueueStuck",
			`  workqueue_longest_running_processor_seconds{name="sync-host", controller="sync-host", `+sel+`} 0+60x20`,
			`  workqueue_longest_running_processor_seconds{name="sync-host", controller="sync-host", `+sel+`} 0x20`,
			map[string]string{"name": "sync-host"}),
	)
})
