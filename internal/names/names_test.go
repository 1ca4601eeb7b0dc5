package names

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	apiSlug      = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)
)

func TestEndpoint(t *testing.T) {
	if got := Endpoint("app.example.com"); got != "app-example-com" {
		t.Fatalf("the seed's example name: %q", got)
	}
	// Hosts that would collide get a hash.
	if a, b := Endpoint("app.example.com"), Endpoint("app-example.com"); a == b {
		t.Fatalf("collision: %q", a)
	}
	long := strings.Repeat("verylonglabel.", 8) + "example.com"
	for _, h := range []string{"app-example.com", long, "UPPER.Example.COM", "*.wild.example.com", "xn--bcher-kva.example", ".", ""} {
		n := Endpoint(h)
		if len(n) > 63 || !dns1123Label.MatchString(n) {
			t.Errorf("Endpoint(%q) = %q is not a DNS-1123 label", h, n)
		}
	}
	if Endpoint(long) == Endpoint(long+"x") {
		t.Error("long hosts collide")
	}
	if !strings.HasSuffix(Endpoint(long), "-"+Hash(NormalizeHost(long))) || len(Hash("x")) != 20 {
		t.Errorf("a long host's name carries the 80-bit hash: %q", Endpoint(long))
	}
}

// The pair a birthday search found against the old 24-bit hash (issue 15) no
// longer collides, and no pair among many near-identical long hosts does.
func TestEndpointNamesOfLongHostsDoNotCollide(t *testing.T) {
	seen := map[string]string{}
	prefix := strings.Repeat("a", 60) + "."
	for i := range 200_000 {
		h := fmt.Sprintf("%s%d.example.com", prefix, i)
		n := Endpoint(h)
		if other, ok := seen[n]; ok {
			t.Fatalf("%q and %q share the name %q", other, h, n)
		}
		seen[n] = h
	}
}

func TestEndpointAPI(t *testing.T) {
	long := strings.Repeat("verylonglabel.", 8) + "example.com"
	x, y := EndpointAPI("production", "app.example.com"), EndpointAPI("staging", "app.example.com")
	if x == y || !strings.HasPrefix(x, "production-app-example-com-") {
		t.Fatalf("API names %q %q", x, y)
	}
	for _, n := range []string{x, EndpointAPI("a--b", "--x..y--"), EndpointAPI("ns", long+long+long), EndpointAPI("", "")} {
		if len(n) > 255 || !apiSlug.MatchString(n) {
			t.Errorf("API name %q breaks the slug rule", n)
		}
	}
	if EndpointAPI("ns", "A.example.com") != EndpointAPI("ns", "a.example.com.") {
		t.Error("host case and trailing dot must not change the API name")
	}
	// The slug drops separators; the hash keeps namespace and host apart.
	if EndpointAPI("a-b", "c.example.com") == EndpointAPI("a", "b-c.example.com") {
		t.Error("namespace/host split collides")
	}
}

