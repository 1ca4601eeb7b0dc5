package probe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/icmp"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// dnsServer answers on 127.0.0.1 (udp and tcp, one port): A records from zone,
// NXDOMAIN for other names; names under secure. get the AD flag.
func dnsServer(t *testing.T, zone map[string]string) string {
	t.Helper()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		ip, ok := zone[strings.ToLower(q.Name)]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		}
		m.AuthenticatedData = strings.HasPrefix(q.Name, "secure.")
		_ = w.WriteMsg(m)
	})
	// One port for udp and tcp: the tcp side of a random udp port may be taken
	// (other test processes run at the same time), so pick again then.
	var pc net.PacketConn
	var l net.Listener
	for attempt := 0; l == nil; attempt++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			_ = pc.Close()
			if attempt == 20 {
				t.Fatal(err)
			}
		}
	}
	udp, tcp := &dns.Server{PacketConn: pc, Handler: handler}, &dns.Server{Listener: l, Handler: handler}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	return pc.LocalAddr().String()
}

// resolverVia resolves host names through the DNS server at addr.
func resolverVia(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

func splitPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

func httpTarget(t *testing.T, url string, spec polycrate.HTTPSpec) Target {
	t.Helper()
	u := strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://")
	host, port := splitPort(t, u)
	spec.TLS = strings.HasPrefix(url, "https://")
	if spec.Timeout == 0 {
		spec.Timeout = 2
	}
	return Target{ID: "e1", Kind: "http", Address: host, Port: port, Spec: polycrate.EndpointSpec{HTTP: &spec}}
}

// expect checks an outcome's failure name ("" for success).
func expect(t *testing.T, out Outcome, name string) {
	t.Helper()
	got := ""
	if out.Failure != nil {
		got = out.Failure.Name
	}
	if got != name {
		t.Fatalf("failure %q (%v), want %q", got, out.Failure, name)
	}
	if out.Result.Success != (name == "") {
		t.Fatalf("success %v with failure %q", out.Result.Success, name)
	}
	if out.Failure != nil && (out.Result.ErrorCode != out.Failure.Code || out.Result.ErrorName != name ||
		out.Result.HTTPErrorCategory == nil || *out.Result.HTTPErrorCategory != out.Failure.Category) {
		t.Fatalf("result does not carry the failure: %+v", out.Result)
	}
	if out.Result.EndpointID == "" || out.Result.CheckedAt == nil || out.Result.DurationMS == nil {
		t.Fatalf("result misses endpoint_id, checked_at or duration_ms: %+v", out.Result)
	}
}

const okBody = `{"database":"connected","cache":"ok"}`

func TestHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != "probe-test" && r.Header.Get("User-Agent") != UserAgent {
			w.WriteHeader(http.StatusTeapot)
		}
		_, _ = io.WriteString(w, okBody)
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusMovedPermanently) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/method", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead || r.Referer() != "https://status.example.com" {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/drip", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for r.Context().Err() == nil {
			_, _ = w.Write([]byte("."))
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := &Prober{}

	cases := []struct {
		name string
		spec polycrate.HTTPSpec
		body string
		want string
		then func(*testing.T, Outcome)
	}{
		{name: "200 with phases, size and the resolved IP", spec: polycrate.HTTPSpec{Path: "/ok"}, then: func(t *testing.T, o Outcome) {
			if *o.Result.StatusCode != 200 || *o.Result.HTTPResponseSizeBytes != len(okBody) || *o.Result.ResolvedIP != "127.0.0.1" {
				t.Fatalf("%+v", o.Result)
			}
			if _, ok := o.Phases.Get("connect"); !ok || o.Result.HTTPTCPConnectMS == nil || o.Result.HTTPTimeToFirstByteMS == nil {
				t.Fatalf("no connect phase: %v", o.Phases)
			}
			// An IP address is dialled without a lookup: a resolve phase of zero, in the phases and in the API.
			if d, ok := o.Phases.Get("resolve"); !ok || d != 0 || o.Result.HTTPDNSLookupMS == nil || *o.Result.HTTPDNSLookupMS != 0 {
				t.Fatalf("an IP target's resolve phase: %v (set %v), API %v", d, ok, o.Result.HTTPDNSLookupMS)
			}
			if o.Redirects != 0 {
				t.Fatalf("redirects %d without a redirect", o.Redirects)
			}
		}},
		{name: "the user agent of the spec", spec: polycrate.HTTPSpec{Path: "/ok", UserAgent: polycrate.Ptr("probe-test")}},
		{name: "Beispiel 4: the expected body is there", spec: polycrate.HTTPSpec{Path: "/ok"}, body: `"database":"connected"`},
		{name: "the expected body is missing", spec: polycrate.HTTPSpec{Path: "/ok"}, body: `"database":"down"`, want: "body_mismatch"},
		{name: "500 where 200 is expected", spec: polycrate.HTTPSpec{Path: "/status/500"}, want: "unexpected_status_code", then: func(t *testing.T, o Outcome) {
			if *o.Result.StatusCode != 500 || o.Failure.Category != CategoryResponse {
				t.Fatalf("%+v", o.Result)
			}
		}},
		{name: "an accepted code", spec: polycrate.HTTPSpec{Path: "/status/204", AcceptedStatusCodes: []int{204}}},
		{name: "the expected code", spec: polycrate.HTTPSpec{Path: "/status/202", ExpectedStatusCode: 202}},
		{name: "a bad code wins over accepted", spec: polycrate.HTTPSpec{Path: "/status/503", AcceptedStatusCodes: []int{503}, BadStatusCodes: []int{503}}, want: "bad_status_code"},
		{name: "a redirect followed", spec: polycrate.HTTPSpec{Path: "/moved"}},
		{name: "a redirect not followed, 3xx accepted (Beispiel 7)", spec: polycrate.HTTPSpec{Path: "/moved", FollowRedirect: polycrate.Ptr(false), AcceptedStatusCodes: []int{301}}},
		{name: "a redirect loop", spec: polycrate.HTTPSpec{Path: "/loop", MaxRedirects: polycrate.Ptr(3)}, want: "too_many_redirects"},
		{name: "method and referer", spec: polycrate.HTTPSpec{Path: "/method", Method: "HEAD", Referer: polycrate.Ptr("https://status.example.com")}},
		{name: "an endless body", spec: polycrate.HTTPSpec{Path: "/endless", Timeout: 20}, want: "body_too_large"},
		{name: "a slow drip", spec: polycrate.HTTPSpec{Path: "/drip", Timeout: 1}, want: "timeout", then: func(t *testing.T, o Outcome) {
			if o.Duration > 1500*time.Millisecond {
				t.Fatalf("the check took %s with a 1 s timeout", o.Duration)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := httpTarget(t, srv.URL, c.spec)
			tg.ExpectedBody = c.body
			out := p.Run(context.Background(), tg)
			expect(t, out, c.want)
			if c.then != nil {
				c.then(t, out)
			}
		})
	}
}

