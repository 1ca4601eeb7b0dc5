package polycrate

import (
	"fmt"
)

// EndpointSpec is the typed check spec; the operator fills HTTP.
type EndpointSpec struct {
	Retry *RetrySpec `json:"retry,omitempty"`
	HTTP  *HTTPSpec  `json:"http,omitempty"`
}

// RetrySpec retries a failed check.
type RetrySpec struct {
	Enabled bool    `json:"enabled"`
	Count   int     `json:"count,omitempty"`
	Sleep   float64 `json:"sleep,omitempty"`
}

// HTTPSpec is EndpointHTTPSpec. Timeouts and intervals are seconds.
type HTTPSpec struct {
	Path                string `json:"path,omitempty"`
	TLS                 bool   `json:"tls"`
	Timeout             int    `json:"timeout,omitempty"`
	Interval            int    `json:"interval,omitempty"`
	Method              string `json:"method,omitempty"`
	FollowRedirect      *bool  `json:"follow_redirect,omitempty"`
	ExpectedStatusCode  int    `json:"expected_status_code,omitempty"`
	AcceptedStatusCodes []int  `json:"accepted_status_codes,omitempty"`
	IgnoreTLSErrors     bool   `json:"ignore_tls_errors,omitempty"`
}

// Endpoint is the detail model of /api/v1/endpoints/.
type Endpoint struct {
	Meta
	Kind                 string        `json:"kind"`
	RemoteAddress        string        `json:"remote_address"`
	RemotePort           *int          `json:"remote_port"`
	Spec                 *EndpointSpec `json:"spec"`
	K8sCluster           *Ref          `json:"k8s_cluster"`
	K8sApp               *Ref          `json:"k8s_app"`
	DoNotMonitor         bool          `json:"do_not_monitor"`
	MaxAgentsPerEndpoint *int          `json:"max_agents_per_endpoint"`
	CreatedByComponent   *string       `json:"created_by_component"`
	Agents               []string      `json:"agents"`
}

// EndpointRow is a list row.
type EndpointRow struct {
	Row
	Kind          string `json:"kind"`
	RemoteAddress string `json:"remote_address"`
}

// EndpointRequest is EndpointRequest. Seed-only data (an expected body, the
// source object) travels in Labels and Annotations.
type EndpointRequest struct {
	Common
	Name                 string        `json:"name"`
	RemoteAddress        string        `json:"remote_address"`
	Kind                 string        `json:"kind,omitempty"`
	RemotePort           *int          `json:"remote_port,omitempty"`
	Spec                 *EndpointSpec `json:"spec,omitempty"`
	K8sCluster           *string       `json:"k8s_cluster,omitempty"`
	K8sApp               *string       `json:"k8s_app,omitempty"`
	DoNotMonitor         bool          `json:"do_not_monitor,omitempty"`
	MaxAgentsPerEndpoint *int          `json:"max_agents_per_endpoint,omitempty"`
	CreatedByComponent   string        `json:"created_by_component,omitempty"`
}

// Endpoints is /api/v1/endpoints/.
func (c *Client) Endpoints() Resource[Endpoint, EndpointRow, EndpointRequest] {
	return newResource[Endpoint, EndpointRow, EndpointRequest](c, "endpoints", "/api/v1/endpoints/")
}

// findOne returns the only row, nil for none, an error for several.
func findOne[L any](rows []L, err error) (*L, error) {
	if err != nil {
		return nil, err
	}
	switch len(rows) {
	case 0:
		return nil, nil
	case 1:
		return &rows[0], nil
	default:
		return nil, fmt.Errorf("%d objects match one natural key; expected at most one", len(rows))
	}
}