func TestK8sAppAPI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{{"shop", "shop"}, {"web-frontend", "web-frontend"}} {
		if got := K8sAppAPI(tc.in); got != tc.want {
			t.Errorf("K8sAppAPI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if a, b := K8sAppAPI("a.b"), K8sAppAPI("a-b"); a == b || !strings.HasPrefix(a, "a-b-") {
		t.Errorf("dotted names: %q %q", a, b)
	}
}

func TestSlug(t *testing.T) {
	if a, b := Slug("c/x.y", "x.y"), Slug("c/x_y", "x_y"); a == b || !strings.HasPrefix(a, "x-y-") {
		t.Errorf("same slug, different identities: %q %q", a, b)
	}
	if n := Slug("id"); n != Hash("id") {
		t.Errorf("no readable part: %q", n)
	}
	if n := Slug("id", strings.Repeat("x", 300)); len(n) > 255 || !apiSlug.MatchString(n) {
		t.Errorf("long slug %q", n)
	}
}

func TestDNS(t *testing.T) {
	subdomain := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	for _, tc := range []struct {
		parts []string
		plain bool
	}{
		{[]string{"velero", "daily-1"}, true},
		{[]string{"velero", "daily.2026-12-01"}, true},
		{[]string{"a", "B"}, false},
		{[]string{"x", "a..b"}, false},
		{[]string{"x", "a.-b"}, false},
		{[]string{"cnpg", strings.Repeat("y", 300)}, false},
		{[]string{"certmanager", "ns", "web_tls"}, false},
	} {
		n := DNS(tc.parts...)
		if len(n) > 253 || !subdomain.MatchString(n) {
			t.Errorf("DNS(%q) = %q is not a DNS-1123 subdomain", tc.parts, n)
		}
		if plain := n == strings.Join(tc.parts, "-"); plain != tc.plain {
			t.Errorf("DNS(%q) = %q: plain %v, want %v", tc.parts, n, plain, tc.plain)
		}
	}
	if DNS("a", "B") == DNS("a", "b") {
		t.Error("case collision")
	}
}

func FuzzNames(f *testing.F) {
	f.Add("production", "app.example.com")
	f.Add("", ".")
	f.Add("a--b", "--x..y--")
	f.Add("ns", "\xff\xfe.example.com")
	f.Fuzz(func(t *testing.T, ns, host string) {
		if n := Endpoint(host); len(n) > 63 || !dns1123Label.MatchString(n) {
			t.Fatalf("Endpoint(%q) = %q", host, n)
		}
		if n := EndpointAPI(ns, host); len(n) > 255 || !apiSlug.MatchString(n) {
			t.Fatalf("EndpointAPI(%q, %q) = %q", ns, host, n)
		}
		if n := Slug(ns, host); len(n) > 255 || !apiSlug.MatchString(n) {
			t.Fatalf("Slug(%q) = %q", host, n)
		}
		if n := DNS(ns, host); len(n) > 253 || n == "" {
			t.Fatalf("DNS(%q, %q) = %q", ns, host, n)
		}
	})
}

// BenchmarkNames measures the CR and API names derived from a host.
func BenchmarkNames(b *testing.B) {
	b.ReportAllocs()
	host := "a-rather-long-service-name.team-payments.eu-central-1.prod.example.com"
	for b.Loop() {
		_ = Endpoint(host)
		_ = EndpointAPI("team-payments", host)
	}
}

// The names as they were made with regular expressions: the one-pass slugs
// must make exactly these.
var (
	oldNonDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)
	oldPlainHost   = regexp.MustCompile(`^[a-z0-9.]+$`)
	oldHyphenRuns  = regexp.MustCompile(`-+`)
	oldHashedEnd   = regexp.MustCompile(`-[0-9a-f]{20}$`)
	oldNonSlug     = regexp.MustCompile(`[^a-z0-9]+`)
)

func patternEndpoint(host string) string {
	h := NormalizeHost(host)
	slug := strings.Trim(oldNonDNSLabel.ReplaceAllString(strings.ReplaceAll(h, ".", "-"), "-"), "-")
	if slug == "" {
		slug = "endpoint"
	}
	if oldPlainHost.MatchString(h) && len(slug) <= 63 && !oldHashedEnd.MatchString(slug) {
		return slug
	}
	return withHash(slug, h, 63, "-")
}

func patternEndpointAPI(namespace, host string) string {
	h := NormalizeHost(host)
	slug := strings.Trim(oldNonDNSLabel.ReplaceAllString(strings.ToLower(namespace)+"-"+strings.ReplaceAll(h, ".", "-"), "-"), "-")
	slug = oldHyphenRuns.ReplaceAllString(slug, "-")
	if slug == "" {
		slug = "endpoint"
	}
	return withHash(slug, namespace+"/"+h, 255, "-")
}

func patternSlug(identity string, parts ...string) string {
	slug := strings.Trim(oldNonSlug.ReplaceAllString(strings.ToLower(strings.Join(parts, "-")), "-"), "-")
	if len(slug) > 200 {
		slug = strings.Trim(slug[:200], "-")
	}
	return withHash(slug, identity, 255, "-")
}

