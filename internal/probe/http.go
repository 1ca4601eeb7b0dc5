package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

var errTooManyRedirects = errors.New("stopped after too many redirects")

// tlsConfig verifies the peer itself (VerifyConnection), so that a check with
// ignore_tls_errors still learns whether the chain is valid; *verified says so.
func (p *Prober) tlsConfig(serverName string, ignore bool, verified *bool) *tls.Config {
	return &tls.Config{
		ServerName:         serverName,
		InsecureSkipVerify: true, //nolint:gosec // verified below, in VerifyConnection
		MinVersion:         tls.VersionTLS10,
		VerifyConnection: func(cs tls.ConnectionState) error {
			opts := x509.VerifyOptions{Roots: p.RootCAs, DNSName: serverName, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			*verified = err == nil
			if ignore {
				return nil
			}
			return err
		},
	}
}

// checkHTTP requests the endpoint's URL on a fresh connection (as
// blackbox_exporter does: availability, not connection reuse), with the spec's
// method, headers, redirect rule and status rules, timing each phase.
func (p *Prober) checkHTTP(ctx context.Context, t Target) Outcome {
	var out Outcome
	s := t.Spec.HTTP
	if s == nil {
		s = &polycrate.HTTPSpec{} // the reference's defaults: plain http, GET /, 5 s
	}
	timeout := timeoutOf(s.Timeout, DefaultHTTPTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	scheme, port := "http", t.Port
	if s.TLS {
		scheme = "https"
	}
	if port == 0 {
		port = map[bool]int{true: 443, false: 80}[s.TLS]
	}
	path := s.Path
	if path == "" {
		path = "/"
	}
	target := scheme + "://" + hostPort(t.Address, port) + path
	method := s.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		out.Failure = fail(ErrInvalidSpec, err.Error())
		return out
	}
	ua := UserAgent
	if s.UserAgent != nil && *s.UserAgent != "" {
		ua = *s.UserAgent
	}
	req.Header.Set("User-Agent", ua)
	if s.Referer != nil && *s.Referer != "" {
		req.Header.Set("Referer", *s.Referer)
	}

	// Phase timings, as blackbox_exporter names them.
	var tr struct {
		dnsStart, dnsDone, connStart, connDone, tlsStart, tlsDone, gotConn, firstByte time.Time
		remote                                                                        string
	}
	trace := &httptrace.ClientTrace{
		DNSStart:          func(httptrace.DNSStartInfo) { tr.dnsStart = time.Now() },
		DNSDone:           func(httptrace.DNSDoneInfo) { tr.dnsDone = time.Now() },
		ConnectStart:      func(string, string) { tr.connStart = time.Now() },
		ConnectDone:       func(string, string, error) { tr.connDone = time.Now() },
		TLSHandshakeStart: func() { tr.tlsStart = time.Now() },
		TLSHandshakeDone:  func(tls.ConnectionState, error) { tr.tlsDone = time.Now() },
		GotConn: func(ci httptrace.GotConnInfo) {
			tr.gotConn = time.Now()
			tr.remote = ci.Conn.RemoteAddr().String()
		},
		GotFirstResponseByte: func() { tr.firstByte = time.Now() },
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))

	verified := false
	dialer := &net.Dialer{Resolver: p.Resolver}
	transport := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     p.tlsConfig(strings.Trim(t.Address, "[]"), s.IgnoreTLSErrors, &verified),
		DisableKeepAlives:   true,
		DisableCompression:  true,
		TLSHandshakeTimeout: timeout,
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        -1,
	}
	defer transport.CloseIdleConnections()
	maxRedirects := DefaultMaxRedirects
	if s.MaxRedirects != nil {
		maxRedirects = *s.MaxRedirects
	}
	follow := s.FollowRedirect == nil || *s.FollowRedirect
	client := &http.Client{Transport: transport, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if !follow {
			return http.ErrUseLastResponse
		}
		if len(via) > maxRedirects {
			return errTooManyRedirects
		}
		return nil
	}}

	resp, err := client.Do(req)
	r := &out.Result
	if tr.remote != "" {
		if host, _, splitErr := net.SplitHostPort(tr.remote); splitErr == nil {
			r.ResolvedIP, r.HTTPResolvedIP = polycrate.Ptr(host), polycrate.Ptr(host)
		}
	}
	if err != nil {
		if errors.Is(err, errTooManyRedirects) {
			out.Failure = fail(ErrTooManyRedirects, fmt.Sprintf("more than %d redirects", maxRedirects))
		} else {
			out.Failure = classify(err)
		}
		out.Phases = phases(tr.dnsStart, tr.dnsDone, tr.connStart, tr.connDone, tr.tlsStart, tr.tlsDone, tr.gotConn, tr.firstByte, time.Time{})
		fillTimings(r, out.Phases)
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	out.CertNotAfter = tlsFacts(r, resp.TLS, verified)
	code := resp.StatusCode
	r.StatusCode = &code

	size, matched, bodyErr := readBody(resp.Body, t.ExpectedBody)
	done := time.Now()
	r.HTTPResponseSizeBytes = polycrate.Ptr(int(size))
	out.Phases = phases(tr.dnsStart, tr.dnsDone, tr.connStart, tr.connDone, tr.tlsStart, tr.tlsDone, tr.gotConn, tr.firstByte, done)
	fillTimings(r, out.Phases)
	switch {
	case bodyErr != nil:
		out.Failure = bodyErr
	case !statusOK(s, code):
		if slices.Contains(s.BadStatusCodes, code) {
			out.Failure = fail(ErrBadStatus, fmt.Sprintf("status %d is listed as bad", code))
		} else {
			out.Failure = fail(ErrUnexpectedStatus, fmt.Sprintf("status %d, expected %s", code, expectedCodes(s)))
		}
	case t.ExpectedBody != "" && !matched:
		out.Failure = fail(ErrBodyMismatch, fmt.Sprintf("the body does not contain %q", truncate(t.ExpectedBody, 64)))
	}
	return out
}

