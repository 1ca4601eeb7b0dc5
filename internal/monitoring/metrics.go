package monitoring

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/polycrate/polycrate-operator/internal/probe"
)

// The check metrics, named as the seed names them (probe_success,
// probe_duration_seconds, probe_http_status_code) and, where they mean the same,
// as blackbox_exporter does; labels endpoint (the API's name) and organization.
// The series of an endpoint disappear when it is no longer assigned.
var (
	endpointLabels = []string{"endpoint", "organization"}
	probeSuccess   = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_success",
		Help: "Whether the last check of the endpoint succeeded (1) or failed (0)."}, endpointLabels)
	probeDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_duration_seconds",
		Help: "How long the last check of the endpoint took."}, endpointLabels)
	probeStatusCode = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_http_status_code",
		Help: "The HTTP status code of the last check (0: no answer)."}, endpointLabels)
	probeSSLExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_ssl_earliest_cert_expiry",
		Help: "The earliest not-after of the certificate chain the endpoint presented, in Unix seconds."}, endpointLabels)
	probeHTTPPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_http_duration_seconds",
		Help: "The phases of the last HTTP check: resolve, connect, tls, processing, transfer."}, append(endpointLabels, "phase"))
	probeDNSLookup = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_dns_lookup_time_seconds",
		Help: "The query time of the last DNS check."}, endpointLabels)
	probeICMPRTT = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "probe_icmp_duration_seconds",
		Help: "The average round trip of the last ICMP check (phase rtt)."}, append(endpointLabels, "phase"))

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
	ctrlmetrics.Registry.MustRegister(probeSuccess, probeDuration, probeStatusCode, probeSSLExpiry, probeHTTPPhase, probeDNSLookup,
		probeICMPRTT, checksTotal, assignedEndpoints, assignmentFetches, lateness, statusWrites)
}

// observe exports one check's outcome.
func observe(t assignment, out probe.Outcome) {
	l := prometheus.Labels{"endpoint": t.name, "organization": t.organization}
	result, errName := "success", ""
	if out.Failure != nil {
		result, errName = "failure", out.Failure.Name
	}
	checksTotal.WithLabelValues(t.target.Kind, result, errName).Inc()
	probeSuccess.With(l).Set(map[bool]float64{true: 1, false: 0}[out.Failure == nil])
	probeDuration.With(l).Set(out.Duration.Seconds())
	switch t.target.Kind {
	case "dns":
		if ms := out.Result.DNSQueryTimeMS; ms != nil {
			probeDNSLookup.With(l).Set((time.Duration(*ms) * time.Millisecond).Seconds())
		}
	case "icmp":
		if ms := out.Result.ICMPRTTMS; ms != nil {
			probeICMPRTT.With(prometheus.Labels{"endpoint": t.name, "organization": t.organization, "phase": "rtt"}).Set(*ms / 1000)
		}
	case "tcp":
	default:
		code := 0
		if out.Result.StatusCode != nil {
			code = *out.Result.StatusCode
		}
		probeStatusCode.With(l).Set(float64(code))
		for _, phase := range []string{"resolve", "connect", "tls", "processing", "transfer"} {
			probeHTTPPhase.With(prometheus.Labels{"endpoint": t.name, "organization": t.organization, "phase": phase}).
				Set(out.Phases[phase].Seconds())
		}
	}
	if !out.CertNotAfter.IsZero() {
		probeSSLExpiry.With(l).Set(float64(out.CertNotAfter.Unix()))
	}
}

// forget removes every series of an endpoint.
func forget(name, organization string) {
	l := prometheus.Labels{"endpoint": name, "organization": organization}
	for _, v := range []*prometheus.GaugeVec{probeSuccess, probeDuration, probeStatusCode, probeSSLExpiry, probeHTTPPhase, probeDNSLookup, probeICMPRTT} {
		v.DeletePartialMatch(l)
	}
}