func TestConnectionFailures(t *testing.T) {
	// Refused: a port nobody listens on (below the ephemeral range, so that no
	// connection of a test running in parallel takes it meanwhile).
	closedAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(unusedPort(t)))
	// Reset: accept, then close with RST.
	rst, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rst.Close() }()
	go func() {
		for {
			c, err := rst.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			_, _ = c.Read(buf)
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}
	}()
	// A black hole: accepts and never answers.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hole.Close() }()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer func() { _ = c.Close() }()
		}
	}()
	dnsAddr := dnsServer(t, map[string]string{"known.test.": "127.0.0.1"})
	p := &Prober{Resolver: resolverVia(dnsAddr)}
	host, port := splitPort(t, closedAddr)
	_, rstPort := splitPort(t, rst.Addr().String())
	_, holePort := splitPort(t, hole.Addr().String())

	cases := []struct {
		name     string
		target   Target
		category string
		names    []string
	}{
		{"http: connection refused", Target{Kind: "http", Address: host, Port: port, Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 2}}},
			CategoryConnection, []string{"connection_refused"}},
		{"http: connection reset", Target{Kind: "http", Address: host, Port: rstPort, Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 2}}},
			CategoryConnection, []string{"connection_reset", "connection_closed"}},
		{"http: no answer within the timeout", Target{Kind: "http", Address: host, Port: holePort, Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 1}}},
			CategoryTimeout, []string{"timeout"}},
		{"http: the name does not exist", Target{Kind: "http", Address: "missing.test", Port: port, Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Timeout: 2}}},
			CategoryDNS, []string{"dns_not_found"}},
		{"tcp: connection refused", Target{Kind: "tcp", Address: host, Port: port}, CategoryConnection, []string{"connection_refused"}},
		{"tcp: no port", Target{Kind: "tcp", Address: host}, CategoryConfiguration, []string{"invalid_spec"}},
		{"an unknown kind", Target{Kind: "smtp", Address: host}, CategoryConfiguration, []string{"invalid_spec"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.target.ID = "e1"
			out := p.Run(context.Background(), c.target)
			if out.Failure == nil || out.Failure.Category != c.category || !contains(c.names, out.Failure.Name) {
				t.Fatalf("failure %v, want category %s, one of %v", out.Failure, c.category, c.names)
			}
			expect(t, out, out.Failure.Name)
			if out.Duration > 3*time.Second {
				t.Fatalf("took %s", out.Duration)
			}
		})
	}
	// The same name through the local DNS server resolves.
	out := p.Run(context.Background(), Target{ID: "e1", Kind: "tcp", Address: "known.test", Port: holePort})
	expect(t, out, "")
	if *out.Result.ResolvedIP != "127.0.0.1" || !*out.Result.TCPConnected {
		t.Fatalf("%+v", out.Result)
	}
}