func TestNamesAsPatterns(t *testing.T) {
	for _, c := range [][2]string{
		{"production", "app.example.com"}, {"", ""}, {"", "."}, {"a--b", "--x..y--"}, {"ns", "\xff\xfe.example.com"},
		{"Team_Payments", "API.Example.COM."}, {"x", "a_.b"}, {"x", "a_é.b"}, {"x", "a..b"}, {"-", "-"},
		{"ns", "xn--bcher-kva.example"}, {"ns", " spaced host .example.com "}, {"ns", "K\u212Aelvin.example"},
		{"ns", strings.Repeat("long-label.", 30) + "example.com"}, {"ns", strings.Repeat("a", 70)},
	} {
		assertAsPatterns(t, c[0], c[1])
	}
}

func FuzzNamesAsPatterns(f *testing.F) {
	f.Add("production", "app.example.com")
	f.Add("a--b", "--x..y--")
	f.Add("ns", "a_\xffé.b")
	f.Fuzz(assertAsPatterns)
}

func assertAsPatterns(t *testing.T, ns, host string) {
	if got, want := Endpoint(host), patternEndpoint(host); got != want {
		t.Fatalf("Endpoint(%q) = %q, the pattern made %q", host, got, want)
	}
	if got, want := EndpointAPI(ns, host), patternEndpointAPI(ns, host); got != want {
		t.Fatalf("EndpointAPI(%q, %q) = %q, the pattern made %q", ns, host, got, want)
	}
	if got, want := Slug(ns+host, ns, host), patternSlug(ns+host, ns, host); got != want {
		t.Fatalf("Slug(%q, %q) = %q, the pattern made %q", ns, host, got, want)
	}
}

// dnsName is a valid host name as an Ingress or HTTPRoute carries it (a
// DNS-1123 subdomain, optionally a wildcard).
var dnsName = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func validHost(h string) bool { return len(h) <= 253 && dnsName.MatchString(h) }

// TestEndpointNamesAreInjective: a plain host spelled like another host's
// hashed name (its last label that hash) does not take that name; hosts that
// had a name keep it.
func TestEndpointNamesAreInjective(t *testing.T) {
	a := "coll-a.rel.example.com"
	b := "coll.a.rel.example.com." + Hash(a)
	if Endpoint(a) == Endpoint(b) {
		t.Fatalf("%q and %q share the name %q", a, b, Endpoint(a))
	}
	if Endpoint(a) != "coll-a-rel-example-com-"+Hash(a) {
		t.Fatalf("a hashed name changed: %q", Endpoint(a))
	}
	for host, want := range map[string]string{
		"app.example.com": "app-example-com", "api.v2.example.com": "api-v2-example-com",
		"x.0123456789abcdef012.example": "x-0123456789abcdef012-example", // 19 hex digits, not at the end
		"build.0123456789abcdef0123x":   "build-0123456789abcdef0123x",
	} {
		if got := Endpoint(host); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q (today's name)", host, got, want)
		}
	}
}

// FuzzEndpointInjective: two different valid hosts never map to one Endpoint
// name — neither two arbitrary ones, nor a host and the plain host that spells
// the first one's name with dots (the crafted collision).
func FuzzEndpointInjective(f *testing.F) {
	f.Add("coll-a.rel.example.com", "coll.a.rel.example.com.8087e0dd50056c0c90bd")
	f.Add("app.example.com", "app-example.com")
	f.Add("*.wild.example.com", "wild.example.com")
	f.Add(strings.Repeat("verylonglabel.", 8)+"example.com", strings.Repeat("verylonglabel.", 8)+"example.org")
	f.Fuzz(func(t *testing.T, a, b string) {
		ha, hb := NormalizeHost(a), NormalizeHost(b)
		if validHost(ha) && validHost(hb) && ha != hb && Endpoint(ha) == Endpoint(hb) {
			t.Fatalf("%q and %q share the name %q", ha, hb, Endpoint(ha))
		}
		if !validHost(ha) {
			return
		}
		// The plain host whose naive slug is a's name.
		spelled := strings.ReplaceAll(Endpoint(ha), "-", ".")
		if validHost(spelled) && spelled != ha && Endpoint(spelled) == Endpoint(ha) {
			t.Fatalf("%q and %q share the name %q", ha, spelled, Endpoint(ha))
		}
	})
}
