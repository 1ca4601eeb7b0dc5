// Package dnsname is the one place the operator, its webhooks (the cert-manager
// DNS01 solver, the external-dns provider) and the API emulator compare and
// convert DNS names: canonical form, "is this name in that zone", a record's
// name relative to its zone and back, and the Polycrate API's rule for the zone
// that holds a name. Label boundaries come from miekg/dns (dns.IsSubDomain,
// dns.CompareDomainName), never from a string suffix: "notexample.com" is not
// in "example.com".
package dnsname

import (
	"strings"

	"github.com/miekg/dns"
)

// Apex is a record name that stands for the zone itself.
const Apex = "@"

// Canonical is name in lower case, without surrounding space or the trailing
// dot: the form the Polycrate API stores and compares.
func Canonical(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// In says whether name is zone or a name below it, label by label (either may
// be written with or without the trailing dot, in any case).
func In(name, zone string) bool {
	n, z := Canonical(name), Canonical(zone)
	if n == "" || z == "" {
		return false // no name, or the root: never a zone of the API
	}
	return dns.IsSubDomain(dns.Fqdn(z), dns.Fqdn(n))
}

// InAny says whether name is one of domains or below one; no domains: every
// name (external-dns's empty domain filter).
func InAny(name string, domains []string) bool {
	if len(domains) == 0 {
		return true
	}
	for _, d := range domains {
		if In(name, d) {
			return true
		}
	}
	return false
}

// Relative is name relative to zone, Apex for the zone itself; name must be In
// zone (otherwise it is returned canonical, as it is).
func Relative(name, zone string) string {
	n, z := Canonical(name), Canonical(zone)
	switch {
	case n == z:
		return Apex
	case !In(n, z):
		return n
	}
	return strings.TrimSuffix(n, "."+z)
}

// Absolute is a record's name within zone as a full (canonical) name: "" and
// Apex are the zone, a name already in the zone is taken as it is, anything
// else is relative to the zone.
func Absolute(name, zone string) string {
	n, z := Canonical(name), Canonical(zone)
	switch {
	case n == "" || n == Apex:
		return z
	case In(n, z):
		return n
	}
	return n + "." + z
}

// Zone is what the zone rule reads of a zone.
type Zone struct {
	Name string
	// Internal: a zone the Polycrate API serves itself; otherwise an external
	// (delegated) zone, which holds names only when Primary.
	Internal, Primary bool
}

// Best is the zone that holds fqdn by the Polycrate API's rule
// (GET /api/v1/domains/dnszones/resolve/): the longest matching internal zone,
// else the longest matching external zone with primary_zone=true; ok is false
// when no zone holds it. facts reads a zone; the first of equals wins.
func Best[T any](fqdn string, zones []T, facts func(T) Zone) (best T, ok bool) {
	var bestRank [2]int
	for _, z := range zones {
		f := facts(z)
		if !In(fqdn, f.Name) || (!f.Internal && !f.Primary) {
			continue
		}
		rank := [2]int{0, dns.CountLabel(dns.Fqdn(Canonical(f.Name)))}
		if f.Internal {
			rank[0] = 1
		}
		if !ok || rank[0] > bestRank[0] || (rank[0] == bestRank[0] && rank[1] > bestRank[1]) {
			best, bestRank, ok = z, rank, true
		}
	}
	return best, ok
}