// unusedPort is a port nobody listens on, below the kernel's ephemeral range.
func unusedPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		port := 20000 + mrand.IntN(12000)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			_ = l.Close()
			return port
		}
	}
	t.Fatal("no unused port")
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// certificate makes a self-signed certificate for 127.0.0.1 and name, valid
// from notBefore to notAfter.
func certificate(t *testing.T, name string, notBefore, notAfter time.Time) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, Issuer: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, DNSNames: []string{name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func tlsServer(t *testing.T, cert tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTLS(t *testing.T) {
	now := time.Now()
	good, goodPool := certificate(t, "shop.test", now.Add(-time.Hour), now.Add(40*24*time.Hour))
	expired, expiredPool := certificate(t, "shop.test", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	goodSrv, expiredSrv := tlsServer(t, good), tlsServer(t, expired)
	dnsAddr := dnsServer(t, map[string]string{"shop.test.": "127.0.0.1", "other.test.": "127.0.0.1"})
	_, goodPort := splitPort(t, strings.TrimPrefix(goodSrv.URL, "https://"))
	_, expiredPort := splitPort(t, strings.TrimPrefix(expiredSrv.URL, "https://"))
	target := func(host string, port int, ignore bool) Target {
		return Target{ID: "e1", Kind: "http", Address: host, Port: port,
			Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{TLS: true, Timeout: 2, IgnoreTLSErrors: ignore}}}
	}
	trusted := &Prober{RootCAs: goodPool, Resolver: resolverVia(dnsAddr)}

	out := trusted.Run(context.Background(), target("shop.test", goodPort, false))
	expect(t, out, "")
	r := out.Result
	if !*r.HTTPTLSValid || *r.HTTPTLSSubject != "shop.test" || *r.HTTPTLSIssuer != "shop.test" || *r.HTTPTLSVersion != "TLS 1.3" ||
		*r.HTTPTLSDaysUntilExpiry != 39 || r.SSLCertNotAfter == nil || r.HTTPTLSHandshakeMS == nil || out.CertNotAfter.IsZero() {
		t.Fatalf("TLS facts: %+v", r)
	}

	cases := []struct {
		name   string
		p      *Prober
		target Target
		want   string
	}{
		{"unknown authority", &Prober{Resolver: resolverVia(dnsAddr)}, target("shop.test", goodPort, false), "tls_unknown_authority"},
		{"wrong host name", trusted, target("other.test", goodPort, false), "tls_hostname_mismatch"},
		{"expired", &Prober{RootCAs: expiredPool, Resolver: resolverVia(dnsAddr)}, target("shop.test", expiredPort, false), "tls_certificate_expired"},
		{"unknown authority, ignored", &Prober{Resolver: resolverVia(dnsAddr)}, target("shop.test", goodPort, true), ""},
		{"expired, ignored", &Prober{RootCAs: expiredPool, Resolver: resolverVia(dnsAddr)}, target("shop.test", expiredPort, true), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := c.p.Run(context.Background(), c.target)
			expect(t, out, c.want)
			if c.want == "" && (out.Result.HTTPTLSValid == nil || *out.Result.HTTPTLSValid) {
				t.Fatalf("an ignored TLS error is still reported as invalid: %+v", out.Result)
			}
		})
	}
}

func TestTCP(t *testing.T) {
	serve := func(t *testing.T, handle func(net.Conn)) int {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer func() { _ = c.Close() }(); handle(c) }()
			}
		}()
		_, port := splitPort(t, l.Addr().String())
		return port
	}
	smtp := serve(t, func(c net.Conn) { _, _ = io.WriteString(c, "220 mail.test ESMTP ready\r\n"); time.Sleep(time.Second) })
	echoPort := serve(t, func(c net.Conn) {
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		_, _ = c.Write([]byte("+" + strings.ToUpper(string(buf[:n]))))
	})
	quiet := serve(t, func(c net.Conn) { time.Sleep(3 * time.Second) })
	p := &Prober{}
	tcp := func(port int, s polycrate.TCPSpec) Target {
		if s.Timeout == 0 {
			s.Timeout = 2
		}
		return Target{ID: "e1", Kind: "tcp", Address: "127.0.0.1", Port: port, Spec: polycrate.EndpointSpec{TCP: &s}}
	}
	out := p.Run(context.Background(), tcp(smtp, polycrate.TCPSpec{}))
	expect(t, out, "")
	if out.Result.TCPBanner == nil || *out.Result.TCPBanner != "220 mail.test ESMTP ready" {
		t.Fatalf("banner: %+v", out.Result)
	}
	expect(t, p.Run(context.Background(), tcp(smtp, polycrate.TCPSpec{ExpectedResponse: "ESMTP"})), "")
	out = p.Run(context.Background(), tcp(echoPort, polycrate.TCPSpec{SendString: "ping", ExpectedResponse: "+PING"}))
	expect(t, out, "")
	if !*out.Result.TCPResponseMatched {
		t.Fatalf("%+v", out.Result)
	}
	out = p.Run(context.Background(), tcp(echoPort, polycrate.TCPSpec{SendString: "ping", ExpectedResponse: "+PONG"}))
	expect(t, out, "response_mismatch")
	if *out.Result.TCPResponseMatched {
		t.Fatalf("%+v", out.Result)
	}
	// A server that never answers: the expected response times out; without one, a connect is enough.
	out = p.Run(context.Background(), tcp(quiet, polycrate.TCPSpec{ExpectedResponse: "hello", Timeout: 1}))
	expect(t, out, "timeout")
	expect(t, p.Run(context.Background(), tcp(quiet, polycrate.TCPSpec{})), "")

	// TLS on TCP.
	cert, pool := certificate(t, "mail.test", time.Now().Add(-time.Hour), time.Now().Add(10*24*time.Hour))
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tl.Close() }()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.WriteString(c, "* OK IMAP ready\r\n"); time.Sleep(time.Second); _ = c.Close() }()
		}
	}()
	_, tlsPort := splitPort(t, tl.Addr().String())
	out = (&Prober{RootCAs: pool}).Run(context.Background(), tcp(tlsPort, polycrate.TCPSpec{TLS: true, ExpectedResponse: "OK"}))
	expect(t, out, "")
	if *out.Result.HTTPTLSDaysUntilExpiry != 9 || !*out.Result.HTTPTLSValid {
		t.Fatalf("%+v", out.Result)
	}
	expect(t, p.Run(context.Background(), tcp(tlsPort, polycrate.TCPSpec{TLS: true})), "tls_unknown_authority")
}

