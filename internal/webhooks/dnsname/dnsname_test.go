package dnsname

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestIn(t *testing.T) {
	for _, tc := range []struct {
		name, zone string
		in         bool
	}{
		{"example.com", "example.com", true},
		{"www.example.com", "example.com", true},
		{"WWW.Example.COM.", "example.com", true},
		{"a.b.example.com", "example.com.", true},
		{"notexample.com", "example.com", false}, // a string suffix, not a label boundary
		{"example.com", "www.example.com", false},
		{"example.org", "example.com", false},
		{"", "example.com", false},
		{"example.com", "", false},
		{" www.example.com ", "example.com", true},
	} {
		if got := In(tc.name, tc.zone); got != tc.in {
			t.Errorf("In(%q, %q) = %v, want %v", tc.name, tc.zone, got, tc.in)
		}
	}
}

func TestInAny(t *testing.T) {
	if !InAny("anything.example", nil) {
		t.Error("an empty filter holds every name")
	}
	if !InAny("www.b.example", []string{"a.example", "b.example"}) || InAny("c.example", []string{"a.example", "b.example"}) {
		t.Error("a filter holds its domains and the names below them only")
	}
}

func TestRelativeAndAbsolute(t *testing.T) {
	for _, tc := range []struct{ full, zone, rel string }{
		{"example.com", "example.com", Apex},
		{"_acme-challenge.www.example.com.", "Example.com", "_acme-challenge.www"},
		{"www.example.com", "example.com.", "www"},
		{"notexample.com", "example.com", "notexample.com"}, // not in the zone: as it is
	} {
		if got := Relative(tc.full, tc.zone); got != tc.rel {
			t.Errorf("Relative(%q, %q) = %q, want %q", tc.full, tc.zone, got, tc.rel)
		}
	}
	for _, tc := range []struct{ name, zone, full string }{
		{"", "example.com", "example.com"},
		{Apex, "example.com.", "example.com"},
		{"www", "example.com", "www.example.com"},
		{"www.example.com.", "example.com", "www.example.com"}, // already full
		{"WWW", "Example.com", "www.example.com"},
	} {
		if got := Absolute(tc.name, tc.zone); got != tc.full {
			t.Errorf("Absolute(%q, %q) = %q, want %q", tc.name, tc.zone, got, tc.full)
		}
	}
}

// The API's rule (reference: GET /api/v1/domains/dnszones/resolve/): the
// longest internal zone, else the longest external zone that is its
// domain's primary.
func TestBest(t *testing.T) {
	zones := []Zone{
		{Name: "example.com", Primary: true},
		{Name: "shop.example.com"}, // external, not primary: never
		{Name: "int.example.com", Internal: true},
		{Name: "a.int.example.com.", Internal: true},
		{Name: "example.org", Primary: true},
		{Name: "dev.example.org", Primary: true},
	}
	id := func(z Zone) Zone { return z }
	for _, tc := range []struct{ fqdn, want string }{
		{"www.example.com", "example.com"},
		{"www.shop.example.com", "example.com"},
		{"x.int.example.com", "int.example.com"},
		{"x.a.int.example.com", "a.int.example.com."},
		{"x.dev.example.org.", "dev.example.org"},
		{"example.org", "example.org"},
		{"notexample.com", ""},
		{"example.net", ""},
	} {
		got, ok := Best(tc.fqdn, zones, id)
		if ok != (tc.want != "") || got.Name != tc.want {
			t.Errorf("Best(%q) = %q (%v), want %q", tc.fqdn, got.Name, ok, tc.want)
		}
	}
	// An internal zone wins over a longer external one.
	got, _ := Best("x.a.example.net", []Zone{{Name: "a.example.net", Primary: true}, {Name: "example.net", Internal: true}}, id)
	if got.Name != "example.net" {
		t.Errorf("internal before external: got %q", got.Name)
	}
}

func FuzzRelativeAbsolute(f *testing.F) {
	for _, s := range [][2]string{{"www.example.com", "example.com"}, {"example.com.", "EXAMPLE.com"}, {"a.b", "b"}, {"", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, zone string) {
		if strings.ContainsAny(name+zone, "\\\x00") || !valid(name) || !valid(zone) {
			return // escapes, empty labels, other characters: not names the API stores
		}
		if !In(name, zone) {
			return
		}
		rel := Relative(name, zone)
		if rel != Apex && In(rel, zone) {
			// "x.example.com.example.com" in "example.com": its relative name
			// reads as a full one, which Absolute takes as it is (the API's
			// rule for record names) — not a round trip, by definition.
			return
		}
		if got := Absolute(rel, zone); got != Canonical(name) {
			t.Fatalf("Absolute(Relative(%q, %q) = %q) = %q, want %q", name, zone, rel, got, Canonical(name))
		}
	})
}

// valid: a host or record name as the API stores them (letters, digits, "-",
// "_", dots between non-empty labels; "@" only as the apex sign).
func valid(name string) bool {
	name = Canonical(name)
	if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return false
	}
	_, ok := dns.IsDomainName(name)
	return ok && !strings.HasPrefix(name, ".") && !strings.Contains(name, "..")
}
