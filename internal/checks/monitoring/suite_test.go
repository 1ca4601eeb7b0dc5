package monitoring_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/monitoring"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	api *emulator.Server
	op  *operator.Operator
	ctx = context.Background()

	// Local targets of every kind.
	web      *httptest.Server
	webPort  int
	tcpPort  int
	dnsAddr  string
	failWith = map[string]int{"/fail": http.StatusServiceUnavailable}
)

func TestMonitoring(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Endpoint monitoring: assignment, checks, results (envtest + emulator + local targets)")
}

// Monitoring on (the other suites keep it off), health reports every 2 s, and
// the assignment fetched every 60 s (the default): a change that shows within
// seconds came through the nudge of the Endpoint sync.
var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.APISync.HealthReportIntervalSeconds = 2
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(true)
}}, func(e *testutil.OperatorEnv) {
	oe, k8s, api, op = e, e.K8s, e.API, e.Op
	startTargets()
})

func startTargets() {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if code, ok := failWith[r.URL.Path]; ok {
			w.WriteHeader(code)
			return
		}
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	web = httptest.NewServer(mux)
	DeferCleanup(web.Close)
	webPort = port(web.Listener.Addr())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(l.Close)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.WriteString(c, "220 ready\r\n"); time.Sleep(200 * time.Millisecond); _ = c.Close() }()
		}
	}()
	tcpPort = port(l.Addr())

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if req.Question[0].Name == "svc.monitoring.test." {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.ParseIP("10.1.2.3")})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	DeferCleanup(srv.Shutdown)
	dnsAddr = pc.LocalAddr().String()
}

func port(a net.Addr) int {
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := strconv.Atoi(p)
	return n
}

// agentID is the agent's id from the health report's answer.
func agentID() (string, error) {
	last := op.Health.Last()
	if last == nil || last.Response == nil {
		return "", fmt.Errorf("no accepted health report yet")
	}
	return last.Response.AgentID, nil
}

// assignment is the emulator's view of this agent's checks of an endpoint.
func assignment(endpointID string) func() (*polycrate.Assignment, error) {
	return func() (*polycrate.Assignment, error) {
		id, err := agentID()
		if err != nil {
			return nil, err
		}
		rows, err := oe.Client().Assignments(ctx, id)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if rows[i].EndpointID == endpointID {
				return &rows[i], nil
			}
		}
		return nil, fmt.Errorf("endpoint %s is not assigned to the agent", endpointID)
	}
}

func monitored(ep *v1.Endpoint) func() (*v1.EndpointMonitoringStatus, error) {
	return func() (*v1.EndpointMonitoringStatus, error) {
		fresh := &v1.Endpoint{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ep), fresh); err != nil {
			return nil, err
		}
		return fresh.Status.Monitoring, nil
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func state(s string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("State", s))
}

// webEndpoint is an Endpoint CR checking the local web server.
func webEndpoint(ns, path string) *v1.Endpoint {
	return &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1.EndpointSpec{RemoteAddress: "127.0.0.1", RemotePort: int32(webPort), TLS: ptr.To(false), Path: path, //nolint:gosec // a port
			Timeout: 2, Interval: 1, ExpectedStatusCodes: []int32{200}}}
}

func synced(ep *v1.Endpoint) string {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)).To(Succeed())
		g.Expect(ep.Status.APIID).NotTo(BeEmpty())
	}, timeout, poll).Should(Succeed())
	return ep.Status.APIID
}