func TestDNS(t *testing.T) {
	addr := dnsServer(t, map[string]string{"svc.example.": "10.0.0.7", "secure.example.": "10.0.0.8"})
	host, port := splitPort(t, addr)
	p := &Prober{}
	dnsT := func(s polycrate.DNSSpec) Target {
		s.Timeout = 2
		return Target{ID: "e1", Kind: "dns", Address: host, Port: port, Spec: polycrate.EndpointSpec{DNS: &s}}
	}
	out := p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "svc.example", ExpectedResults: []string{"10.0.0.7"}}))
	expect(t, out, "")
	r := out.Result
	if *r.DNSRcode != "NOERROR" || len(r.DNSRecords) != 1 || r.DNSRecords[0] != "10.0.0.7" || !*r.DNSMatched || *r.DNSProtocol != "udp" ||
		*r.DNSRecordType != "A" || r.DNSQueryTimeMS == nil || *r.DNSDNSSECValid {
		t.Fatalf("%+v", r)
	}
	out = p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "svc.example", Protocol: "tcp"}))
	expect(t, out, "")
	if *out.Result.DNSProtocol != "tcp" {
		t.Fatalf("%+v", out.Result)
	}
	expect(t, p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "svc.example", ExpectedResults: []string{"10.0.0.9"}})), "dns_results_mismatch")
	expect(t, p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "gone.example"})), "dns_unexpected_rcode")
	expect(t, p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "gone.example", ExpectedRcode: "NXDOMAIN"})), "")
	expect(t, p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "svc.example", DNSSEC: true})), "dnssec_not_validated")
	out = p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "secure.example", DNSSEC: true}))
	expect(t, out, "")
	if !*out.Result.DNSDNSSECValid {
		t.Fatalf("%+v", out.Result)
	}
	expect(t, p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "svc.example", RecordType: "BOGUS"})), "invalid_spec")
	expect(t, p.Run(context.Background(), dnsT(polycrate.DNSSpec{RecordName: "svc.example", Protocol: "quic"})), "invalid_spec")
	// DNS over TLS: the server's certificate is verified like any other.
	cert, pool := certificate(t, "dns.test", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	dot := &dns.Server{Listener: tl, Net: "tcp-tls", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A: net.ParseIP("10.0.0.53")})
		_ = w.WriteMsg(m)
	})}
	go func() { _ = dot.ActivateAndServe() }()
	defer func() { _ = dot.Shutdown() }()
	_, dotPort := splitPort(t, tl.Addr().String())
	dotT := func(ignore bool) Target {
		tg := dnsT(polycrate.DNSSpec{RecordName: "svc.example", TLSEnabled: true, TLSIgnoreErrors: ignore, ExpectedResults: []string{"10.0.0.53"}})
		tg.Port = dotPort
		return tg
	}
	out = (&Prober{RootCAs: pool}).Run(context.Background(), dotT(false))
	expect(t, out, "")
	if *out.Result.DNSProtocol != "tcp-tls" || !*out.Result.DNSMatched {
		t.Fatalf("%+v", out.Result)
	}
	expect(t, p.Run(context.Background(), dotT(false)), "tls_unknown_authority")
	expect(t, p.Run(context.Background(), dotT(true)), "")

	// A server that does not answer.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pc.Close() }()
	_, silent := splitPort(t, pc.LocalAddr().String())
	tg := dnsT(polycrate.DNSSpec{RecordName: "svc.example"})
	tg.Port, tg.Spec.DNS.Timeout = silent, 1
	expect(t, p.Run(context.Background(), tg), "timeout")
}

