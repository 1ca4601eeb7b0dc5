package manager

import (
	"crypto/tls"
	"net/http"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions configures the metrics server as kubebuilder v4 scaffolds it.
// Secure: HTTPS (the certificate in MetricsCertDir, else a self-signed one), and
// each request authenticated with a TokenReview and authorized with a
// SubjectAccessReview for `get` on the non-resource URL /metrics
// (controller-runtime's filter, reviews cached 1 min / 5 min). The series name
// endpoints, organizations and error texts: only who RBAC lets read /metrics
// (the metrics-reader ClusterRole) reads them.
//
// The reviews go out with cfg as it was before leader election fenced its
// writes (fence.go): a TokenReview is a POST but changes nothing, and a standby
// replica must answer its scrapes too.
func metricsOptions(o Options, cfg *rest.Config) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if !o.MetricsSecure {
		return m
	}
	m.SecureServing = true
	m.CertDir = o.MetricsCertDir
	// HTTP/1.1 only, as kubebuilder's default: HTTP/2's stream resets
	// (CVE-2023-44487, CVE-2023-39325) need no exposure on a scrape port.
	m.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	m.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, err
		}
		return filters.WithAuthenticationAndAuthorization(cfg, hc)
	}
	return m
}
