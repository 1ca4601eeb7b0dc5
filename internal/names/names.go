// Package names makes every name the operator derives: the names of the CRs
// discovery writes and the names objects get in the Polycrate API. A readable slug
// where one is possible, and where it is not (the slug was changed or shortened)
// the slug plus a hash of the whole identity.
//
// The hash is 80 bits (20 hex digits). With the 24 bits used before, a birthday
// search found two colliding hostnames after 3,866 candidates in under a second
// (issue 15); at 80 bits the same search needs about 2^40 candidates. Collisions
// are still detected where names are used (discovery refuses a second host for
// one CR name, the sync refuses an API object another CR holds), so the width is
// a second line of defence, not the only one.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// HashLen is the number of hex digits of a name's hash.
const HashLen = 20

// Hash is the name hash of an identity.
func Hash(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:])[:HashLen]
}

var (
	nonDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)
	hyphenRuns  = regexp.MustCompile(`-+`)
)

// The names of a host are made once per reconcile of every Endpoint and every
// source, tens of thousands on a restart at scale: the slugs are built in one
// pass over the bytes, not with regular expressions (a third of the Endpoint
// sync's CPU for an unchanged object; BenchmarkNames). A byte of a multi-byte
// or invalid UTF-8 sequence is never a letter, digit or hyphen, so a pass over
// bytes replaces the same runs as a pattern over runes (FuzzNamesAsPatterns).

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// alnumRuns joins s's runs of [a-z0-9] with single hyphens: every other byte
// (hyphens too) separates, and none leads or trails — `[^a-z0-9]+` replaced by
// "-" and trimmed of hyphens.
func alnumRuns(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	sep := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteByte(c)
	}
	return b.String()
}

// hostLabel is a host with dots as hyphens, each run of other characters (not
// [a-z0-9-]) as one hyphen, trimmed of hyphens; the hyphens a host has stay.
// It also says whether the host was plain (only [a-z0-9.], not empty).
func hostLabel(h string) (label string, plain bool) {
	b := make([]byte, 0, len(h))
	plain = h != ""
	other := false // in a run of other characters
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case isAlnum(c):
			b, other = append(b, c), false
		case c == '.':
			b, other = append(b, '-'), false
		case c == '-':
			b, other, plain = append(b, '-'), false, false
		default:
			if !other {
				b = append(b, '-')
			}
			other, plain = true, false
		}
	}
	return strings.Trim(string(b), "-"), plain
}

// NormalizeHost is a host as names and comparisons see it: trimmed, lower case,
// without a trailing dot.
func NormalizeHost(host string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(host), "."))
}

// withHash joins a slug, cut to fit max together with the hash, and the hash.
func withHash(slug, identity string, max int, trim string) string {
	h := Hash(identity)
	if limit := max - len(h) - 1; len(slug) > limit {
		slug = strings.TrimRight(slug[:limit], trim)
	}
	if slug == "" {
		return h
	}
	return slug + "-" + h
}

// Endpoint is the Endpoint CR's name for a host (a DNS-1123 label, at most 63
// characters): the host with dots as hyphens, as in the seed ("app.example.com" →
// "app-example-com"). Where that could collide (a host with hyphens or other
// characters, or a name over 63 characters) the hash of the host is added — and
// so it is for a plain host whose slug ends like a hashed name (its last label
// 20 hex digits): "coll.a.rel.example.com.<the hash of coll-a.rel.example.com>"
// would otherwise be the name of coll-a.rel.example.com. So two different hosts
// never share a name (FuzzEndpointInjective), and every other host keeps the
// name it had.
func Endpoint(host string) string {
	h := NormalizeHost(host)
	slug, plain := hostLabel(h)
	if slug == "" {
		slug = "endpoint"
	}
	if plain && len(slug) <= 63 && !endsLikeHash(slug) {
		return slug
	}
	return withHash(slug, h, 63, "-")
}

// endsLikeHash: the slug ends with "-" and HashLen hex digits, as a hashed name does.
func endsLikeHash(slug string) bool {
	if len(slug) < HashLen+1 || slug[len(slug)-HashLen-1] != '-' {
		return false
	}
	for i := len(slug) - HashLen; i < len(slug); i++ {
		if c := slug[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// EndpointAPI is an endpoint's name in the Polycrate API: a slug of namespace and
// host plus the hash of both, unique across namespaces, at most 255 characters.
func EndpointAPI(namespace, host string) string {
	h := NormalizeHost(host)
	slug := alnumRuns(strings.ToLower(namespace) + "-" + h)
	if slug == "" {
		slug = "endpoint"
	}
	return withHash(slug, namespace+"/"+h, 255, "-")
}

// K8sAppAPI is a K8s app's name in the API: the CR's name as a slug (dots become
// hyphens, plus the hash then, so distinct names stay distinct). A plain name
// stays as it is, so an app the API already knows by its block's name is adopted.
func K8sAppAPI(name string) string {
	slug := strings.ReplaceAll(strings.ToLower(name), ".", "-")
	if slug == name {
		return slug
	}
	return withHash(slug, name, 255, "-")
}

// Slug is an API name for the slug-only resources (hosts, backups, schedules,
// certificates): the readable parts as a slug plus the hash of the whole
// identity, so that distinct objects never share a name.
func Slug(identity string, parts ...string) string {
	slug := alnumRuns(strings.ToLower(strings.Join(parts, "-")))
	if len(slug) > 200 {
		slug = strings.Trim(slug[:200], "-")
	}
	return withHash(slug, identity, 255, "-")
}

// DNS makes a DNS-1123 subdomain (a CR name, at most 253 characters) of parts:
// lower case, other characters as hyphens, and the hash when that changed
// anything or it is too long. The parts are hashed as a list, so ("a-b", "c")
// and ("a", "b-c") do not collide.
func DNS(parts ...string) string {
	raw := strings.Join(parts, "-")
	if len(raw) <= 253 && dnsSubdomain.MatchString(raw) {
		return raw
	}
	name := strings.Trim(hyphenRuns.ReplaceAllString(nonDNSLabel.ReplaceAllString(strings.ToLower(raw), "-"), "-"), "-")
	return withHash(name, strings.Join(parts, "\x00"), 253, "-")
}

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
