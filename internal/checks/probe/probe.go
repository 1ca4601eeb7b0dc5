// Package probe runs one check of an endpoint — http, tcp, icmp or dns, each by
// its typed spec (reference core §6.3) — and describes the outcome as the API's
// CheckResultInputRequest. It knows nothing of Kubernetes or scheduling
// (internal/checks/monitoring plans the checks); every check ends within its timeout and
// reads a bounded amount, whatever the target does.
package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Target is one assigned endpoint with what its check needs.
type Target struct {
	// ID is the endpoint's API id (the result's endpoint_id).
	ID      string
	Name    string
	Kind    string // http | tcp | icmp | dns
	Address string // remote_address: host name or IP
	Port    int    // remote_port; 0: the kind's default
	Spec    polycrate.EndpointSpec
	// ExpectedBody must be contained in an HTTP answer (seed Beispiel 4; carried by
	// the Endpoint CR, not by the API's spec).
	ExpectedBody string
}

// Defaults of the reference's spec (core §6.3), used where a field is unset.
const (
	DefaultHTTPTimeout  = 5 * time.Second
	DefaultTCPTimeout   = 10 * time.Second
	DefaultDNSTimeout   = 10 * time.Second
	DefaultICMPTimeout  = time.Second
	DefaultInterval     = 60 * time.Second
	DefaultMaxRedirects = 10
	DefaultRetryCount   = 5
	DefaultRetrySleep   = time.Second
	// MaxBodyBytes is what an HTTP check reads of an answer at most; a longer body
	// fails the check with body_too_large (an endless body must not keep a worker).
	MaxBodyBytes = 10 << 20
	// MaxBannerBytes is what a TCP check reads of a banner or an answer.
	MaxBannerBytes = 4 << 10
	// UserAgent is sent by HTTP checks without spec.http.user_agent.
	UserAgent = "polycrate-operator/monitoring"
)

// Error categories (the API's http_error_category, used for every kind).
const (
	CategoryTimeout       = "timeout"
	CategoryConnection    = "connection"
	CategoryDNS           = "dns"
	CategoryNetwork       = "network"
	CategoryResponse      = "response"
	CategoryConfiguration = "configuration"
	CategoryOther         = "other"
)

// Failure is why a check failed: the API's error_code and error_name, and the
// category. Codes are stable (docs/monitoring.md lists them).
type Failure struct {
	Code     int
	Name     string
	Category string
	Detail   string
}

func (f *Failure) Error() string {
	if f.Detail == "" {
		return f.Name
	}
	return f.Name + ": " + f.Detail
}

