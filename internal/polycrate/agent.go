package polycrate

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// The three agent operations (/api/v1/agent/…): the health report registers the
// operator as an agent and resolves its workspace; the endpoint list returns what
// the API assigned to it; error reports.

// HealthReport is AgentHealthDataRequest; every field is optional.
type HealthReport struct {
	ReportedAgentID string         `json:"reported_agent_id,omitempty"`
	Version         string         `json:"version,omitempty"`
	Kind            string         `json:"kind,omitempty"`   // agent | operator
	Status          string         `json:"status,omitempty"` // healthy | degraded | unhealthy | critical
	UptimeSeconds   *int64         `json:"uptime_seconds,omitempty"`
	StartTime       *time.Time     `json:"start_time,omitempty"`
	APIConnected    *bool          `json:"api_connected,omitempty"`
	StorageHealthy  *bool          `json:"storage_healthy,omitempty"`
	ReportedAt      *time.Time     `json:"reported_at,omitempty"`
	Warnings        []string       `json:"warnings,omitempty"`
	CriticalErrors  []string       `json:"critical_errors,omitempty"`
	SystemInfo      map[string]any `json:"system_info,omitempty"`
	CheckSummary    *CheckSummary  `json:"check_summary,omitempty"`
	CheckResults    []CheckResult  `json:"check_results,omitempty"`
}

// CheckSummary is CheckSummaryRequest.
type CheckSummary struct {
	MonitoredEndpoints    int     `json:"monitored_endpoints"`
	ChecksPerMinute       float64 `json:"checks_per_minute"`
	ChecksInQueue         int     `json:"checks_in_queue"`
	FailedChecks          int     `json:"failed_checks"`
	SuccessfulChecks      int     `json:"successful_checks"`
	ChecksSinceLastReport int     `json:"checks_since_last_report"`
	TotalChecks           int     `json:"total_checks"`
}

// CheckResult is CheckResultInputRequest: one check's outcome, sent inside the
// health report (the only channel the API has for results).
type CheckResult struct {
	EndpointID      string     `json:"endpoint_id"`
	Success         bool       `json:"success"`
	CheckedAt       *time.Time `json:"checked_at,omitempty"`
	StatusCode      *int       `json:"status_code,omitempty"`
	ErrorCode       int        `json:"error_code,omitempty"`
	ErrorName       string     `json:"error_name,omitempty"`
	DurationMS      *int       `json:"duration_ms,omitempty"`
	SSLCertNotAfter *time.Time `json:"ssl_cert_not_after,omitempty"`
	ResolvedIP      *string    `json:"resolved_ip,omitempty"`

	HTTPDNSLookupMS        *int    `json:"http_dns_lookup_ms,omitempty"`
	HTTPTCPConnectMS       *int    `json:"http_tcp_connect_ms,omitempty"`
	HTTPTLSHandshakeMS     *int    `json:"http_tls_handshake_ms,omitempty"`
	HTTPTimeToFirstByteMS  *int    `json:"http_time_to_first_byte_ms,omitempty"`
	HTTPResponseSizeBytes  *int    `json:"http_response_size_bytes,omitempty"`
	HTTPTLSVersion         *string `json:"http_tls_version,omitempty"`
	HTTPResolvedIP         *string `json:"http_resolved_ip,omitempty"`
	HTTPErrorCategory      *string `json:"http_error_category,omitempty"`
	HTTPTLSValid           *bool   `json:"http_tls_valid,omitempty"`
	HTTPTLSDaysUntilExpiry *int    `json:"http_tls_days_until_expiry,omitempty"`
	HTTPTLSIssuer          *string `json:"http_tls_issuer,omitempty"`
	HTTPTLSSubject         *string `json:"http_tls_subject,omitempty"`

	ICMPRTTMS             *float64 `json:"icmp_rtt_ms,omitempty"`
	ICMPMinRTTMS          *float64 `json:"icmp_min_rtt_ms,omitempty"`
	ICMPMaxRTTMS          *float64 `json:"icmp_max_rtt_ms,omitempty"`
	ICMPPacketLossPercent *float64 `json:"icmp_packet_loss_percent,omitempty"`
	ICMPPacketsSent       *int     `json:"icmp_packets_sent,omitempty"`
	ICMPPacketsReceived   *int     `json:"icmp_packets_received,omitempty"`

	TCPConnected       *bool   `json:"tcp_connected,omitempty"`
	TCPBanner          *string `json:"tcp_banner,omitempty"`
	TCPResponseMatched *bool   `json:"tcp_response_matched,omitempty"`

	DNSRcode       *string  `json:"dns_rcode,omitempty"`
	DNSRecords     []string `json:"dns_records,omitempty"`
	DNSMatched     *bool    `json:"dns_matched,omitempty"`
	DNSQueryTimeMS *int     `json:"dns_query_time_ms,omitempty"`
	DNSProtocol    *string  `json:"dns_protocol,omitempty"`
	DNSRecordType  *string  `json:"dns_record_type,omitempty"`
	DNSDNSSECValid *bool    `json:"dns_dnssec_valid,omitempty"`
}

