package polycrate

import (
	"fmt"
)

// EndpointSpec is the typed check spec (reference core §6.3): one sub-spec per
// check kind. The sync fills HTTP; the monitoring agent reads all four. Unset
// fields take the reference's defaults (the Default* constants) when checked.
type EndpointSpec struct {
	Retry *RetrySpec `json:"retry,omitempty"`
	HTTP  *HTTPSpec  `json:"http,omitempty"`
	TCP   *TCPSpec   `json:"tcp,omitempty"`
	ICMP  *ICMPSpec  `json:"icmp,omitempty"`
	DNS   *DNSSpec   `json:"dns,omitempty"`
}

// RetrySpec retries a failed check: count attempts in all, sleep seconds apart.
type RetrySpec struct {
	Enabled bool    `json:"enabled"`
	Count   int     `json:"count,omitempty"`
	Sleep   float64 `json:"sleep,omitempty"`
}

// HTTPSpec is EndpointHTTPSpec. Timeouts and intervals are seconds.
type HTTPSpec struct {
	Path                string  `json:"path,omitempty"`
	TLS                 bool    `json:"tls"`
	AlertTLSExpiry      *bool   `json:"alert_tls_expiry,omitempty"`
	Timeout             int     `json:"timeout,omitempty"`
	Interval            int     `json:"interval,omitempty"`
	Method              string  `json:"method,omitempty"`
	UserAgent           *string `json:"user_agent,omitempty"`
	Referer             *string `json:"referer,omitempty"`
	FollowRedirect      *bool   `json:"follow_redirect,omitempty"`
	MaxRedirects        *int    `json:"max_redirects,omitempty"`
	ExpectedStatusCode  int     `json:"expected_status_code,omitempty"`
	AcceptedStatusCodes []int   `json:"accepted_status_codes,omitempty"`
	BadStatusCodes      []int   `json:"bad_status_codes,omitempty"`
	IgnoreTLSErrors     bool    `json:"ignore_tls_errors,omitempty"`
}

// TCPSpec is EndpointTCPSpec.
type TCPSpec struct {
	TLS              bool   `json:"tls,omitempty"`
	IgnoreTLSErrors  bool   `json:"ignore_tls_errors,omitempty"`
	AlertExpiryDays  int    `json:"alert_expiry_days,omitempty"`
	Timeout          int    `json:"timeout,omitempty"`
	Interval         int    `json:"interval,omitempty"`
	SendString       string `json:"send_string,omitempty"`
	ExpectedResponse string `json:"expected_response,omitempty"`
}

// ICMPSpec is EndpointICMPSpec (timeout and interval are float seconds).
type ICMPSpec struct {
	TTL      int     `json:"ttl,omitempty"`
	Timeout  float64 `json:"timeout,omitempty"`
	Interval float64 `json:"interval,omitempty"`
}

// DNSSpec is EndpointDNSSpec.
type DNSSpec struct {
	Timeout         int      `json:"timeout,omitempty"`
	Interval        int      `json:"interval,omitempty"`
	RecordName      string   `json:"record_name,omitempty"`
	RecordType      string   `json:"record_type,omitempty"`
	Protocol        string   `json:"protocol,omitempty"` // udp | tcp
	ExpectedResults []string `json:"expected_results,omitempty"`
	ExpectedRcode   string   `json:"expected_rcode,omitempty"`
	TLSEnabled      bool     `json:"tls_enabled,omitempty"`
	TLSIgnoreErrors bool     `json:"tls_ignore_errors,omitempty"`
	DNSSEC          bool     `json:"dnssec,omitempty"`
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
