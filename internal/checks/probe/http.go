package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

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
//
// Redirects are followed hop by hop, each hop on its own connection whose TLS
// server name and certificate check are those of the hop's own host (as a
// browser and blackbox_exporter verify them). A redirect whose status code the
// spec names — expected, accepted or bad — ends the check with that answer: a
// user who expects a 302 means the first answer, not the page behind it. The
// phases are summed over the hops (as blackbox_exporter sums them), and the
// outcome counts the redirects followed.
func (p *Prober) checkHTTP(ctx context.Context, t Target) Outcome {
	var out Outcome
	s := t.Spec.HTTP
	if s == nil {
		s = &polycrate.HTTPSpec{} // the reference's defaults: plain http, GET /, 5 s
	}
	timeout := timeoutOf(s.Timeout, DefaultHTTPTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	u, err := url.Parse(URL(t))
	if err != nil {
		out.Failure = fail(ErrInvalidSpec, err.Error())
		return out
	}
	method, ua, referer, maxRedirects, follow := requestOptions(s)

	r := &out.Result
	var earlier Phases // the phases of the hops before this one, added up
	for {
		h := hop{prober: p, ignoreTLS: s.IgnoreTLSErrors, timeout: timeout}
		resp, err := h.do(ctx, method, u, ua, referer)
		if out.Redirects == 0 && h.remote != "" {
			if host, _, splitErr := net.SplitHostPort(h.remote); splitErr == nil {
				r.ResolvedIP, r.HTTPResolvedIP = polycrate.Ptr(host), polycrate.Ptr(host)
			}
		}
		if err != nil {
			out.Failure = classify(err)
			last := h.times(time.Time{})
			out.Phases = earlier.Plus(last)
			fillTimings(r, out.Phases, earlier, last)
			return out
		}
		code := resp.StatusCode
		if next, ok := redirectTarget(resp, follow, s); ok {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRedirectBody))
			_ = resp.Body.Close()
			last := h.times(time.Now())
			if out.Redirects >= maxRedirects {
				out.Failure = fail(ErrTooManyRedirects, fmt.Sprintf("more than %d redirects", maxRedirects))
				out.Phases = earlier.Plus(last)
				fillTimings(r, out.Phases, earlier, last)
				return out
			}
			if next.Scheme != "http" && next.Scheme != "https" {
				// As Go's client and browsers: a redirect leaves the web (ftp:, mailto:, a bare host).
				out.Failure = fail(ErrOther, fmt.Sprintf("status %d redirects to %q, not an http or https URL", code, next.String()))
				r.StatusCode = &code
				out.Phases = earlier.Plus(last)
				fillTimings(r, out.Phases, earlier, last)
				return out
			}
			earlier = earlier.Plus(last)
			out.Redirects++
			method = redirectMethod(method, code)
			if s.Referer == nil || *s.Referer == "" {
				referer = refererFor(u, next)
			}
			u = next
			continue
		}
		defer func() { _ = resp.Body.Close() }()
		out.CertNotAfter = tlsFacts(r, resp.TLS, h.verified)
		r.StatusCode = &code
		size, matched, bodyErr := readBody(resp.Body, t.ExpectedBody)
		r.HTTPResponseSizeBytes = polycrate.Ptr(int(size))
		last := h.times(time.Now())
		out.Phases = earlier.Plus(last)
		fillTimings(r, out.Phases, earlier, last)
		out.Failure = judge(s, code, bodyErr, t.ExpectedBody, matched)
		return out
	}
}

// requestOptions are the spec's request settings with the reference's defaults.
func requestOptions(s *polycrate.HTTPSpec) (method, ua, referer string, maxRedirects int, follow bool) {
	method, ua, maxRedirects = s.Method, UserAgent, DefaultMaxRedirects
	if method == "" {
		method = http.MethodGet
	}
	if s.UserAgent != nil && *s.UserAgent != "" {
		ua = *s.UserAgent
	}
	if s.Referer != nil {
		referer = *s.Referer
	}
	if s.MaxRedirects != nil {
		maxRedirects = *s.MaxRedirects
	}
	return method, ua, referer, maxRedirects, s.FollowRedirect == nil || *s.FollowRedirect
}

// judge is the verdict on the answer the check ended on: the body read, then
// the status rules, then the expected body.
func judge(s *polycrate.HTTPSpec, code int, bodyErr *Failure, expectedBody string, matched bool) *Failure {
	switch {
	case bodyErr != nil:
		return bodyErr
	case !statusOK(s, code):
		if slices.Contains(s.BadStatusCodes, code) {
			return fail(ErrBadStatus, fmt.Sprintf("status %d is listed as bad", code))
		}
		return fail(ErrUnexpectedStatus, fmt.Sprintf("status %d, expected %s", code, expectedCodes(s)))
	case expectedBody != "" && !matched:
		return fail(ErrBodyMismatch, fmt.Sprintf("the body does not contain %q", truncate(expectedBody, 64)))
	}
	return nil
}

// maxRedirectBody is what a check reads of a redirect's body before it closes
// the connection (the body of a redirect is never checked).
const maxRedirectBody = 64 << 10

