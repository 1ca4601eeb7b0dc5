package probe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// ResolvConf is where a dns check without record_name finds its server.
var ResolvConf = "/etc/resolv.conf"

// checkDNS asks the server at remote_address (port remote_port, default 53, 853
// with TLS) for record_name/record_type over udp, tcp or TLS, and compares the
// answer's rcode, records and AD flag with the spec. Without record_name it
// resolves remote_address itself through the host's resolver (resolv.conf).
func (p *Prober) checkDNS(ctx context.Context, t Target) Outcome {
	var out Outcome
	s := t.Spec.DNS
	if s == nil {
		s = &polycrate.DNSSpec{}
	}
	r := &out.Result
	qtype := strings.ToUpper(s.RecordType)
	if qtype == "" {
		qtype = "A"
	}
	typ, ok := dns.StringToType[qtype]
	if !ok {
		out.Failure = fail(ErrInvalidSpec, "unknown record_type "+s.RecordType)
		return out
	}
	proto := strings.ToLower(s.Protocol)
	if proto == "" {
		proto = "udp"
	}
	if proto != "udp" && proto != "tcp" {
		out.Failure = fail(ErrInvalidSpec, "protocol must be udp or tcp, not "+s.Protocol)
		return out
	}
	network, shown := proto, proto
	if s.TLSEnabled {
		network, shown = "tcp-tls", "tcp-tls"
	}
	r.DNSProtocol, r.DNSRecordType = &shown, &qtype

	name, server, failure := dnsQuestion(s, t)
	if failure != nil {
		out.Failure = failure
		return out
	}
	timeout := timeoutOf(s.Timeout, DefaultDNSTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), typ)
	m.RecursionDesired = true
	if s.DNSSEC {
		m.SetEdns0(4096, true)
		m.AuthenticatedData = true
	}
	c := &dns.Client{Net: network, Timeout: timeout}
	if s.TLSEnabled {
		verified := false
		host := t.Address
		c.TLSConfig = p.tlsConfig(host, s.TLSIgnoreErrors, &verified)
	}
	resp, rtt, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		out.Failure = classify(err)
		return out
	}
	r.DNSQueryTimeMS = polycrate.Ptr(int(rtt.Milliseconds()))
	rcode := dns.RcodeToString[resp.Rcode]
	r.DNSRcode = &rcode
	var records []string
	for _, rr := range resp.Answer {
		if rr.Header().Rrtype == typ {
			records = append(records, strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
		}
	}
	r.DNSRecords = records
	ad := resp.AuthenticatedData
	r.DNSDNSSECValid = &ad
	if host, _, err := splitHost(server); err == nil {
		r.ResolvedIP = &host
	}

	out.Failure = judgeDNS(s, r, rcode, records, ad)
	return out
}

// dnsQuestion is the name to ask for and the server to ask: record_name at
// remote_address (port remote_port, default 53, 853 with TLS), or, without a
// record_name, remote_address itself at the host's resolver (resolv.conf).
func dnsQuestion(s *polycrate.DNSSpec, t Target) (name, server string, failure *Failure) {
	if s.RecordName == "" {
		conf, err := dns.ClientConfigFromFile(ResolvConf)
		if err != nil || len(conf.Servers) == 0 {
			return "", "", fail(ErrInvalidSpec, "no record_name, and no resolver in "+ResolvConf)
		}
		return t.Address, hostPort(conf.Servers[0], atoiOr(conf.Port, 53)), nil
	}
	port := t.Port
	if port == 0 {
		port = map[bool]int{true: 853, false: 53}[s.TLSEnabled]
	}
	return s.RecordName, hostPort(t.Address, port), nil
}

// judgeDNS compares an answer with the spec: the rcode (default NOERROR), the
// expected records (each must be in the answer), the AD flag with dnssec.
func judgeDNS(s *polycrate.DNSSpec, r *polycrate.CheckResult, rcode string, records []string, ad bool) *Failure {
	want := strings.ToUpper(s.ExpectedRcode)
	if want == "" {
		want = "NOERROR"
	}
	if rcode != want {
		return fail(ErrDNSRcode, fmt.Sprintf("rcode %s, expected %s", rcode, want))
	}
	if len(s.ExpectedResults) > 0 {
		matched := true
		for _, e := range s.ExpectedResults {
			matched = matched && slices.ContainsFunc(records, func(rec string) bool { return sameRecord(rec, e) })
		}
		r.DNSMatched = &matched
		if !matched {
			return fail(ErrDNSResultsMismatch, fmt.Sprintf("answer %v, expected %v", records, s.ExpectedResults))
		}
	}
	if s.DNSSEC && !ad {
		return fail(ErrDNSSECInvalid, "the answer is not authenticated (no AD flag)")
	}
	return nil
}

// sameRecord compares a record's value with an expected one, ignoring case and a
// trailing dot of names.
func sameRecord(got, want string) bool {
	norm := func(s string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".") }
	return norm(got) == norm(want)
}
