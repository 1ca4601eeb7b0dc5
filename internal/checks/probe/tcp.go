package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// checkTCP connects (optionally with TLS), reads a banner the server sends first,
// sends send_string and looks for expected_response in what comes back.
func (p *Prober) checkTCP(ctx context.Context, t Target) Outcome {
	var out Outcome
	s := t.Spec.TCP
	if s == nil {
		s = &polycrate.TCPSpec{}
	}
	if t.Port == 0 {
		out.Failure = fail(ErrInvalidSpec, "a tcp endpoint needs remote_port")
		return out
	}
	timeout := timeoutOf(s.Timeout, DefaultTCPTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := &out.Result
	dialer := &net.Dialer{Resolver: p.Resolver}
	conn, err := dialer.DialContext(ctx, "tcp", hostPort(t.Address, t.Port))
	if err != nil {
		r.TCPConnected = polycrate.Ptr(false)
		out.Failure = classify(err)
		return out
	}
	defer func() { _ = conn.Close() }()
	r.TCPConnected = polycrate.Ptr(true)
	if host, _, err := net.SplitHostPort(conn.RemoteAddr().String()); err == nil {
		r.ResolvedIP = polycrate.Ptr(host)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if s.TLS {
		verified := false
		tc := tls.Client(conn, p.tlsConfig(t.Address, s.IgnoreTLSErrors, &verified))
		if err := tc.HandshakeContext(ctx); err != nil {
			out.Failure = classify(err)
			return out
		}
		cs := tc.ConnectionState()
		out.CertNotAfter = tlsFacts(r, &cs, verified)
		conn = tc
	}
	if s.SendString != "" {
		if _, err := conn.Write([]byte(s.SendString)); err != nil {
			out.Failure = classify(err)
			return out
		}
	}
	out.Failure = readAnswer(conn, s, r, deadline)
	return out
}

// readAnswer reads what the server says (a banner, or the answer to
// send_string) until expected_response shows, the server stops, MaxBannerBytes,
// or a short quiet period when nothing is expected, and judges it.
func readAnswer(conn net.Conn, s *polycrate.TCPSpec, r *polycrate.CheckResult, deadline time.Time) *Failure {
	want := []byte(s.ExpectedResponse)
	if len(want) == 0 && s.SendString != "" {
		return nil // sent; nothing to wait for
	}
	// Read what the server says (a banner, or the answer) until the expected
	// response shows, the server stops, MaxBannerBytes, or a short quiet period
	// when nothing is expected.
	buf := make([]byte, 0, 512)
	chunk := make([]byte, 512)
	if len(want) == 0 {
		quiet := time.Now().Add(min(time.Until(deadline), 500*time.Millisecond))
		_ = conn.SetReadDeadline(quiet)
	}
	for len(buf) < MaxBannerBytes {
		n, err := conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if len(want) > 0 && bytes.Contains(buf, want) {
			break
		}
		if err != nil {
			if len(want) > 0 {
				r.TCPBanner = banner(buf)
				r.TCPResponseMatched = polycrate.Ptr(false)
				if f := classify(err); f.Code != ErrConnectionClosed.Code {
					return f
				}
				return fail(ErrResponseMismatch, fmt.Sprintf("the answer does not contain %q", truncate(s.ExpectedResponse, 64)))
			}
			break // no banner expected: a quiet server is fine
		}
	}
	r.TCPBanner = banner(buf)
	if len(want) > 0 {
		matched := bytes.Contains(buf, want)
		r.TCPResponseMatched = &matched
		if !matched {
			return fail(ErrResponseMismatch, fmt.Sprintf("the answer does not contain %q", truncate(s.ExpectedResponse, 64)))
		}
	}
	return nil
}

// banner is the first line the server sent, trimmed (nil when it sent nothing).
func banner(b []byte) *string {
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return nil
	}
	s := string(bytes.ToValidUTF8(b, []byte("?")))
	return &s
}