func TestICMP(t *testing.T) {
	target := Target{ID: "e1", Kind: "icmp", Address: "127.0.0.1", Spec: polycrate.EndpointSpec{ICMP: &polycrate.ICMPSpec{Timeout: 1, Interval: 0.05}}}
	// Whether this host lets a process open an ICMP socket (an unprivileged
	// ping socket, or a raw one), asked without the prober: the verdict must
	// follow it.
	permitted := false
	for _, network := range []string{"udp4", "ip4:icmp"} {
		if c, err := icmp.ListenPacket(network, "0.0.0.0"); err == nil {
			_ = c.Close()
			permitted = true
			break
		}
	}
	out := (&Prober{}).Run(context.Background(), target)
	if permitted {
		expect(t, out, "")
		r := out.Result
		if *r.ICMPPacketsSent != ICMPPackets || *r.ICMPPacketsReceived != ICMPPackets || *r.ICMPPacketLossPercent != 0 ||
			r.ICMPRTTMS == nil || *r.ICMPMinRTTMS > *r.ICMPMaxRTTMS {
			t.Fatalf("%+v", r)
		}
	} else {
		// This host permits neither socket kind: the documented configuration error.
		expect(t, out, "icmp_not_permitted")
		if out.Failure.Category != CategoryConfiguration {
			t.Fatalf("%v", out.Failure)
		}
	}

	// A host that permits neither: a configuration error that names the
	// refusal and the remedy, no crash.
	orig := listenICMP
	defer func() { listenICMP = orig }()
	listenICMP = func(network, _ string) (*icmp.PacketConn, error) {
		return nil, &net.OpError{Op: "listen", Net: network, Err: fmt.Errorf("socket: %w", syscall.EPERM)}
	}
	out = (&Prober{}).Run(context.Background(), target)
	expect(t, out, "icmp_not_permitted")
	if out.Failure.Category != CategoryConfiguration || !strings.Contains(out.Failure.Detail, syscall.EPERM.Error()) ||
		!strings.Contains(out.Failure.Detail, "ping_group_range") {
		t.Fatalf("%v", out.Failure)
	}
	// Another failure to open the socket is no permission matter: no remedy
	// for one.
	listenICMP = func(network, _ string) (*icmp.PacketConn, error) {
		return nil, &net.OpError{Op: "listen", Net: network, Err: fmt.Errorf("socket: %w", syscall.EAFNOSUPPORT)}
	}
	out = (&Prober{}).Run(context.Background(), target)
	expect(t, out, "icmp_not_permitted")
	if !strings.Contains(out.Failure.Detail, syscall.EAFNOSUPPORT.Error()) || strings.Contains(out.Failure.Detail, "ping_group_range") {
		t.Fatalf("%v", out.Failure)
	}
}

