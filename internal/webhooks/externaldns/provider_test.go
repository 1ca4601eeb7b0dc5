package externaldns_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"k8s.io/apimachinery/pkg/util/wait"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/miekg/dns"
	"k8s.io/utils/ptr"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/webhooks/externaldns"
)

type fixture struct {
	t        *testing.T
	provider *externaldns.Provider
	url      string
	apiURL   string
	api      *emulator.Server
	client   *polycrate.Client
	dnsAddr  string
}

// start runs the emulator (with DNS) and the provider's handler as external-dns
// reaches it.
func start(t *testing.T, connected bool) *fixture {
	t.Helper()
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	apiSrv := httptest.NewServer(api.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); apiSrv.Close(); _ = api.Close() })
	dnsAddr, err := api.ListenDNS(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := polycrate.New(polycrate.Options{BaseURL: apiSrv.URL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	if err != nil {
		t.Fatal(err)
	}
	p := &externaldns.Provider{Client: func() *polycrate.Client {
		if !connected {
			return nil
		}
		return c
	}}
	srv := httptest.NewServer(externaldns.Handler(p, testr.New(t)))
	t.Cleanup(srv.Close)
	return &fixture{t: t, provider: p, url: srv.URL, apiURL: apiSrv.URL, api: api, client: c, dnsAddr: dnsAddr}
}

// do sends a request as external-dns's webhook client does.
func (f *fixture) do(method, path string, body any) (int, http.Header, []byte) {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, f.url+path, rd)
	req.Header.Set("Accept", externaldns.MediaType)
	if rd != nil {
		req.Header.Set("Content-Type", externaldns.MediaType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

func (f *fixture) records() map[string]string {
	f.t.Helper()
	code, _, body := f.do("GET", "/records", nil)
	if code != http.StatusOK {
		f.t.Fatalf("records: %d %s", code, body)
	}
	var eps []externaldns.Endpoint
	if err := json.Unmarshal(body, &eps); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, ep := range eps {
		out[ep.DNSName+" "+ep.RecordType] = strings.Join(ep.Targets, ",") + " ttl " + itoa(ep.RecordTTL)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (f *fixture) apply(ch externaldns.Changes) (int, string) {
	f.t.Helper()
	code, _, body := f.do("POST", "/records", ch)
	return code, string(body)
}

func lookup(t *testing.T, addr, name string, typ uint16) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), typ)
	r, err := dns.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rr := range r.Answer {
		out = append(out, strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
	}
	sort.Strings(out)
	return out
}

const owner = `"heritage=external-dns,external-dns/owner=my-cluster,external-dns/resource=ingress/shop/web"`

func TestNegotiation(t *testing.T) {
	f := start(t, true)
	code, hdr, body := f.do("GET", "/", nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != externaldns.MediaType {
		t.Fatalf("%d %q %s", code, hdr.Get("Content-Type"), body)
	}
	// The zones the token sees: the seed's internal example.com and external acme.example.
	if strings.TrimSpace(string(body)) != `{"include":["acme.example","example.com"]}` {
		t.Fatalf("%s", body)
	}
	req, _ := http.NewRequest("GET", f.url+"/", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("Accept text/html: %d", resp.StatusCode)
	}
	if code, _, _ := f.do("GET", "/healthz", nil); code != http.StatusOK {
		t.Fatalf("healthz %d", code)
	}
}

func TestAPlanAsExternalDNSSendsIt(t *testing.T) {
	f := start(t, true)
	// Someone else's records in the zone (a DNS01 challenge): never touched.
	zone, err := f.client.ResolveZone(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.DNSRecords().Create(context.Background(), polycrate.DNSRecordRequest{DNSZoneID: zone.ID, Name: "_acme-challenge.www",
		Type: "TXT", Content: "challenge-key"}); err != nil {
		t.Fatal(err)
	}
	before := f.records()

	// Create: A with two targets, its ownership TXT, MX and SRV.
	create := externaldns.Changes{Create: []*externaldns.Endpoint{
		{DNSName: "www.example.com", RecordType: "A", Targets: []string{"192.0.2.1", "192.0.2.2"}, RecordTTL: 300},
		{DNSName: "a-www.example.com", RecordType: "TXT", Targets: []string{owner}},
		{DNSName: "example.com", RecordType: "MX", Targets: []string{"10 mail.example.com"}},
		{DNSName: "_sip._tcp.example.com", RecordType: "SRV", Targets: []string{"20 5 5060 sip.example.com"}},
	}}
	if code, body := f.apply(create); code != http.StatusNoContent {
		t.Fatalf("create: %d %s", code, body)
	}
	// Applied again (a retry after a lost answer): nothing doubles.
	if code, body := f.apply(create); code != http.StatusNoContent {
		t.Fatalf("create again: %d %s", code, body)
	}
	got := f.records()
	for key, want := range map[string]string{
		"www.example.com A":         "192.0.2.1,192.0.2.2 ttl 300",
		"a-www.example.com TXT":     owner + " ttl 3600",
		"example.com MX":            "10 mail.example.com ttl 3600",
		"_sip._tcp.example.com SRV": "20 5 5060 sip.example.com ttl 3600",
	} {
		if got[key] != want {
			t.Errorf("%s: %q, want %q", key, got[key], want)
		}
	}
	// What the API holds is what DNS answers.
	if a := lookup(t, f.dnsAddr, "www.example.com", dns.TypeA); strings.Join(a, ",") != "192.0.2.1,192.0.2.2" {
		t.Fatalf("DNS: %v", a)
	}

	// Update: one target replaced, the TTL changed.
	upd := externaldns.Changes{
		UpdateOld: []*externaldns.Endpoint{{DNSName: "www.example.com", RecordType: "A", Targets: []string{"192.0.2.1", "192.0.2.2"}, RecordTTL: 300}},
		UpdateNew: []*externaldns.Endpoint{{DNSName: "www.example.com", RecordType: "A", Targets: []string{"192.0.2.1", "192.0.2.3"}, RecordTTL: 600}},
	}
	if code, body := f.apply(upd); code != http.StatusNoContent {
		t.Fatalf("update: %d %s", code, body)
	}
	if got := f.records()["www.example.com A"]; got != "192.0.2.1,192.0.2.3 ttl 600" {
		t.Fatalf("after update: %q", got)
	}

	// Delete all of it: the zone is as it was, the challenge record untouched.
	del := externaldns.Changes{Delete: []*externaldns.Endpoint{
		{DNSName: "www.example.com", RecordType: "A", Targets: []string{"192.0.2.1", "192.0.2.3"}},
		{DNSName: "a-www.example.com", RecordType: "TXT", Targets: []string{owner}},
		{DNSName: "example.com", RecordType: "MX", Targets: []string{"10 mail.example.com"}},
		{DNSName: "_sip._tcp.example.com", RecordType: "SRV", Targets: []string{"20 5 5060 sip.example.com"}},
	}}
	if code, body := f.apply(del); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if after := f.records(); len(after) != len(before) || after["_acme-challenge.www.example.com TXT"] != "challenge-key ttl 3600" {
		t.Fatalf("after delete: %v (before %v)", after, before)
	}

	// Adjust: names as Records returns them.
	code, _, body := f.do("POST", "/adjustendpoints", []externaldns.Endpoint{{DNSName: "WWW.Example.com.", RecordType: "A", Targets: []string{"192.0.2.9", "192.0.2.1"}}})
	if code != http.StatusOK || !strings.Contains(string(body), `"dnsName":"www.example.com"`) || !strings.Contains(string(body), `["192.0.2.1","192.0.2.9"]`) {
		t.Fatalf("adjust: %d %s", code, body)
	}
}

func TestBadInputTouchesNothing(t *testing.T) {
	f := start(t, true)
	if code, body := f.apply(externaldns.Changes{Create: []*externaldns.Endpoint{
		{DNSName: "kept.example.com", RecordType: "A", Targets: []string{"192.0.2.50"}}}}); code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	before := f.records()
	cases := []struct {
		name string
		body any
		code int
		msg  string
	}{
		{"a name in no zone the token sees", externaldns.Changes{Create: []*externaldns.Endpoint{
			{DNSName: "ok.example.com", RecordType: "A", Targets: []string{"192.0.2.7"}},
			{DNSName: "www.unknown.org", RecordType: "A", Targets: []string{"192.0.2.8"}}}},
			http.StatusBadRequest, "www.unknown.org is in no DNS zone the agent token sees"},
		{"an A target that is no address", externaldns.Changes{Create: []*externaldns.Endpoint{
			{DNSName: "ok.example.com", RecordType: "A", Targets: []string{"not-an-ip"}}}},
			http.StatusBadRequest, `"not-an-ip" is not an IPv4 address`},
		{"an unsupported type", externaldns.Changes{Create: []*externaldns.Endpoint{
			{DNSName: "ok.example.com", RecordType: "NAPTR", Targets: []string{"x"}}}},
			http.StatusBadRequest, "NAPTR record ok.example.com"},
		{"unpaired updates", externaldns.Changes{UpdateOld: []*externaldns.Endpoint{{DNSName: "kept.example.com", RecordType: "A"}}},
			http.StatusBadRequest, "1 updateOld and 0 updateNew"},
		{"malformed JSON", []byte(`{"create": [`), http.StatusBadRequest, "not valid JSON"},
		{"an oversized body", append([]byte(`{"create":[{"dnsName":"`), bytes.Repeat([]byte("a"), externaldns.MaxBody)...),
			http.StatusRequestEntityTooLarge, "more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := f.do("POST", "/records", c.body)
			if code != c.code || !strings.Contains(string(body), c.msg) {
				t.Fatalf("%d %s; want %d %q", code, body, c.code, c.msg)
			}
			if after := f.records(); len(after) != len(before) {
				t.Fatalf("records changed: %v", after)
			}
		})
	}
	// The API failing: a 5xx external-dns retries, with what failed.
	if err := f.api.SetFaults(emulator.FaultRule{Path: "/api/v1/domains/dnsrecords/", Method: "GET", Status: 503}); err != nil {
		t.Fatal(err)
	}
	code, _, body := f.do("GET", "/records", nil)
	if code != http.StatusBadGateway || !strings.Contains(string(body), "listing the records of zone") {
		t.Fatalf("API down: %d %s", code, body)
	}
	if err := f.api.SetFaults(); err != nil {
		t.Fatal(err)
	}
	// Not connected: 503 with the reason.
	off := start(t, false)
	code, _, body = off.do("GET", "/", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "not connected") {
		t.Fatalf("not connected: %d %s", code, body)
	}
}

// TestServedLive: the server follows external_dns_webhook live (on by default,
// off, a new port) and speaks the protocol on its port.
func TestServedLive(t *testing.T) {
	f := start(t, true)
	conn := polycrate.NewConnection(polycrate.Options{})
	if _, err := conn.Configure(f.apiURL, "", emulator.DevAgentToken); err != nil {
		t.Fatal(err)
	}
	store := &liveconfig.Store{}
	set := func(enabled *bool, port int) {
		spec := v1.OperatorConfigSpec{}
		spec.ExternalDNSWebhook = v1.ExternalDNSWebhookConfig{Enabled: enabled, Port: int32(port)} //nolint:gosec // a port
		store.Set(&liveconfig.Snapshot{Spec: spec})
	}
	port := freePort(t)
	set(nil, port) // the default: on
	srv := externaldns.NewServer(&externaldns.Server{Config: store, Conn: conn, Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	get := func(port int) int {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
		req.Header.Set("Accept", externaldns.MediaType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	wait := func(port, want int) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return get(port) == want, nil }); err != nil {
			t.Fatalf("port %d: want %d, got %d", port, want, get(port))
		}
	}
	wait(port, http.StatusOK)
	other := freePort(t)
	set(nil, other)
	wait(other, http.StatusOK)
	wait(port, 0)
	set(ptr.To(false), other)
	wait(other, 0)
	if srv.Running() != 0 {
		t.Fatal("still running")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestOnlyItsOwnRecords: whoever reaches the webhook port can send a plan; the
// provider changes and deletes only records external-dns made through it, never
// a DNS01 challenge, never outside the domain filter — each such plan is refused
// whole (a 4xx naming the record) and the API is unchanged — while external-dns's
// normal life of its own records (and of records it made before the label,
// beside its TXT ownership record) goes on.
func TestOnlyItsOwnRecords(t *testing.T) {
	f := start(t, true)
	ctx := context.Background()
	zone, err := f.client.ResolveZone(ctx, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	byHand := func(name, typ, content string) {
		t.Helper()
		if _, err := f.client.DNSRecords().Create(ctx, polycrate.DNSRecordRequest{DNSZoneID: zone.ID, Name: name, Type: typ, Content: content}); err != nil {
			t.Fatal(err)
		}
	}
	byHand("mail", "A", "192.0.2.25")                           // a person's record
	byHand("_acme-challenge.shop", "TXT", "challenge-token")    // the DNS01 solver's
	byHand("legacy", "A", "192.0.2.60")                         // external-dns's, from before the label …
	byHand("a-legacy", "TXT", owner)                            // … beside its ownership record
	own := externaldns.Changes{Create: []*externaldns.Endpoint{ // external-dns's own, through the provider
		{DNSName: "shop.example.com", RecordType: "A", Targets: []string{"192.0.2.10"}},
		{DNSName: "a-shop.example.com", RecordType: "TXT", Targets: []string{owner}}}}
	if code, body := f.apply(own); code != http.StatusNoContent {
		t.Fatalf("external-dns's create: %d %s", code, body)
	}
	before := f.records()
	// Created records carry the writer label.
	rows, err := f.client.DNSRecords().List(ctx, polycrate.Query("dns_zone", zone.ID, "name_exact", "shop", "type", "A"))
	if err != nil || len(rows) != 1 || rows[0].Labels[externaldns.WriterLabel] != externaldns.WriterExternalDNS {
		t.Fatalf("the created record's labels: %+v (%v)", rows, err)
	}

	shopUpdate := func(ttl int64) ([]*externaldns.Endpoint, []*externaldns.Endpoint) {
		return []*externaldns.Endpoint{{DNSName: "shop.example.com", RecordType: "A", Targets: []string{"192.0.2.10"}}},
			[]*externaldns.Endpoint{{DNSName: "shop.example.com", RecordType: "A", Targets: []string{"192.0.2.11"}, RecordTTL: ttl}}
	}
	old, nw := shopUpdate(120)
	cases := []struct {
		name string
		ch   externaldns.Changes
		msg  string
	}{
		{"deleting a record a person made", externaldns.Changes{Delete: []*externaldns.Endpoint{
			{DNSName: "mail.example.com", RecordType: "A", Targets: []string{"192.0.2.25"}}}},
			"refused deleting A mail.example.com 192.0.2.25: the record was not made by external-dns"},
		{"changing a record a person made", externaldns.Changes{
			UpdateOld: []*externaldns.Endpoint{{DNSName: "mail.example.com", RecordType: "A", Targets: []string{"192.0.2.25"}}},
			UpdateNew: []*externaldns.Endpoint{{DNSName: "mail.example.com", RecordType: "A", Targets: []string{"203.0.113.66"}}}},
			"refused deleting A mail.example.com 192.0.2.25"},
		{"adding a target to a person's record set", externaldns.Changes{Create: []*externaldns.Endpoint{
			{DNSName: "mail.example.com", RecordType: "A", Targets: []string{"203.0.113.66"}}}},
			"refused writing A mail.example.com: its record A mail.example.com 192.0.2.25 was not made by external-dns"},
		{"deleting a DNS01 challenge", externaldns.Changes{Delete: []*externaldns.Endpoint{
			{DNSName: "_acme-challenge.shop.example.com", RecordType: "TXT", Targets: []string{"challenge-token"}}}},
			"refused TXT _acme-challenge.shop.example.com: names under _acme-challenge are the DNS01 solver's"},
		{"creating a DNS01 challenge (a certificate for the organization's names)", externaldns.Changes{Create: []*externaldns.Endpoint{
			{DNSName: "_acme-challenge.www.example.com", RecordType: "TXT", Targets: []string{"attacker-token"}}}},
			"refused TXT _acme-challenge.www.example.com"},
		{"a hand-made deletion hidden in an otherwise good plan", externaldns.Changes{UpdateOld: old, UpdateNew: nw,
			Delete: []*externaldns.Endpoint{{DNSName: "mail.example.com", RecordType: "A", Targets: []string{"192.0.2.25"}}}},
			"refused deleting A mail.example.com"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.apply(c.ch)
			if code != http.StatusBadRequest || !strings.Contains(body, c.msg) || !strings.Contains(body, "nothing of the plan was written") {
				t.Fatalf("%d %s; want 400 %q", code, body, c.msg)
			}
			if after := f.records(); !equalMaps(after, before) {
				t.Fatalf("the API changed:\n%v\nwas\n%v", after, before)
			}
		})
	}

	// external-dns's normal life goes on: its own record updated (TTL and
	// target), the one from before the label deleted with its ownership record.
	if code, body := f.apply(externaldns.Changes{UpdateOld: old, UpdateNew: nw}); code != http.StatusNoContent {
		t.Fatalf("update of its own record: %d %s", code, body)
	}
	if got := f.records()["shop.example.com A"]; got != "192.0.2.11 ttl 120" {
		t.Fatalf("after the update: %q", got)
	}
	if code, body := f.apply(externaldns.Changes{Delete: []*externaldns.Endpoint{
		{DNSName: "legacy.example.com", RecordType: "A", Targets: []string{"192.0.2.60"}},
		{DNSName: "a-legacy.example.com", RecordType: "TXT", Targets: []string{owner}}}}); code != http.StatusNoContent {
		t.Fatalf("delete of a record owned through its TXT record: %d %s", code, body)
	}
	after := f.records()
	if _, ok := after["legacy.example.com A"]; ok || after["mail.example.com A"] != "192.0.2.25 ttl 3600" ||
		after["_acme-challenge.shop.example.com TXT"] != "challenge-token ttl 3600" {
		t.Fatalf("after external-dns's changes: %v", after)
	}
}

// TestDomainFilter: with external_dns_webhook.domain_filter the provider
// serves and writes only those domains.
func TestDomainFilter(t *testing.T) {
	f := start(t, true)
	f.provider.Filter = func() []string { return []string{"Shop.Example.com."} }
	code, _, body := f.do("GET", "/", nil)
	if code != http.StatusOK || strings.TrimSpace(string(body)) != `{"include":["shop.example.com"]}` {
		t.Fatalf("negotiation: %d %s", code, body)
	}
	if code, body := f.apply(externaldns.Changes{Create: []*externaldns.Endpoint{
		{DNSName: "www.shop.example.com", RecordType: "A", Targets: []string{"192.0.2.1"}}}}); code != http.StatusNoContent {
		t.Fatalf("inside the filter: %d %s", code, body)
	}
	before := f.records()
	code2, body2 := f.apply(externaldns.Changes{Create: []*externaldns.Endpoint{
		{DNSName: "www.shop.example.com", RecordType: "AAAA", Targets: []string{"2001:db8::1"}},
		{DNSName: "www.example.com", RecordType: "A", Targets: []string{"192.0.2.2"}}}})
	if code2 != http.StatusBadRequest || !strings.Contains(body2, "refused A www.example.com: it is outside external_dns_webhook.domain_filter (shop.example.com)") {
		t.Fatalf("outside the filter: %d %s", code2, body2)
	}
	if after := f.records(); !equalMaps(after, before) {
		t.Fatalf("the API changed: %v", after)
	}
	// Records outside the filter are not served.
	for name := range before {
		if !strings.HasSuffix(strings.Fields(name)[0], "shop.example.com") {
			t.Fatalf("served outside the filter: %s", name)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
