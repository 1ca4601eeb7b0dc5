package polycrate

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus metrics.
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	circuitOpen prometheus.Gauge
	failedInRow prometheus.Gauge
	transitions *prometheus.CounterVec
	held        prometheus.Counter
}

// NewMetrics creates and registers the client metrics:
// polycrate_api_requests_total{resource,method,code} and
// polycrate_api_request_duration_seconds{resource,method}. code is the HTTP
// status, or "error" when no answer came. The breaker's: polycrate_api_circuit_open
// (1 while requests are held back), polycrate_api_circuit_transitions_total{state},
// polycrate_api_requests_held_back_total and polycrate_api_requests_failed_in_a_row.
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
		circuitOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "polycrate_api_circuit_open",
			Help: "1 while the circuit breaker of the Polycrate API connection is open (requests held back, one probe at a time), else 0.",
		}),
		failedInRow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "polycrate_api_requests_failed_in_a_row",
			Help: "Requests to the Polycrate API that failed (no answer, a 5xx or a 429) since the last one that was served; 0 after a success.",
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "polycrate_api_circuit_transitions_total",
			Help: "Transitions of the Polycrate API circuit breaker, by the state entered (open, closed).",
		}, []string{"state"}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "polycrate_api_requests_held_back_total",
			Help: "Requests to the Polycrate API the open circuit breaker answered itself (never sent).",
		}),
	}
	var err error
	if m.requests, err = Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = Register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.circuitOpen, err = Register(reg, m.circuitOpen); err != nil {
		return nil, err
	}
	if m.failedInRow, err = Register(reg, m.failedInRow); err != nil {
		return nil, err
	}
	if m.transitions, err = Register(reg, m.transitions); err != nil {
		return nil, err
	}
	if m.held, err = Register(reg, m.held); err != nil {
		return nil, err
	}
	return m, nil
}

// Register registers c, or returns the collector registered before under the
// same description: an operator set up again in the same process (a restart in
// a test suite) goes on counting in the series /metrics serves.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}

func (m *Metrics) observe(resource, method, code string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(resource, method, code).Inc()
	m.duration.WithLabelValues(resource, method).Observe(d.Seconds())
}

// breakerState sets the gauge (and makes both transition series exist).
func (m *Metrics) breakerState(open bool) {
	if m == nil {
		return
	}
	state, v := "closed", 0.0
	if open {
		state, v = "open", 1
	}
	m.circuitOpen.Set(v)
	m.transitions.WithLabelValues(state)
}

func (m *Metrics) transition(open bool) {
	if m == nil {
		return
	}
	state := "closed"
	if open {
		state = "open"
	}
	m.transitions.WithLabelValues(state).Inc()
}

// failures sets the count of failures since the last served request.
func (m *Metrics) failures(n int) {
	if m != nil {
		m.failedInRow.Set(float64(n))
	}
}

func (m *Metrics) heldBack() {
	if m != nil {
		m.held.Inc()
	}
}