// hop is one request of a check: its own connection (no keep-alive, no TLS
// session reuse), verified against its own host, with its phase times.
type hop struct {
	prober    *Prober
	ignoreTLS bool
	timeout   time.Duration
	verified  bool

	dnsStart, dnsDone, connStart, connDone, tlsStart, tlsDone, gotConn, firstByte time.Time
	remote                                                                        string
}

// do sends one request to u on a connection of its own and returns the answer
// without following it. It speaks HTTP/1.1 itself with the standard library's
// request writer and response reader on one connection and one goroutine: no
// http.Transport, whose connection pool, dialling goroutine and read and write
// loops a check that never reuses a connection does not need (they were most of
// a check's CPU besides the kernel's; docs/monitoring.md, "Performance").
// Keep-alive probes are off (the connection lives for one request); the body's
// Close closes the connection.
func (h *hop) do(ctx context.Context, method string, u *url.URL, ua, referer string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fail(ErrInvalidSpec, err.Error())
	}
	req.Header.Set("User-Agent", ua)
	if referer != "" {
		req.Header.Set("Referer", referer)
	}
	req.Close = true // "Connection: close": one request per connection

	conn, err := h.dial(ctx, u)
	if err != nil {
		return nil, err
	}
	// The check's deadline bounds every read and write; a cancelled check (the
	// agent stops) ends at once.
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	closeConn := func() { stop(); _ = conn.Close() }

	var state *tls.ConnectionState
	if u.Scheme == "https" {
		h.tlsStart = time.Now()
		tc := tls.Client(conn, h.prober.tlsConfig(u.Hostname(), h.ignoreTLS, &h.verified))
		err := tc.Handshake() // bounded by the connection's deadline
		h.tlsDone = time.Now()
		if err != nil {
			closeConn()
			return nil, err
		}
		cs := tc.ConnectionState()
		state, conn = &cs, tc
	}
	h.gotConn = time.Now()
	resp, release, err := exchange(&firstByteConn{Conn: conn, at: &h.firstByte}, req)
	if err != nil {
		closeConn()
		return nil, err
	}
	resp.TLS = state
	resp.Body = &connBody{ReadCloser: resp.Body, closeConn: closeConn, release: release}
	return resp, nil
}

// dial resolves u's host (an IP address is dialled without a lookup) and
// connects to its addresses in the resolver's order, as Go's dialer tries
// them, timing both; keep-alive probes are off (one request per connection).
func (h *hop) dial(ctx context.Context, u *url.URL) (net.Conn, error) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[bool]string{true: "443", false: "80"}[u.Scheme == "https"]
	}
	addrs := []string{host}
	if _, err := netip.ParseAddr(host); err != nil {
		resolver := h.prober.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		h.dnsStart = time.Now()
		addrs, err = resolver.LookupHost(ctx, host)
		h.dnsDone = time.Now()
		if err != nil {
			return nil, err
		}
	}
	h.connStart = time.Now()
	defer func() { h.connDone = time.Now() }()
	dialer := net.Dialer{KeepAlive: -1}
	var err error
	for _, a := range addrs {
		var conn net.Conn
		if conn, err = dialer.DialContext(ctx, "tcp", net.JoinHostPort(a, port)); err == nil {
			h.remote = conn.RemoteAddr().String()
			return conn, nil
		}
	}
	return nil, err
}

// exchange writes req on conn and reads its answer (past any 1xx) with pooled
// buffers; release gives the reader's buffer back once the body is closed.
func exchange(conn net.Conn, req *http.Request) (resp *http.Response, release func(), err error) {
	bw := writerBuffers.Get().(*bufio.Writer)
	bw.Reset(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerBuffers.Put(bw)
	if err != nil {
		return nil, nil, err
	}
	br := readerBuffers.Get().(*bufio.Reader)
	br.Reset(conn)
	release = func() { br.Reset(nil); readerBuffers.Put(br) }
	for {
		if resp, err = http.ReadResponse(br, req); err != nil {
			release()
			return nil, nil, err
		}
		// 1xx answers precede the real one (101 is final: a protocol switch).
		if resp.StatusCode < 100 || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, release, nil
		}
	}
}

// firstByteConn notes when the first byte of the answer arrived.
type firstByteConn struct {
	net.Conn
	at *time.Time
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.at.IsZero() {
		*c.at = time.Now()
	}
	return n, err
}

// connBody closes the connection with the body — first, so that the body's
// Close does not read the rest of an answer the check stopped reading — and
// then gives the reader's buffer back.
type connBody struct {
	io.ReadCloser
	closeConn, release func()
}

func (b *connBody) Close() error {
	if b.closeConn == nil {
		return nil
	}
	b.closeConn()
	_ = b.ReadCloser.Close()
	b.release()
	b.closeConn, b.release = nil, nil
	return nil
}