// The failures, by error_code. 1xx: timeouts and DNS; 2xx: connections; 3xx: TLS;
// 4xx: the answer; 5xx: the check's configuration or the host's permissions;
// 9xx: other.
var (
	ErrTimeout            = Failure{Code: 100, Name: "timeout", Category: CategoryTimeout}
	ErrDNSNotFound        = Failure{Code: 110, Name: "dns_not_found", Category: CategoryDNS}
	ErrDNSFailure         = Failure{Code: 111, Name: "dns_failure", Category: CategoryDNS}
	ErrConnectionRefused  = Failure{Code: 200, Name: "connection_refused", Category: CategoryConnection}
	ErrConnectionReset    = Failure{Code: 201, Name: "connection_reset", Category: CategoryConnection}
	ErrConnectionClosed   = Failure{Code: 202, Name: "connection_closed", Category: CategoryConnection}
	ErrHostUnreachable    = Failure{Code: 210, Name: "host_unreachable", Category: CategoryNetwork}
	ErrNetwork            = Failure{Code: 211, Name: "network_error", Category: CategoryNetwork}
	ErrTLSExpired         = Failure{Code: 300, Name: "tls_certificate_expired", Category: CategoryConnection}
	ErrTLSHostname        = Failure{Code: 301, Name: "tls_hostname_mismatch", Category: CategoryConnection}
	ErrTLSUnknownCA       = Failure{Code: 302, Name: "tls_unknown_authority", Category: CategoryConnection}
	ErrTLSHandshake       = Failure{Code: 303, Name: "tls_handshake_failed", Category: CategoryConnection}
	ErrUnexpectedStatus   = Failure{Code: 400, Name: "unexpected_status_code", Category: CategoryResponse}
	ErrBadStatus          = Failure{Code: 401, Name: "bad_status_code", Category: CategoryResponse}
	ErrBodyMismatch       = Failure{Code: 402, Name: "body_mismatch", Category: CategoryResponse}
	ErrBodyTooLarge       = Failure{Code: 403, Name: "body_too_large", Category: CategoryResponse}
	ErrTooManyRedirects   = Failure{Code: 404, Name: "too_many_redirects", Category: CategoryResponse}
	ErrResponseMismatch   = Failure{Code: 410, Name: "response_mismatch", Category: CategoryResponse}
	ErrDNSRcode           = Failure{Code: 420, Name: "dns_unexpected_rcode", Category: CategoryResponse}
	ErrDNSResultsMismatch = Failure{Code: 421, Name: "dns_results_mismatch", Category: CategoryResponse}
	ErrDNSSECInvalid      = Failure{Code: 422, Name: "dnssec_not_validated", Category: CategoryResponse}
	ErrPacketLoss         = Failure{Code: 430, Name: "packet_loss", Category: CategoryNetwork}
	ErrInvalidSpec        = Failure{Code: 500, Name: "invalid_spec", Category: CategoryConfiguration}
	ErrNotPermitted       = Failure{Code: 501, Name: "icmp_not_permitted", Category: CategoryConfiguration}
	ErrOther              = Failure{Code: 900, Name: "error", Category: CategoryOther}
)

// fail returns a copy of f with detail.
func fail(f Failure, detail string) *Failure {
	f.Detail = detail
	return &f
}

// Outcome is one check: the result for the API and the figures metrics need
// beyond it.
type Outcome struct {
	Result   polycrate.CheckResult
	Duration time.Duration
	// Phases are the HTTP phase durations (resolve, connect, tls, processing,
	// transfer), summed over the redirects followed.
	Phases Phases
	// Redirects is how many redirects an HTTP check followed.
	Redirects int
	// CertNotAfter is the earliest expiry of the peer's chain (TLS checks).
	CertNotAfter time.Time
	Failure      *Failure
}

// Prober runs checks. The zero value uses the system's roots and resolver.
type Prober struct {
	// RootCAs verifies TLS peers; nil: the system's roots.
	RootCAs *x509.CertPool
	// Resolver resolves host names; nil: net.DefaultResolver.
	Resolver *net.Resolver
	// ICMP says how echo requests are sent (unprivileged ping sockets, raw sockets).
	ICMP ICMPMode
}

// ResolverVia is a resolver that asks the DNS server at addr (host:port) for
// every name (Go's resolver: UDP, TCP when the answer is truncated), whatever
// the host's /etc/resolv.conf says.
func ResolverVia(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// Run checks t once (with the spec's retries): it returns when the check is done
// or ctx ends, never later than the kind's timeout per attempt.
func (p *Prober) Run(ctx context.Context, t Target) Outcome {
	attempts, sleep := 1, time.Duration(0)
	if r := t.Spec.Retry; r != nil && r.Enabled {
		attempts = r.Count
		if attempts <= 0 {
			attempts = DefaultRetryCount
		}
		sleep = DefaultRetrySleep
		if r.Sleep > 0 {
			sleep = time.Duration(r.Sleep * float64(time.Second))
		}
	}
	var out Outcome
	for i := 0; i < attempts; i++ {
		out = p.runOnce(ctx, t)
		if out.Failure == nil || out.Failure.Category == CategoryConfiguration || i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(sleep):
		}
	}
	return out
}