func TestRetry(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		if calls < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	tg := httpTarget(t, srv.URL, polycrate.HTTPSpec{})
	tg.Spec.Retry = &polycrate.RetrySpec{Enabled: true, Count: 3, Sleep: 0.01}
	expect(t, (&Prober{}).Run(context.Background(), tg), "")
	if calls != 3 {
		t.Fatalf("%d attempts", calls)
	}
	// Without retry, one attempt decides.
	calls = 0
	tg.Spec.Retry = nil
	expect(t, (&Prober{}).Run(context.Background(), tg), "unexpected_status_code")
	if calls != 1 {
		t.Fatalf("%d attempts", calls)
	}
}

// TestHTTPRedirectRules: a redirect whose code the spec names (expected,
// accepted or bad) ends the check with that answer — the seed's example 7
// ("polycrate_endpoint_expected_status: 302") with the API's default
// follow_redirect: true — while other redirects are followed to the end.
func TestHTTPRedirectRules(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, "/login", http.StatusFound)
	})
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "login") })
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/nowhere", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/post", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/method-seen", http.StatusFound) })
	mux.HandleFunc("/ftp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "ftp://files.example.com/")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	mux.HandleFunc("/method-seen", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.Referer(), "/post") {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := &Prober{}
	cases := []struct {
		name      string
		spec      polycrate.HTTPSpec
		want      string
		code      int
		redirects int
	}{
		{"example 7: 302 expected, followed by default", polycrate.HTTPSpec{ExpectedStatusCode: 302}, "", 302, 0},
		{"302 expected, following switched on explicitly", polycrate.HTTPSpec{ExpectedStatusCode: 302, FollowRedirect: polycrate.Ptr(true)}, "", 302, 0},
		{"302 accepted beside the expected 200", polycrate.HTTPSpec{AcceptedStatusCodes: []int{302}}, "", 302, 0},
		{"302 listed as bad", polycrate.HTTPSpec{BadStatusCodes: []int{302}}, "bad_status_code", 302, 0},
		{"no 3xx named: followed to the login page", polycrate.HTTPSpec{}, "", 200, 1},
		{"301 expected but the answer is a 302: followed, 200 is not 301", polycrate.HTTPSpec{ExpectedStatusCode: 301}, "unexpected_status_code", 200, 1},
		{"followed to a 404", polycrate.HTTPSpec{Path: "/gone"}, "unexpected_status_code", 404, 1},
		{"a POST redirected by a 302 becomes a GET with the Referer", polycrate.HTTPSpec{Path: "/post", Method: http.MethodPost}, "", 200, 1},
		{"not followed: the redirect is the answer", polycrate.HTTPSpec{FollowRedirect: polycrate.Ptr(false)}, "unexpected_status_code", 302, 0},
		{"no redirect allowed", polycrate.HTTPSpec{MaxRedirects: polycrate.Ptr(0)}, "too_many_redirects", 0, 0},
		{"a redirect out of the web", polycrate.HTTPSpec{Path: "/ftp"}, "error", 301, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := p.Run(context.Background(), httpTarget(t, srv.URL, c.spec))
			expect(t, out, c.want)
			got := 0
			if out.Result.StatusCode != nil {
				got = *out.Result.StatusCode
			}
			if got != c.code || out.Redirects != c.redirects {
				t.Fatalf("status %d after %d redirects, want %d after %d (%v)", got, out.Redirects, c.code, c.redirects, out.Failure)
			}
		})
	}
}