var _ = Describe("Checking the endpoints the API assigns", func() {
	// Whatever a spec built (names repeated in the API, mirrors, failures), the
	// operator's /metrics answers: one failing collector would blind every alert.
	AfterEach(func() {
		Consistently(func() int { code, _ := specs.Scrape(); return code }, 2*time.Second, 200*time.Millisecond).Should(Equal(http.StatusOK))
	})

	It("names every endpoint's series by its CR, so that endpoints sharing a name in the API never break /metrics", func() {
		// An Endpoint CR (as discovery makes one from an Ingress host) …
		ns := specs.Namespace(k8s, "mon")
		ep := webEndpoint(ns, "/health")
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		id := synced(ep)
		local, err := oe.Client().Endpoints().Get(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		// … and two endpoints made in the API with that same name (the API allows it).
		var twins []string
		for range 2 {
			e, err := oe.Client().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: local.Name, Kind: "http", RemoteAddress: "127.0.0.1",
				RemotePort: ptr.To(webPort), Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 2, Interval: 1}}, CreatedByComponent: "api"})
			Expect(err).NotTo(HaveOccurred())
			twins = append(twins, e.ID)
		}
		op.Monitor.Nudge()
		for _, id := range append([]string{id}, twins...) {
			Eventually(assignment(id), timeout, poll).Should(HaveField("LastCheckSuccess", HaveValue(BeTrue())))
		}
		// Three series of probe_success with that name's endpoints, each with its own labels, and a scrape that answers.
		Eventually(func(g Gomega) {
			code, body := specs.Scrape()
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(specs.MetricValue("probe_success", map[string]string{"endpoint_namespace": ns, "endpoint": ep.Name})).To(Equal(1.0))
			for _, twin := range twins {
				g.Expect(specs.MetricValue("probe_success", map[string]string{"endpoint_namespace": testutil.OperatorNamespace,
					"endpoint": "api-" + local.Name + "-" + twin[:8]})).To(Equal(1.0))
			}
		}, timeout, poll).Should(Succeed())
		for _, twin := range twins {
			Expect(oe.Client().Endpoints().Delete(ctx, twin)).To(Succeed())
		}
		Expect(k8s.Delete(ctx, ep)).To(Succeed())
		op.Monitor.Nudge()
	})

	It("checks a synced Endpoint and reports it to the API, in the metrics and on the CR; a change reaches the checks within seconds", func() {
		ns := specs.Namespace(k8s, "mon")
		ep := webEndpoint(ns, "/health")
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		id := synced(ep)

		// The API's record of this agent's checks (sent inside the health report).
		Eventually(assignment(id), timeout, poll).Should(And(HaveField("LastCheckSuccess", HaveValue(BeTrue())),
			HaveField("LastCheckStatusCode", HaveValue(Equal(200))), HaveField("ChecksExecuted", BeNumerically(">=", 1))))
		Eventually(monitored(ep), timeout, poll).Should(And(state("up"), HaveField("StatusCode", int32(200)),
			HaveField("URL", fmt.Sprintf("http://127.0.0.1:%d/health", webPort))))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)).To(Succeed())
		Expect(meta.IsStatusConditionTrue(ep.Status.Conditions, v1.ConditionAvailable)).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(ep.Status.Conditions, v1.ConditionReady)).To(BeTrue(), "the sync's condition stays")
		Expect(ep.Finalizers).To(ContainElement(v1.FinalizerEndpointCleanup))
		labels := map[string]string{"endpoint_namespace": ns, "endpoint": ep.Name, "organization": "acme-corp"}
		Eventually(func() float64 { return specs.MetricValue("probe_success", labels) }, timeout, poll).Should(Equal(1.0))
		Expect(specs.MetricValue("probe_http_status_code", labels)).To(Equal(200.0))
		Expect(specs.MetricValue("probe_duration_seconds", labels)).To(BeNumerically(">", 0))
		Eventually(func(g Gomega) {
			h := api.AgentHealth("operator")
			g.Expect(h).To(HaveLen(1))
			summary, _ := h[0]["check_summary"].(map[string]any)
			g.Expect(summary["monitored_endpoints"]).To(BeNumerically(">=", 1))
			g.Expect(summary["successful_checks"]).To(BeNumerically(">=", 1))
		}, timeout, poll).Should(Succeed())
		// An operator-made endpoint is never mirrored as an API-defined CR.
		mirrors := &v1.EndpointList{}
		Expect(k8s.List(ctx, mirrors, client.InNamespace(testutil.OperatorNamespace), client.MatchingLabels{v1.LabelAPIDefined: "true"})).To(Succeed())
		for _, m := range mirrors.Items {
			Expect(m.Annotations[v1.AnnotationAPIEndpointID]).NotTo(Equal(id))
		}

		// The path changes (as an annotation change would): the sync writes the API
		// object, the agent fetches its assignment within seconds (60 s is the
		// interval) and the next check uses the new path.
		changed := time.Now()
		setPath(ep, "/fail")
		Eventually(monitored(ep), 15*time.Second, poll).Should(And(state("down"), HaveField("ErrorName", "unexpected_status_code"),
			HaveField("StatusCode", int32(503)), HaveField("ErrorCategory", "response")))
		GinkgoWriter.Printf("the changed path reached the checks in %s\n", time.Since(changed))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)).To(Succeed())
		c := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionAvailable)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Reason).To(Equal("UnexpectedStatusCode"))
		specs.ExpectEvent(k8s, ns, ep.Name, "Warning", v1.ReasonEndpointDown)
		// 0 of a series that is there (a missing series would sum to 0 too).
		Eventually(func() float64 { return specs.MetricValue("probe_success", labels) }, timeout, poll).Should(Equal(0.0))
		Expect(specs.HasSeries("probe_success", labels)).To(BeTrue())
		// The API: the endpoint is CRITICAL, with a downtime.
		Eventually(func() (string, error) {
			e, err := oe.Client().Endpoints().Get(ctx, id)
			if err != nil {
				return "", err
			}
			return string(e.State), nil
		}, timeout, poll).Should(Equal("CRITICAL"))

		// Back: up again, a Normal event.
		setPath(ep, "/health")
		Eventually(monitored(ep), 15*time.Second, poll).Should(state("up"))
		specs.ExpectEvent(k8s, ns, ep.Name, "Normal", v1.ReasonEndpointUp)
		Eventually(func() (string, error) {
			e, err := oe.Client().Endpoints().Get(ctx, id)
			if err != nil {
				return "", err
			}
			return string(e.State), nil
		}, timeout, poll).Should(Equal("OK"))

		// Checks that change nothing write nothing to Kubernetes (one check a second here).
		before := specs.MetricValue("polycrate_monitoring_status_writes_total", nil)
		Expect(before).To(BeNumerically(">", 0), "the writes of the changes above were not counted")
		executed, err := assignment(id)()
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() float64 { return specs.MetricValue("polycrate_monitoring_status_writes_total", nil) }, 4*time.Second, poll).
			Should(Equal(before))
		Eventually(assignment(id), timeout, poll).Should(HaveField("ChecksExecuted", BeNumerically(">=", executed.ChecksExecuted+3)))

		// Deleted: unassigned, its series are gone.
		Expect(k8s.Delete(ctx, ep)).To(Succeed())
		for _, name := range []string{"probe_http_status_code", "probe_success"} {
			Eventually(func() bool { return specs.HasSeries(name, labels) }, timeout, poll).Should(BeFalse(), name)
		}
	})

	It("mirrors endpoints defined in the API as Endpoint CRs, checks every kind, and removes the CR when the API unassigns or deletes them", func() {
		dnsHost, dnsPortStr, _ := net.SplitHostPort(dnsAddr)
		dnsPort, _ := strconv.Atoi(dnsPortStr)
		create := func(name, kind, addr string, port int, spec *polycrate.EndpointSpec) string {
			req := polycrate.EndpointRequest{Name: name, Kind: kind, RemoteAddress: addr, Spec: spec, CreatedByComponent: "api"}
			if port > 0 {
				req.RemotePort = ptr.To(port)
			}
			e, err := oe.Client().Endpoints().Create(ctx, req)
			Expect(err).NotTo(HaveOccurred())
			return e.ID
		}
		ids := map[string]string{
			"tcp":  create("api-tcp", "tcp", "127.0.0.1", tcpPort, &polycrate.EndpointSpec{TCP: &polycrate.TCPSpec{Timeout: 2, Interval: 1, ExpectedResponse: "220"}}),
			"dns":  create("api-dns", "dns", dnsHost, dnsPort, &polycrate.EndpointSpec{DNS: &polycrate.DNSSpec{Timeout: 2, Interval: 1, RecordName: "svc.monitoring.test", ExpectedResults: []string{"10.1.2.3"}}}),
			"icmp": create("api-icmp", "icmp", "127.0.0.1", 0, &polycrate.EndpointSpec{ICMP: &polycrate.ICMPSpec{Timeout: 1, Interval: 0.05}}),
			"http": create("api-http", "http", "127.0.0.1", webPort, &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/", Timeout: 2, Interval: 1}}),
		}
		op.Monitor.Nudge() // stands in for the next assignment_refresh_seconds
		mirrorOf := func(id string) func() (*v1.Endpoint, error) {
			return func() (*v1.Endpoint, error) {
				list := &v1.EndpointList{}
				if err := k8s.List(ctx, list, client.InNamespace(testutil.OperatorNamespace), client.MatchingLabels{v1.LabelAPIDefined: "true"}); err != nil {
					return nil, err
				}
				for i := range list.Items {
					if list.Items[i].Annotations[v1.AnnotationAPIEndpointID] == id {
						return &list.Items[i], nil
					}
				}
				return nil, nil
			}
		}
		for kind, id := range ids {
			Eventually(mirrorOf(id), timeout, poll).Should(And(Not(BeNil()), HaveField("Status.APIID", id), HaveField("Status.Phase", "synced"),
				HaveField("Spec.Kind", kind)), kind)
			Eventually(func() (*v1.EndpointMonitoringStatus, error) {
				ep, err := mirrorOf(id)()
				if err != nil || ep == nil {
					return nil, err
				}
				return ep.Status.Monitoring, nil
			}, timeout, poll).Should(state("up"), kind)
			Eventually(assignment(id), timeout, poll).Should(HaveField("LastCheckSuccess", HaveValue(BeTrue())), kind)
			ep, _ := mirrorOf(id)()
			Expect(ep.Finalizers).To(BeEmpty(), "the sync leaves an API-defined CR alone")
		}
		// The series are named by the mirror CRs (namespace and name), never by the API's name alone.
		mirrorLabels := func(kind string) map[string]string {
			ep, err := mirrorOf(ids[kind])()
			Expect(err).NotTo(HaveOccurred())
			return map[string]string{"endpoint_namespace": ep.Namespace, "endpoint": ep.Name}
		}
		Eventually(func() bool { return specs.HasSeries("probe_dns_lookup_time_seconds", mirrorLabels("dns")) }, timeout, poll).Should(BeTrue())
		Expect(specs.HasSeries("probe_icmp_duration_seconds", merge(mirrorLabels("icmp"), map[string]string{"phase": "rtt"}))).To(BeTrue())
		tcpLabels := mirrorLabels("tcp")

		// The API stops assigning one (do_not_monitor) and deletes another: their CRs go.
		_, err := oe.Client().Endpoints().Patch(ctx, ids["tcp"], map[string]any{"do_not_monitor": true})
		Expect(err).NotTo(HaveOccurred())
		Expect(oe.Client().Endpoints().Delete(ctx, ids["dns"])).To(Succeed())
		op.Monitor.Nudge()
		Eventually(mirrorOf(ids["tcp"]), timeout, poll).Should(BeNil())
		Eventually(mirrorOf(ids["dns"]), timeout, poll).Should(BeNil())
		Eventually(func() bool { return specs.HasSeries("probe_success", tcpLabels) }, timeout, poll).Should(BeFalse())
		Expect(mirrorOf(ids["icmp"])()).NotTo(BeNil())
		for _, id := range []string{ids["icmp"], ids["http"]} {
			Expect(oe.Client().Endpoints().Delete(ctx, id)).To(Succeed())
		}
		op.Monitor.Nudge()
		Eventually(mirrorOf(ids["http"]), timeout, poll).Should(BeNil())
	})

	It("declares a mirror with server-side apply, follows the API's change of it, and never takes over a CR of its name that is no mirror", func() {
		create := func(name string) string {
			e, err := oe.Client().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: name, Kind: "http", RemoteAddress: "127.0.0.1",
				RemotePort: ptr.To(webPort), Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/", Timeout: 2, Interval: 1}},
				CreatedByComponent: "api"})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = oe.Client().Endpoints().Delete(ctx, e.ID) })
			return e.ID
		}
		// Someone else's CR stands where a mirror would go.
		foreignID := create("api-foreign")
		foreign := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: testutil.OperatorNamespace, Name: monitoring.MirrorName(foreignID, "api-foreign")},
			Spec: v1.EndpointSpec{RemoteAddress: "someone-else.example", DisplayName: "not a mirror"}}
		Expect(k8s.Create(ctx, foreign)).To(Succeed())
		DeferCleanup(func() { _ = client.IgnoreNotFound(k8s.Delete(ctx, foreign)) })

		id := create("api-applied")
		op.Monitor.Nudge()
		key := client.ObjectKey{Namespace: testutil.OperatorNamespace, Name: monitoring.MirrorName(id, "api-applied")}
		mirror := &v1.Endpoint{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, mirror)).To(Succeed())
			g.Expect(mirror.Status.APIID).To(Equal(id))
		}, timeout, poll).Should(Succeed())
		var applied bool
		for _, f := range mirror.ManagedFields {
			applied = applied || (f.Manager == v1.FieldOwner && f.Operation == metav1.ManagedFieldsOperationApply)
		}
		Expect(applied).To(BeTrue(), "the mirror's spec is declared by an apply of %s: %+v", v1.FieldOwner, mirror.ManagedFields)
		Expect(mirror.Spec.Path).To(Equal("/"))

		// The API's change reaches the mirror.
		_, err := oe.Client().Endpoints().Patch(ctx, id, map[string]any{"spec": map[string]any{"http": map[string]any{"path": "/changed", "timeout": 2, "interval": 1}}})
		Expect(err).NotTo(HaveOccurred())
		op.Monitor.Nudge()
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key, mirror)
			return mirror.Spec.Path, err
		}, timeout, poll).Should(Equal("/changed"))

		// The other CR is as its owner made it.
		got := &v1.Endpoint{}
		Consistently(func() (string, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), got)
			return got.Spec.RemoteAddress + "|" + got.Labels[v1.LabelAPIDefined], err
		}, 3*time.Second, poll).Should(Equal("someone-else.example|"))
	})

	It("reports each bad target with its own error, within its timeout, without holding up the others", func() {
		closedPort, err := testutil.FreePort() // nobody listens there
		Expect(err).NotTo(HaveOccurred())
		hole, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hole.Close)
		tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
		DeferCleanup(tlsSrv.Close)
		mux := http.NewServeMux()
		mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
		loop := httptest.NewServer(mux)
		DeferCleanup(loop.Close)
		cases := map[string]struct {
			req  polycrate.EndpointRequest
			want string
		}{
			"refused": {polycrate.EndpointRequest{Kind: "tcp", RemoteAddress: "127.0.0.1", RemotePort: ptr.To(closedPort),
				Spec: &polycrate.EndpointSpec{TCP: &polycrate.TCPSpec{Timeout: 2, Interval: 1}}}, "connection_refused"},
			"silent": {polycrate.EndpointRequest{Kind: "http", RemoteAddress: "127.0.0.1", RemotePort: ptr.To(port(hole.Addr())),
				Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 1, Interval: 1}}}, "timeout"},
			"untrusted": {polycrate.EndpointRequest{Kind: "http", RemoteAddress: "127.0.0.1", RemotePort: ptr.To(port(tlsSrv.Listener.Addr())),
				Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{TLS: true, Timeout: 2, Interval: 1}}}, "tls_unknown_authority"},
			"looping": {polycrate.EndpointRequest{Kind: "http", RemoteAddress: "127.0.0.1", RemotePort: ptr.To(port(loop.Listener.Addr())),
				Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/loop", Timeout: 2, Interval: 1}}}, "too_many_redirects"},
			"healthy": {polycrate.EndpointRequest{Kind: "http", RemoteAddress: "127.0.0.1", RemotePort: ptr.To(webPort),
				Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 2, Interval: 1}}}, ""},
		}
		ids := map[string]string{}
		for name, c := range cases {
			c.req.Name, c.req.CreatedByComponent = "bad-"+name, "api"
			e, err := oe.Client().Endpoints().Create(ctx, c.req)
			Expect(err).NotTo(HaveOccurred())
			ids[name] = e.ID
		}
		op.Monitor.Nudge()
		for name, c := range cases {
			Eventually(assignment(ids[name]), timeout, poll).Should(And(HaveField("LastCheckErrorName", c.want),
				HaveField("LastCheckSuccess", HaveValue(Equal(c.want == "")))), name)
		}
		// The silent target's checks time out after 1 s each; the healthy one is
		// checked every second all the same.
		first, err := assignment(ids["healthy"])()
		Expect(err).NotTo(HaveOccurred())
		Eventually(assignment(ids["healthy"]), 10*time.Second, poll).Should(HaveField("ChecksExecuted", BeNumerically(">=", first.ChecksExecuted+4)))
		for _, id := range ids {
			Expect(oe.Client().Endpoints().Delete(ctx, id)).To(Succeed())
		}
		op.Monitor.Nudge()
	})

	It("follows a change of an API-defined endpoint into its CR and its checks", func() {
		e, err := oe.Client().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "api-changing", Kind: "http", RemoteAddress: "127.0.0.1",
			RemotePort: ptr.To(webPort), Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/health", Timeout: 2, Interval: 1}},
			CreatedByComponent: "api"})
		Expect(err).NotTo(HaveOccurred())
		op.Monitor.Nudge()
		mirror := func() (*v1.Endpoint, error) {
			list := &v1.EndpointList{}
			if err := k8s.List(ctx, list, client.InNamespace(testutil.OperatorNamespace), client.MatchingLabels{v1.LabelAPIDefined: "true"}); err != nil {
				return nil, err
			}
			for i := range list.Items {
				if list.Items[i].Annotations[v1.AnnotationAPIEndpointID] == e.ID {
					return &list.Items[i], nil
				}
			}
			return nil, fmt.Errorf("no mirror yet")
		}
		Eventually(mirror, timeout, poll).Should(And(HaveField("Spec.Path", "/health"), HaveField("Status.Monitoring", state("up"))))
		_, err = oe.Client().Endpoints().Patch(ctx, e.ID, map[string]any{"spec": map[string]any{"http": map[string]any{"path": "/fail", "timeout": 2, "interval": 1}}})
		Expect(err).NotTo(HaveOccurred())
		op.Monitor.Nudge()
		Eventually(mirror, timeout, poll).Should(And(HaveField("Spec.Path", "/fail"),
			HaveField("Status.Monitoring", And(state("down"), HaveField("StatusCode", int32(503))))))
		Expect(oe.Client().Endpoints().Delete(ctx, e.ID)).To(Succeed())
		op.Monitor.Nudge()
		Eventually(func() error { _, err := mirror(); return err }, timeout, poll).Should(HaveOccurred())
	})

	It("writes nothing after a restart when nothing changed", func() {
		ns := specs.Namespace(k8s, "mon")
		ep := webEndpoint(ns, "/health")
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		id := synced(ep)
		Eventually(monitored(ep), timeout, poll).Should(state("up"))
		before := specs.MetricValue("polycrate_monitoring_status_writes_total", nil)
		Expect(before).To(BeNumerically(">", 0), "the first check's write was not counted")
		executed, err := assignment(id)()
		Expect(err).NotTo(HaveOccurred())
		Expect(oe.StopOperator()).To(Succeed())
		Expect(oe.StartOperator()).To(Succeed())
		op = oe.Op
		// The new agent checks it again (a check a second) …
		Eventually(assignment(id), timeout, poll).Should(HaveField("ChecksExecuted", BeNumerically(">=", executed.ChecksExecuted+3)))
		// … and writes nothing: the CR already shows what it finds.
		Expect(specs.MetricValue("polycrate_monitoring_status_writes_total", nil)).To(Equal(before))
		Expect(k8s.Delete(ctx, ep)).To(Succeed())
	})

	It("stops checking when monitoring is switched off, and clears what it showed", func() {
		ns := specs.Namespace(k8s, "mon")
		ep := webEndpoint(ns, "/health")
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		synced(ep)
		labels := map[string]string{"endpoint_namespace": ns, "endpoint": ep.Name}
		Eventually(monitored(ep), timeout, poll).Should(state("up"))
		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.EndpointMonitoring.Enabled = ptr.To(false) })
		Eventually(monitored(ep), timeout, poll).Should(BeNil())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)).To(Succeed())
		Expect(meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionAvailable)).To(BeNil())
		Expect(specs.HasSeries("probe_success", labels)).To(BeFalse())
		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.EndpointMonitoring.Enabled = ptr.To(true) })
		Eventually(monitored(ep), timeout, poll).Should(state("up"))
		Expect(k8s.Delete(ctx, ep)).To(Succeed())
	})

	It("says in the health report when assigned checks cannot run", func() {
		ok, err := oe.Client().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "fine", Kind: "tcp", RemoteAddress: "127.0.0.1",
			RemotePort: ptr.To(tcpPort), Spec: &polycrate.EndpointSpec{TCP: &polycrate.TCPSpec{Timeout: 2, Interval: 1}}, CreatedByComponent: "api"})
		Expect(err).NotTo(HaveOccurred())
		bad, err := oe.Client().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "bogus-record", Kind: "dns", RemoteAddress: "127.0.0.1",
			Spec: &polycrate.EndpointSpec{DNS: &polycrate.DNSSpec{RecordName: "x.test", RecordType: "BOGUS", Interval: 1}}, CreatedByComponent: "api"})
		Expect(err).NotTo(HaveOccurred())
		op.Monitor.Nudge()
		Eventually(func(g Gomega) {
			h := api.AgentHealth("operator")
			g.Expect(h).To(HaveLen(1))
			g.Expect(h[0]["status"]).To(Equal("degraded"))
			g.Expect(fmt.Sprint(h[0]["warnings"])).To(And(ContainSubstring("1 assigned endpoint(s) cannot be checked"),
				ContainSubstring("bogus-record (dns): invalid_spec: unknown record_type BOGUS")))
		}, timeout, poll).Should(Succeed())
		Expect(oe.Client().Endpoints().Delete(ctx, bad.ID)).To(Succeed())
		Expect(oe.Client().Endpoints().Delete(ctx, ok.ID)).To(Succeed())
		op.Monitor.Nudge()
		Eventually(func() any { return api.AgentHealth("operator")[0]["status"] }, timeout, poll).Should(Equal("healthy"))
	})
})

// setPath changes an Endpoint's path as a user would: the agent writes the
// Endpoint's status after each check, so an update from a copy read a moment
// ago can conflict and is made again on the fresh object.
func setPath(ep *v1.Endpoint, path string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
			return err
		}
		ep.Spec.Path = path
		return k8s.Update(ctx, ep)
	})).To(Succeed())
}
