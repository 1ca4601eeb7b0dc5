package polycrate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates and registers the client metrics:
// polycrate_api_requests_total{resource,method,code} and
// polycrate_api_request_duration_seconds{resource,method}. code is the HTTP
// status, or "error" when no answer came.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "polycrate_api_requests_total",
			Help: "Requests to the Polycrate API by resource, method and status code.",
		}, []string{"resource", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "polycrate_api_request_duration_seconds",
			Help:    "Latency of Polycrate API requests.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"resource", "method"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(resource, method, code string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(resource, method, code).Inc()
	m.duration.WithLabelValues(resource, method).Observe(d.Seconds())
}