// HealthResponse is AgentHealthSubmissionResponse: who the token belongs to.
type HealthResponse struct {
	Status                        string  `json:"status"`
	AgentID                       string  `json:"agent_id"`
	ReportedAgentID               string  `json:"reported_agent_id"`
	PopName                       string  `json:"pop_name"`
	PopID                         *string `json:"pop_id"`
	EndpointMonitoringMode        string  `json:"endpoint_monitoring_mode"`
	OperatorGlobalEndpointMonitor bool    `json:"operator_global_endpoint_monitor"`
	WorkspaceID                   string  `json:"workspace_id"`
	WorkspaceName                 string  `json:"workspace_name"`
	OrganizationID                *string `json:"organization_id"`
	OrganizationName              *string `json:"organization_name"`
}

// AgentEndpoint is one endpoint assigned to the agent.
type AgentEndpoint struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	Kind          string        `json:"kind"`
	RemoteAddress string        `json:"remote_address"`
	RemotePort    *int          `json:"remote_port"`
	Spec          *EndpointSpec `json:"spec"`
	// Workspace and Organization are minimal {id, name} maps.
	Workspace    map[string]string `json:"workspace"`
	Organization map[string]string `json:"organization"`
}

// ErrorReport is AgentErrorReportRequestRequest; every field is required.
type ErrorReport struct {
	AgentID        string           `json:"agent_id"` // the reported agent id
	Timestamp      time.Time        `json:"timestamp"`
	TotalErrors    int              `json:"total_errors"`
	ErrorCounts    map[string]int   `json:"error_counts"`
	CriticalErrors []string         `json:"critical_errors"`
	RecentErrors   []map[string]any `json:"recent_errors"`
	SystemInfo     map[string]any   `json:"system_info"`
}

// ErrorReportResponse is AgentErrorSubmissionResponse.
type ErrorReportResponse struct {
	Status  string `json:"status"`
	AgentID string `json:"agent_id"`
	ErrorID string `json:"error_id"`
}

// ReportHealth sends a health report (POST /api/v1/agent/health/, 201). The first
// report registers the agent.
func (c *Client) ReportHealth(ctx context.Context, r HealthReport) (*HealthResponse, error) {
	out := &HealthResponse{}
	return out, c.send(ctx, ResourceHealth, http.MethodPost, "/api/v1/agent/health/", r, out)
}

// AssignedEndpoints lists the endpoints the API assigned to an agent (a plain
// array; the X-Agent-ID header names the agent).
func (c *Client) AssignedEndpoints(ctx context.Context, agentID string) ([]AgentEndpoint, error) {
	b, err := c.do(ctx, call{resource: "agent/endpoints", method: http.MethodGet, path: "/api/v1/agent/endpoints/",
		header: http.Header{"X-Agent-Id": []string{agentID}}, query: url.Values{}})
	if err != nil {
		return nil, err
	}
	var out []AgentEndpoint
	return out, decode(b, &out, http.MethodGet, "/api/v1/agent/endpoints/")
}

// ReportErrors sends an error report (POST /api/v1/agent/errors/, 201).
func (c *Client) ReportErrors(ctx context.Context, r ErrorReport) (*ErrorReportResponse, error) {
	out := &ErrorReportResponse{}
	return out, c.send(ctx, "agent/errors", http.MethodPost, "/api/v1/agent/errors/", r, out)
}

// Agent is the read-only agent model.
type Agent struct {
	Meta
	Kind            string     `json:"kind"`
	Version         *string    `json:"version"`
	IsActive        bool       `json:"is_active"`
	LastSeen        *time.Time `json:"last_seen"`
	ReportedAgentID *string    `json:"reported_agent_id"`
	SourcePop       *Ref       `json:"source_pop"`
	K8sApp          *string    `json:"k8s_app"`
}

// AgentRow is a row of GET /api/v1/agents/.
type AgentRow struct {
	Row
	Kind     string     `json:"kind"`
	Version  *string    `json:"version"`
	IsActive bool       `json:"is_active"`
	LastSeen *time.Time `json:"last_seen"`
}

// Assignment is AgentEndpointAssignment: one endpoint of an agent and its checks.
type Assignment struct {
	EndpointID          string     `json:"endpoint_id"`
	EndpointName        string     `json:"endpoint_name"`
	EndpointKind        string     `json:"endpoint_kind"`
	LastCheckAt         *time.Time `json:"last_check_at"`
	LastCheckSuccess    *bool      `json:"last_check_success"`
	LastCheckStatusCode *int       `json:"last_check_status_code"`
	LastCheckErrorName  string     `json:"last_check_error_name"`
	ChecksExecuted      int        `json:"checks_executed"`
	ChecksSuccessful    int        `json:"checks_successful"`
	ChecksFailed        int        `json:"checks_failed"`
	SuccessRate         float64    `json:"success_rate"`
}

// ResourceHealth is the metrics label of the health report.
const ResourceHealth = "agent/health"

// Agents is /api/v1/agents/ (read-only: Get and List).
func (c *Client) Agents() Resource[Agent, AgentRow, struct{}] {
	return newResource[Agent, AgentRow, struct{}](c, "agents", "/api/v1/agents/")
}

// Assignments lists an agent's endpoint assignments with their check status.
func (c *Client) Assignments(ctx context.Context, agentID string) ([]Assignment, error) {
	return listAll[Assignment](ctx, c, "agents", "/api/v1/agents/"+url.PathEscape(agentID)+"/assignments/", nil)
}
