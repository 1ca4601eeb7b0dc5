package monitoring

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/polycrate/polycrate-operator/internal/checks/probe"
)

// The check metrics, named as the seed names them (probe_success,
// probe_duration_seconds, probe_http_status_code) and, where they mean the same,
// as blackbox_exporter does. Labels: endpoint_namespace and endpoint, the
// Endpoint CR that carries the API endpoint (the seed's endpoint="api-example-com"
// is a CR name; an API-defined endpoint's CR is its mirror), and organization.
// Not "namespace": the scrape's own target label (the operator's namespace,
// which the chart's dashboard and alerts select on) would rename it to
// exported_namespace, as with certificate_namespace. Names in
// the API are not unique — two series of one name would make every scrape fail —
// so the labels come from the CR, and the collector never emits one label set
// twice, whatever the API holds (seriesLabels).
// They are made at scrape time from one compact record per endpoint (a GaugeVec
// child per series would cost ~3 KiB per endpoint; docs/monitoring.md,
// "Performance"), and an endpoint's series disappear with its record when it is
// no longer assigned.
var (
	endpointLabels = []string{"endpoint_namespace", "endpoint", "organization"}
	phaseLabels    = []string{"endpoint_namespace", "endpoint", "organization", "phase"}
	descSuccess    = prometheus.NewDesc("probe_success", "Whether the last check of the endpoint succeeded (1) or failed (0).", endpointLabels, nil)
	descDuration   = prometheus.NewDesc("probe_duration_seconds", "How long the last check of the endpoint took.", endpointLabels, nil)
	descStatusCode = prometheus.NewDesc("probe_http_status_code", "The HTTP status code of the last check (0: no answer).", endpointLabels, nil)
	descSSLExpiry  = prometheus.NewDesc("probe_ssl_earliest_cert_expiry",
		"The earliest not-after of the certificate chain the endpoint presented, in Unix seconds.", endpointLabels, nil)
	descHTTPPhase = prometheus.NewDesc("probe_http_duration_seconds",
		"The phases of the last HTTP check: resolve, connect, tls, processing, transfer (summed over its redirects).", phaseLabels, nil)
	descRedirects = prometheus.NewDesc("probe_http_redirects", "The redirects the last HTTP check followed.", endpointLabels, nil)
	descDNSLookup = prometheus.NewDesc("probe_dns_lookup_time_seconds", "The query time of the last DNS check.", endpointLabels, nil)
	descICMPRTT   = prometheus.NewDesc("probe_icmp_duration_seconds", "The average round trip of the last ICMP check (phase rtt).", phaseLabels, nil)

	probes = &probeCollector{records: map[string]*probeRecord{}}

	checksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polycrate_monitoring_checks_total",
		Help: "Checks run, by kind, result (success, failure) and error name."}, []string{"kind", "result", "error"})
	assignedEndpoints = prometheus.NewGauge(prometheus.GaugeOpts{Name: "polycrate_monitoring_assigned_endpoints",
		Help: "Endpoints the API assigns to this operator's agent."})
	assignmentFetches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polycrate_monitoring_assignment_fetches_total",
		Help: "Fetches of the assigned endpoints, by result."}, []string{"result"})
	lateness = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "polycrate_monitoring_schedule_lateness_seconds",
		Help:    "How late checks start after they are due (scheduling lateness; high values: raise max_concurrent_checks).",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polycrate_monitoring_status_writes_total",
		Help: "Endpoint CR status writes of the monitoring agent, by cause (change, refresh)."}, []string{"cause"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(probes, checksTotal, assignedEndpoints, assignmentFetches, lateness, statusWrites)
}

// probeRecord is what the metrics of one endpoint show: its last check.
type probeRecord struct {
	seriesLabels
	kind            string
	success         bool
	duration        float64
	statusCode      float64
	sslExpiry       float64 // 0: no certificate
	phases          [probe.NumPhases]float64
	redirects       float64
	dnsLookup       float64
	icmpRTT         float64
	hasDNS, hasICMP bool
}

