package emulator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestDNSServerAnswersFromTheRecords(t *testing.T) {
	s, ts := newTestServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := s.ListenDNS(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, zone, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/domains/dnszones/resolve/?fqdn=www.example.com", nil)
	create := func(name, typ, content string, extra map[string]any) string {
		t.Helper()
		body := map[string]any{"dns_zone_id": zone["id"], "name": name, "type": typ, "content": content, "ttl": 120}
		for k, v := range extra {
			body[k] = v
		}
		status, rec, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/domains/dnsrecords/", body)
		if status != 201 {
			t.Fatalf("creating %s %s: %d %s", name, typ, status, raw)
		}
		return rec["id"].(string)
	}
	create("www", "A", "192.0.2.10", nil)
	create("www", "A", "192.0.2.11", nil)
	create("www", "AAAA", "2001:db8::10", nil)
	txt := create("_acme-challenge.www", "TXT", "key-1", nil)
	create("_acme-challenge.www", "TXT", "key-2", nil)
	create("owner", "TXT", `"heritage=external-dns,external-dns/owner=my-cluster"`, nil)
	create("shop", "CNAME", "www.example.com", nil)
	create("@", "MX", "mail.example.com", map[string]any{"priority": 10})
	create("_sip._tcp", "SRV", "5 5060 sip.example.com", map[string]any{"priority": 20})

	query := func(name string, typ uint16) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), typ)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	values := func(r *dns.Msg) string {
		var out []string
		for _, rr := range r.Answer {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
		}
		sort.Strings(out)
		return strings.Join(out, " | ")
	}
	cases := []struct {
		name  string
		typ   uint16
		rcode int
		want  string
	}{
		{"www.example.com", dns.TypeA, dns.RcodeSuccess, "192.0.2.10 | 192.0.2.11"},
		{"WWW.Example.com", dns.TypeAAAA, dns.RcodeSuccess, "2001:db8::10"},
		{"_acme-challenge.www.example.com", dns.TypeTXT, dns.RcodeSuccess, `"key-1" | "key-2"`},
		{"owner.example.com", dns.TypeTXT, dns.RcodeSuccess, `"heritage=external-dns,external-dns/owner=my-cluster"`},
		{"shop.example.com", dns.TypeA, dns.RcodeSuccess, "www.example.com."},
		{"example.com", dns.TypeMX, dns.RcodeSuccess, "10 mail.example.com."},
		{"_sip._tcp.example.com", dns.TypeSRV, dns.RcodeSuccess, "20 5 5060 sip.example.com."},
		{"www.example.com", dns.TypeMX, dns.RcodeSuccess, ""}, // the name exists: no data
		{"nothing.example.com", dns.TypeA, dns.RcodeNameError, ""},
		{"www.elsewhere.org", dns.TypeA, dns.RcodeRefused, ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %s", c.name, dns.TypeToString[c.typ]), func(t *testing.T) {
			r := query(c.name, c.typ)
			if r.Rcode != c.rcode || values(r) != c.want {
				t.Fatalf("rcode %s, answer %q; want %s, %q", dns.RcodeToString[r.Rcode], values(r), dns.RcodeToString[c.rcode], c.want)
			}
			if c.rcode != dns.RcodeRefused && !r.Authoritative {
				t.Fatal("not authoritative")
			}
		})
	}
	// A deleted record is gone at once (no cache).
	if status, _, raw := do(t, ts.URL, DevAgentToken, "DELETE", "/api/v1/domains/dnsrecords/"+txt+"/", nil); status >= 300 {
		t.Fatalf("%d %s", status, raw)
	}
	if got := values(query("_acme-challenge.www.example.com", dns.TypeTXT)); got != `"key-2"` {
		t.Fatalf("after delete: %q", got)
	}
	// Over TCP too.
	c := &dns.Client{Net: "tcp"}
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	if err != nil || len(r.Answer) != 2 {
		t.Fatalf("tcp: %v %v", r, err)
	}
}