// TestHTTPSRedirectToAnotherHost: example.test → www.example.test, each host
// with a certificate for itself only. Every hop is verified against its own
// host (as a browser does), so the check is up; a hop whose certificate does
// not name its host still fails.
func TestHTTPSRedirectToAnotherHost(t *testing.T) {
	now := time.Now()
	apexCert, apexPool := certificate(t, "example.test", now.Add(-time.Hour), now.Add(40*24*time.Hour))
	wwwCert, wwwPool := certificate(t, "www.example.test", now.Add(-time.Hour), now.Add(20*24*time.Hour))
	www := tlsServer(t, wwwCert)
	_, wwwPort := splitPort(t, strings.TrimPrefix(www.URL, "https://"))
	redirectTo := func(host string) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fmt.Sprintf("https://%s:%d/", host, wwwPort), http.StatusMovedPermanently)
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{apexCert}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	apex, wrong := redirectTo("www.example.test"), redirectTo("shop.example.test")
	_, apexPort := splitPort(t, strings.TrimPrefix(apex.URL, "https://"))
	_, wrongPort := splitPort(t, strings.TrimPrefix(wrong.URL, "https://"))
	dnsAddr := dnsServer(t, map[string]string{"example.test.": "127.0.0.1", "www.example.test.": "127.0.0.1", "shop.example.test.": "127.0.0.1"})
	roots := apexPool.Clone()
	roots.AddCert(wwwCert.Leaf)
	_ = wwwPool
	p := &Prober{RootCAs: roots, Resolver: resolverVia(dnsAddr)}
	target := func(port int) Target {
		return Target{ID: "e1", Kind: "http", Address: "example.test", Port: port,
			Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{TLS: true, Timeout: 2}}}
	}

	out := p.Run(context.Background(), target(apexPort))
	expect(t, out, "")
	if out.Redirects != 1 || *out.Result.StatusCode != 200 || !*out.Result.HTTPTLSValid || *out.Result.HTTPTLSSubject != "www.example.test" {
		t.Fatalf("redirects %d, result %+v", out.Redirects, out.Result)
	}
	// The TLS facts are those of the answer the check ended on (the www host's certificate, 20 days).
	if got := *out.Result.HTTPTLSDaysUntilExpiry; got != 19 {
		t.Fatalf("days until expiry %d, want the final host's 19", got)
	}

	// A redirect to shop.example.test, served with www's certificate: that hop fails for its own host.
	out = p.Run(context.Background(), target(wrongPort))
	expect(t, out, "tls_hostname_mismatch")
	if !strings.Contains(out.Failure.Detail, "shop.example.test") {
		t.Fatalf("the failure does not name the hop's host: %v", out.Failure)
	}
}

// TestHTTPRedirectTimings: the phases of a redirected check are summed over the
// hops (as blackbox_exporter sums them), not the last hop's alone.
func TestHTTPRedirectTimings(t *testing.T) {
	const wait = 150 * time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(wait)
		http.Redirect(w, r, "/b", http.StatusFound)
	})
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(wait)
		http.Redirect(w, r, "/c", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/c", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(wait)
		_, _ = io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	out := (&Prober{}).Run(context.Background(), httpTarget(t, srv.URL, polycrate.HTTPSpec{Path: "/a"}))
	expect(t, out, "")
	processing, _ := out.Phases.Get("processing")
	if out.Redirects != 2 || processing < 3*wait {
		t.Fatalf("redirects %d, processing %s: want 2 redirects and at least %s (three hops)", out.Redirects, processing, 3*wait)
	}
	if ttfb := *out.Result.HTTPTimeToFirstByteMS; ttfb < int((3 * wait).Milliseconds()) {
		t.Fatalf("time to first byte %d ms, want at least the three hops' %d ms", ttfb, (3 * wait).Milliseconds())
	}
	if connect, _ := out.Phases.Get("connect"); connect <= 0 || out.Phases.Total() > out.Duration {
		t.Fatalf("connect %s, phases %s over a check of %s", connect, out.Phases.Total(), out.Duration)
	}
}