func (p *Prober) runOnce(ctx context.Context, t Target) Outcome {
	start := time.Now()
	var out Outcome
	switch t.Kind {
	case "http", "":
		out = p.checkHTTP(ctx, t)
	case "tcp":
		out = p.checkTCP(ctx, t)
	case "dns":
		out = p.checkDNS(ctx, t)
	case "icmp":
		out = p.checkICMP(ctx, t)
	default:
		out.Failure = fail(ErrInvalidSpec, "unknown kind "+t.Kind)
	}
	out.Duration = time.Since(start)
	r := &out.Result
	r.EndpointID = t.ID
	at := start.UTC()
	r.CheckedAt = &at
	r.DurationMS = polycrate.Ptr(int(out.Duration.Milliseconds()))
	r.Success = out.Failure == nil
	if f := out.Failure; f != nil {
		r.ErrorCode, r.ErrorName, r.HTTPErrorCategory = f.Code, f.Name, polycrate.Ptr(f.Category)
	}
	return out
}

// timeoutOf is the spec's timeout in seconds, or def.
func timeoutOf(seconds int, def time.Duration) time.Duration {
	if seconds > 0 {
		return time.Duration(seconds) * time.Second
	}
	return def
}

// classify maps a network or TLS error to its failure.
func classify(err error) *Failure {
	if err == nil {
		return nil
	}
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	msg := err.Error()
	var dnsErr *net.DNSError
	var certInvalid x509.CertificateInvalidError
	var hostErr x509.HostnameError
	var unknownCA x509.UnknownAuthorityError
	var tlsVerify *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		return fail(ErrTimeout, msg)
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return fail(ErrDNSNotFound, dnsErr.Name)
		}
		if dnsErr.IsTimeout {
			return fail(ErrTimeout, msg)
		}
		return fail(ErrDNSFailure, msg)
	case errors.As(err, &certInvalid) && certInvalid.Reason == x509.Expired:
		return fail(ErrTLSExpired, certInvalid.Detail)
	case errors.As(err, &hostErr):
		return fail(ErrTLSHostname, msg)
	case errors.As(err, &unknownCA):
		return fail(ErrTLSUnknownCA, msg)
	case errors.As(err, &tlsVerify) || errors.As(err, &certInvalid) || errors.As(err, &recordErr) || errors.As(err, &alert):
		return fail(ErrTLSHandshake, msg)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fail(ErrConnectionRefused, msg)
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return fail(ErrConnectionReset, msg)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fail(ErrConnectionClosed, msg)
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return fail(ErrHostUnreachable, msg)
	case strings.Contains(msg, "tls: "):
		return fail(ErrTLSHandshake, msg)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return fail(ErrNetwork, msg)
	}
	return fail(ErrOther, msg)
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}

func splitHost(hostport string) (string, string, error) { return net.SplitHostPort(hostport) }

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// hostPort joins the address and port (IPv6 literals bracketed).
func hostPort(addr string, port int) string {
	return net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(port))
}

// tlsFacts fills the TLS fields of r from a connection state: version, the leaf's
// issuer and subject (common names), validity, days until the earliest expiry of
// the chain, and returns that expiry.
func tlsFacts(r *polycrate.CheckResult, cs *tls.ConnectionState, verified bool) time.Time {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return time.Time{}
	}
	r.HTTPTLSVersion = polycrate.Ptr(tlsVersion(cs.Version))
	leaf := cs.PeerCertificates[0]
	r.HTTPTLSIssuer = polycrate.Ptr(leaf.Issuer.CommonName)
	r.HTTPTLSSubject = polycrate.Ptr(leaf.Subject.CommonName)
	earliest := leaf.NotAfter
	for _, c := range cs.PeerCertificates[1:] {
		if c.NotAfter.Before(earliest) {
			earliest = c.NotAfter
		}
	}
	na := earliest.UTC()
	r.SSLCertNotAfter = &na
	r.HTTPTLSDaysUntilExpiry = polycrate.Ptr(int(time.Until(earliest).Hours() / 24))
	r.HTTPTLSValid = polycrate.Ptr(verified && time.Now().Before(earliest))
	return earliest
}

func tlsVersion(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "TLS 1.0"
	case tls.VersionTLS11:
		return "TLS 1.1"
	case tls.VersionTLS12:
		return "TLS 1.2"
	case tls.VersionTLS13:
		return "TLS 1.3"
	}
	return tls.VersionName(v)
}