// times are the hop's phases up to end (zero: the hop ended without an answer).
// A hop that dialled without a name lookup (an IP address) has a resolve phase
// of zero, so every target reports one.
func (h *hop) times(end time.Time) Phases {
	var t Phases
	span := func(phase int, a, b time.Time) {
		if !a.IsZero() && !b.IsZero() && !b.Before(a) {
			t.D[phase], t.Set[phase] = b.Sub(a), true
		}
	}
	span(PhaseResolve, h.dnsStart, h.dnsDone)
	if !h.connStart.IsZero() && h.dnsStart.IsZero() {
		t.Set[PhaseResolve] = true // dialled an IP address: no lookup, a resolve phase of zero
	}
	span(PhaseConnect, h.connStart, h.connDone)
	span(PhaseTLS, h.tlsStart, h.tlsDone)
	span(PhaseProcessing, h.gotConn, h.firstByte)
	span(PhaseTransfer, h.firstByte, end)
	return t
}

// The phases of an HTTP check, as blackbox_exporter names them
// (probe_http_duration_seconds{phase}), by index into Phases.
const (
	PhaseResolve = iota
	PhaseConnect
	PhaseTLS
	PhaseProcessing
	PhaseTransfer
	NumPhases
)

// PhaseNames are the phases' names, by index.
var PhaseNames = [NumPhases]string{"resolve", "connect", "tls", "processing", "transfer"}

// Phases are an HTTP check's phase durations, summed over its hops; Set says
// which phases happened (no tls phase on plain http, none after a refused
// connection).
type Phases struct {
	D   [NumPhases]time.Duration
	Set [NumPhases]bool
}

// Plus is a and b added up, phase by phase.
func (a Phases) Plus(b Phases) Phases {
	for i := range a.D {
		a.D[i] += b.D[i]
		a.Set[i] = a.Set[i] || b.Set[i]
	}
	return a
}

// Total is the sum of the phases.
func (a Phases) Total() time.Duration {
	var sum time.Duration
	for _, d := range a.D {
		sum += d
	}
	return sum
}

// Get is the phase of that name and whether it happened.
func (a Phases) Get(name string) (time.Duration, bool) {
	for i, n := range PhaseNames {
		if n == name {
			return a.D[i], a.Set[i]
		}
	}
	return 0, false
}

// redirectTarget is where a redirect answer leads, when the check follows it:
// never when the spec names the answer's code (expected, accepted or bad: that
// answer ends the check), when following is off, or without a Location.
func redirectTarget(resp *http.Response, follow bool, s *polycrate.HTTPSpec) (*url.URL, bool) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil, false
	}
	if !follow || namesCode(s, resp.StatusCode) {
		return nil, false
	}
	next, err := resp.Location()
	if err != nil {
		return nil, false // no (usable) Location: the answer is the redirect itself, as Go's client treats it
	}
	return next, true
}

// namesCode: the spec names code as expected, accepted or bad.
func namesCode(s *polycrate.HTTPSpec, code int) bool {
	return s.ExpectedStatusCode == code || slices.Contains(s.AcceptedStatusCodes, code) || slices.Contains(s.BadStatusCodes, code)
}

// redirectMethod is the method of the request a redirect leads to, as Go's
// client (and browsers) choose it: 301 and 302 turn a POST into a GET, 303
// turns everything but HEAD into a GET, 307 and 308 keep the method.
func redirectMethod(method string, code int) string {
	switch {
	case (code == http.StatusMovedPermanently || code == http.StatusFound) && method == http.MethodPost:
		return http.MethodGet
	case code == http.StatusSeeOther && method != http.MethodHead:
		return http.MethodGet
	}
	return method
}

// refererFor is the Referer of a redirected request (the previous URL, never
// from https to http), as Go's client sets it.
func refererFor(from, to *url.URL) string {
	if from.Scheme == "https" && to.Scheme == "http" {
		return ""
	}
	ref := *from
	ref.User, ref.Fragment = nil, ""
	return ref.String()
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

// Buffers of a check, reused across checks: at 200 checks a second, 21 KiB of
// fresh buffers per check were most of what the garbage collector had to do.
var (
	bodyBuffers   = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}
	readerBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	writerBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 512) }}
)

// readBody reads at most MaxBodyBytes, looking for expected on the way (across
// chunk borders); it keeps no more than one buffer and the expected string.
func readBody(body io.Reader, expected string) (int64, bool, *Failure) {
	bp := bodyBuffers.Get().(*[]byte)
	defer bodyBuffers.Put(bp)
	buf := *bp
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

// fillTimings writes the phases the API has fields for, in milliseconds; the
// time to first byte runs from the start of the check to the first byte of the
// last answer: the earlier hops whole, the last one up to its first byte.
func fillTimings(r *polycrate.CheckResult, all, earlier, last Phases) {
	ms := func(i int) *int {
		if all.Set[i] {
			return polycrate.Ptr(int(all.D[i].Milliseconds()))
		}
		return nil
	}
	r.HTTPDNSLookupMS, r.HTTPTCPConnectMS, r.HTTPTLSHandshakeMS = ms(PhaseResolve), ms(PhaseConnect), ms(PhaseTLS)
	if last.Set[PhaseProcessing] {
		ttfb := earlier.Total() + last.D[PhaseResolve] + last.D[PhaseConnect] + last.D[PhaseTLS] + last.D[PhaseProcessing]
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