// seriesLabels name one endpoint's series: the Endpoint CR (namespace, name)
// and the organization. An endpoint without a CR in this cluster (another
// cluster's operator made it, or its mirror is not written yet) has an empty
// namespace and the mirror's name (api-<name>-<id prefix>).
type seriesLabels struct {
	namespace, endpoint, organization string
}

// probeCollector makes the probe_* series from the records at scrape time.
type probeCollector struct {
	mu      sync.RWMutex
	records map[string]*probeRecord // by endpoint id
}

func (p *probeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSuccess, descDuration, descStatusCode, descSSLExpiry, descHTTPPhase, descRedirects, descDNSLookup, descICMPRTT} {
		ch <- d
	}
}

func (p *probeCollector) Collect(ch chan<- prometheus.Metric) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	// The agent gives every endpoint its own labels; should two records still
	// share a label set (a relabelling in flight), the second is left out of this
	// scrape rather than failing the whole scrape.
	seen := make(map[seriesLabels]struct{}, len(p.records))
	for _, r := range p.records {
		if _, dup := seen[r.seriesLabels]; dup {
			continue
		}
		seen[r.seriesLabels] = struct{}{}
		l := r.seriesLabels
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			values := append(make([]string, 0, 4), l.namespace, l.endpoint, l.organization)
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(values, extra...)...)
		}
		gauge(descSuccess, map[bool]float64{true: 1, false: 0}[r.success])
		gauge(descDuration, r.duration)
		switch r.kind {
		case "dns":
			if r.hasDNS {
				gauge(descDNSLookup, r.dnsLookup)
			}
		case "icmp":
			if r.hasICMP {
				gauge(descICMPRTT, r.icmpRTT, "rtt")
			}
		case "tcp":
		default:
			gauge(descStatusCode, r.statusCode)
			gauge(descRedirects, r.redirects)
			for i, phase := range probe.PhaseNames {
				gauge(descHTTPPhase, r.phases[i], phase)
			}
		}
		if r.sslExpiry > 0 {
			gauge(descSSLExpiry, r.sslExpiry)
		}
	}
}

// observe exports one check's outcome.
func observe(t assignment, out probe.Outcome) {
	result, errName := "success", ""
	if out.Failure != nil {
		result, errName = "failure", out.Failure.Name
	}
	checksTotal.WithLabelValues(t.target.Kind, result, errName).Inc()
	r := &probeRecord{seriesLabels: t.labels, kind: t.target.Kind, success: out.Failure == nil,
		duration: out.Duration.Seconds(), redirects: float64(out.Redirects)}
	if ms := out.Result.DNSQueryTimeMS; ms != nil {
		r.dnsLookup, r.hasDNS = (time.Duration(*ms) * time.Millisecond).Seconds(), true
	}
	if ms := out.Result.ICMPRTTMS; ms != nil {
		r.icmpRTT, r.hasICMP = *ms/1000, true
	}
	if c := out.Result.StatusCode; c != nil {
		r.statusCode = float64(*c)
	}
	for i := range r.phases {
		r.phases[i] = out.Phases.D[i].Seconds()
	}
	if !out.CertNotAfter.IsZero() {
		r.sslExpiry = float64(out.CertNotAfter.Unix())
	}
	probes.mu.Lock()
	probes.records[t.target.ID] = r
	probes.mu.Unlock()
}

// relabel gives the records of assigned endpoints their current labels (a CR
// appeared, a name was made unique), so that a record never keeps a label set
// another endpoint now has.
func relabel(labels map[string]seriesLabels) {
	probes.mu.Lock()
	defer probes.mu.Unlock()
	for id, r := range probes.records {
		if l, ok := labels[id]; ok && l != r.seriesLabels {
			c := *r
			c.seriesLabels = l
			probes.records[id] = &c
		}
	}
}

// forget removes every series of an endpoint.
func forget(id string) {
	probes.mu.Lock()
	delete(probes.records, id)
	probes.mu.Unlock()
}
