package emulator

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/polycrate/polycrate-operator/internal/webhooks/dnsname"
)

// The emulator answers DNS for its zones from the records it holds (what the
// real service's PowerDNS and providers serve), so that checks, cert-manager's
// DNS01 conformance suite and the demo can resolve what the API holds. It is
// authoritative for every zone (internal and external alike), answers REFUSED
// for names outside them, and reads the records on every query (no caching: a
// record is visible the moment the API holds it).

// ListenDNS serves DNS on addr (udp and tcp, one port; ":0" picks one) until ctx
// ends, and returns the address it serves on.
func (s *Server) ListenDNS(ctx context.Context, addr string) (string, error) {
	pc, l, err := listenBoth(addr)
	if err != nil {
		return "", err
	}
	handler := dns.HandlerFunc(s.serveDNS)
	servers := []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: l, Handler: handler}}
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Add(1)
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { defer wg.Done(); _ = srv.ActivateAndServe() }()
		<-started
	}
	go func() {
		<-ctx.Done()
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
		wg.Wait()
	}()
	return pc.LocalAddr().String(), nil
}

// listenBoth listens on one port for udp and tcp. With port 0 the udp side picks
// it; when its tcp side is taken (another process), it picks again.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		_ = pc.Close()
		if port != "0" || attempt == 20 {
			return nil, nil, err
		}
	}
}

func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	qname := strings.ToLower(dns.Fqdn(q.Name))
	zone := s.zoneFor(strings.TrimSuffix(qname, "."), func(*Object) bool { return true })
	if zone == nil {
		m.Authoritative = false
		m.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(m)
		return
	}
	zoneName := dns.Fqdn(strings.ToLower(scalarString(zone.Data["name"])))
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: zoneName, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "ns1.emulator.polycrate.", Mbox: "hostmaster.emulator.polycrate.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 60}
	var answer []dns.RR
	exists := qname == zoneName
	for _, rec := range s.store.List("domains/dnsrecords") {
		if rec.DeletedAt != nil || rec.Data["dns_zone_id"] != zone.ID || recordFQDN(scalarString(rec.Data["name"]), zoneName) != qname {
			continue
		}
		exists = true
		typ := scalarString(rec.Data["type"])
		if typ != dns.TypeToString[q.Qtype] && !(typ == "CNAME" && q.Qtype != dns.TypeCNAME) && q.Qtype != dns.TypeANY {
			continue
		}
		if rr := recordRR(qname, typ, rec); rr != nil {
			answer = append(answer, rr)
		}
	}
	switch {
	case q.Qtype == dns.TypeSOA && qname == zoneName:
		answer = append(answer, soa)
	case q.Qtype == dns.TypeNS && qname == zoneName:
		answer = append(answer, &dns.NS{Hdr: dns.RR_Header{Name: zoneName, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 60}, Ns: soa.Ns})
	}
	m.Answer = answer
	if len(answer) == 0 {
		if !exists {
			m.Rcode = dns.RcodeNameError
		}
		m.Ns = []dns.RR{soa}
	}
	_ = w.WriteMsg(m)
}

// recordFQDN is a record's name as a fully qualified name: names are relative
// to their zone ("_acme-challenge.www"; "@" or "" is the apex); a name that
// already ends with the zone is taken as it is.
func recordFQDN(name, zone string) string {
	return dns.Fqdn(dnsname.Absolute(name, zone))
}

// recordRR makes the resource record of a stored record (nil for a type or
// content the emulator does not serve).
func recordRR(name, typ string, rec *Object) dns.RR {
	ttl := uint32(60)
	if t, ok := rec.Data["ttl"].(float64); ok && t > 0 {
		ttl = uint32(t)
	}
	content := scalarString(rec.Data["content"])
	prio := 0
	if p, ok := rec.Data["priority"].(float64); ok {
		prio = int(p)
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	switch typ {
	case "A":
		if ip := net.ParseIP(content).To4(); ip != nil {
			return &dns.A{Hdr: hdr(dns.TypeA), A: ip}
		}
	case "AAAA":
		if ip := net.ParseIP(content); ip != nil && ip.To4() == nil {
			return &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip}
		}
	case "CNAME":
		return &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: dns.Fqdn(content)}
	case "NS":
		return &dns.NS{Hdr: hdr(dns.TypeNS), Ns: dns.Fqdn(content)}
	case "PTR":
		return &dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: dns.Fqdn(content)}
	case "TXT":
		return &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: txtStrings(content)}
	case "MX":
		return &dns.MX{Hdr: hdr(dns.TypeMX), Preference: uint16(prio), Mx: dns.Fqdn(content)} //nolint:gosec // a priority
	case "SRV":
		// content: "weight port target" (priority in its own field), or all four.
		f := strings.Fields(content)
		if len(f) == 4 {
			prio, _ = strconv.Atoi(f[0])
			f = f[1:]
		}
		if len(f) != 3 {
			return nil
		}
		weight, err1 := strconv.Atoi(f[0])
		port, err2 := strconv.Atoi(f[1])
		if errors.Join(err1, err2) != nil {
			return nil
		}
		return &dns.SRV{Hdr: hdr(dns.TypeSRV), Priority: uint16(prio), Weight: uint16(weight), Port: uint16(port), Target: dns.Fqdn(f[2])} //nolint:gosec // small numbers
	}
	return nil
}

// txtStrings splits TXT content into character-strings: one pair of
// surrounding quotes is the record's quoting (external-dns writes its ownership
// records quoted), the rest is the text, in pieces of at most 255 bytes.
func txtStrings(content string) []string {
	if len(content) >= 2 && content[0] == '"' && content[len(content)-1] == '"' {
		content = content[1 : len(content)-1]
	}
	var out []string
	for len(content) > 255 {
		out = append(out, content[:255])
		content = content[255:]
	}
	return append(out, content)
}