// statusOK applies the spec's status rules: a bad code fails; otherwise the
// expected code or any accepted one passes (default 200).
func statusOK(s *polycrate.HTTPSpec, code int) bool {
	if slices.Contains(s.BadStatusCodes, code) {
		return false
	}
	expected := s.ExpectedStatusCode
	if expected == 0 {
		expected = http.StatusOK
	}
	return code == expected || slices.Contains(s.AcceptedStatusCodes, code)
}

func expectedCodes(s *polycrate.HTTPSpec) string {
	expected := s.ExpectedStatusCode
	if expected == 0 {
		expected = http.StatusOK
	}
	all := append([]int{expected}, s.AcceptedStatusCodes...)
	slices.Sort(all)
	return strings.Trim(fmt.Sprint(slices.Compact(all)), "[]")
}

// readBody reads at most MaxBodyBytes, looking for expected on the way (across
// chunk borders); it keeps no more than one buffer and the expected string.
func readBody(body io.Reader, expected string) (int64, bool, *Failure) {
	buf := make([]byte, 16<<10)
	var tail []byte
	want := []byte(expected)
	matched := len(want) == 0
	var size int64
	for {
		n, err := body.Read(buf)
		if n > 0 {
			size += int64(n)
			if !matched {
				window := append(tail, buf[:n]...) //nolint:gocritic // a new slice on purpose
				matched = bytes.Contains(window, want)
				if keep := len(want) - 1; len(window) > keep {
					tail = append(tail[:0], window[len(window)-keep:]...)
				} else {
					tail = window
				}
			}
			if size > MaxBodyBytes {
				return size, matched, fail(ErrBodyTooLarge, fmt.Sprintf("more than %d bytes", MaxBodyBytes))
			}
		}
		if errors.Is(err, io.EOF) {
			return size, matched, nil
		}
		if err != nil {
			return size, matched, classify(err)
		}
	}
}

// phases are blackbox_exporter's probe_http_duration_seconds phases.
func phases(dnsStart, dnsDone, connStart, connDone, tlsStart, tlsDone, gotConn, firstByte, end time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	span := func(name string, a, b time.Time) {
		if !a.IsZero() && !b.IsZero() && !b.Before(a) {
			out[name] = b.Sub(a)
		}
	}
	span("resolve", dnsStart, dnsDone)
	span("connect", connStart, connDone)
	span("tls", tlsStart, tlsDone)
	span("processing", gotConn, firstByte)
	span("transfer", firstByte, end)
	return out
}

// fillTimings writes the phases the API has fields for, in milliseconds.
func fillTimings(r *polycrate.CheckResult, p map[string]time.Duration) {
	ms := func(name string) *int {
		if d, ok := p[name]; ok {
			return polycrate.Ptr(int(d.Milliseconds()))
		}
		return nil
	}
	r.HTTPDNSLookupMS, r.HTTPTCPConnectMS, r.HTTPTLSHandshakeMS = ms("resolve"), ms("connect"), ms("tls")
	if d, ok := p["processing"]; ok {
		ttfb := d + p["connect"] + p["tls"] + p["resolve"]
		r.HTTPTimeToFirstByteMS = polycrate.Ptr(int(ttfb.Milliseconds()))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// URL is the address an HTTP check of t requests.
func URL(t Target) string {
	s := t.Spec.HTTP
	tlsOn := s != nil && s.TLS
	scheme, port := "http", t.Port
	if tlsOn {
		scheme = "https"
	}
	if port == 0 {
		port = map[bool]int{true: 443, false: 80}[tlsOn]
	}
	path := "/"
	if s != nil && s.Path != "" {
		path = s.Path
	}
	return scheme + "://" + hostPort(t.Address, port) + path
}
