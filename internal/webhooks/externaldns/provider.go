// Package externaldns is the operator's external-dns webhook provider: it
// serves external-dns's webhook protocol (media type
// application/external.dns.webhook+json;version=1) on the configured port and
// keeps the records in the Polycrate DNS API, in the zones the agent token sees.
package externaldns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/webhooks/dnsname"
)

// Endpoint is external-dns's endpoint.Endpoint on the wire.
type Endpoint struct {
	DNSName          string             `json:"dnsName,omitempty"`
	Targets          []string           `json:"targets,omitempty"`
	RecordType       string             `json:"recordType,omitempty"`
	SetIdentifier    string             `json:"setIdentifier,omitempty"`
	RecordTTL        int64              `json:"recordTTL,omitempty"`
	Labels           map[string]string  `json:"labels,omitempty"`
	ProviderSpecific []ProviderSpecific `json:"providerSpecific,omitempty"`
}

// ProviderSpecific is endpoint.ProviderSpecificProperty.
type ProviderSpecific struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// Changes is external-dns's plan.Changes on the wire.
type Changes struct {
	Create    []*Endpoint `json:"create,omitempty"`
	UpdateOld []*Endpoint `json:"updateOld,omitempty"`
	UpdateNew []*Endpoint `json:"updateNew,omitempty"`
	Delete    []*Endpoint `json:"delete,omitempty"`
}

// DomainFilter is external-dns's DomainFilter on the wire.
type DomainFilter struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Types are the record types the provider reads and writes.
var Types = []string{"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "NS", "CAA"}

// ErrInvalid is a change external-dns sent that cannot be applied as it is (a
// name in no zone the token sees, an unsupported type, a bad target): a 4xx,
// which external-dns does not retry. Other failures are the API's (5xx, retried).
var ErrInvalid = errors.New("invalid change")

// Ownership. external-dns's webhook protocol has no authentication (it is made
// for a sidecar on localhost); served as a Service, whoever reaches the port
// could rewrite every zone the agent token sees. So the provider changes and
// deletes only records external-dns made through it: those it labels
// WriterLabel=WriterExternalDNS when it creates them, and — for records made
// before the label existed — those beside which external-dns keeps its TXT
// ownership record ("heritage=external-dns", at the record's name or, in
// external-dns's newer format, at "<type>-<name>"), and those TXT ownership
// records themselves. It never writes a name under _acme-challenge (the DNS01
// solver's challenges: whoever writes them can have certificates issued for
// the organization's names), and never outside the OperatorConfig's
// external_dns_webhook.domain_filter. A plan that would touch anything else is
// refused whole with a 4xx naming the record; nothing of it is written.
const (
	WriterLabel       = "polycrate.io/dns-writer"
	WriterExternalDNS = "external-dns"
	heritage          = "heritage=external-dns"
	acmeChallenge     = "_acme-challenge"
)

// Provider maps external-dns's endpoints to the API's DNS records.
type Provider struct {
	// Client is the operator's API connection (nil while not connected).
	Client func() *polycrate.Client
	// Filter is external_dns_webhook.domain_filter: the domains the provider
	// serves and writes (nil: every zone the token sees).
	Filter func() []string
}

// filter is the configured domain filter, normalized (nil: no filter).
func (p *Provider) filter() []string {
	if p.Filter == nil {
		return nil
	}
	var out []string
	for _, d := range p.Filter() {
		if d = dnsname.Canonical(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// isChallenge: the name is a DNS01 challenge name (_acme-challenge.<domain>).
func isChallenge(name string) bool {
	first, _, _ := strings.Cut(name, ".")
	return first == acmeChallenge
}

func (p *Provider) client() (*polycrate.Client, error) {
	var c *polycrate.Client
	if p.Client != nil {
		c = p.Client()
	}
	if c == nil {
		return nil, errors.New("the operator is not connected to the Polycrate API (see the OperatorConfig's conditions)")
	}
	return c, nil
}

// zones are the DNS zones the token sees.
func (p *Provider) zones(ctx context.Context, c *polycrate.Client) ([]polycrate.DNSZone, error) {
	zones, err := c.DNSZones().List(ctx, polycrate.Query())
	if err != nil {
		return nil, fmt.Errorf("listing the DNS zones: %w", err)
	}
	return zones, nil
}

// DomainFilter is the configured domain filter, or every zone the token sees.
func (p *Provider) DomainFilter(ctx context.Context) (DomainFilter, error) {
	c, err := p.client()
	if err != nil {
		return DomainFilter{}, err
	}
	if filter := p.filter(); len(filter) > 0 {
		f := DomainFilter{Include: slices.Clone(filter)}
		sort.Strings(f.Include)
		f.Include = slices.Compact(f.Include)
		return f, nil
	}
	zones, err := p.zones(ctx, c)
	if err != nil {
		return DomainFilter{}, err
	}
	f := DomainFilter{}
	for _, z := range zones {
		f.Include = append(f.Include, dnsname.Canonical(z.Name))
	}
	sort.Strings(f.Include)
	f.Include = slices.Compact(f.Include)
	return f, nil
}

// zoneFor picks the zone of a name as the API's resolve does (dnsname.Best).
func zoneFor(zones []polycrate.DNSZone, fqdn string) *polycrate.DNSZone {
	z, ok := dnsname.Best(fqdn, zones, func(z polycrate.DNSZone) dnsname.Zone {
		return dnsname.Zone{Name: z.Name, Internal: z.Kind == "internal", Primary: z.PrimaryZone}
	})
	if !ok {
		return nil
	}
	return &z
}

// record is one API record, in external-dns's terms.
type record struct {
	id     string
	zone   *polycrate.DNSZone
	name   string // full name
	typ    string
	target string
	ttl    int
	own    bool // external-dns made it through this provider (see WriterLabel)
}

// records lists every record of the supported types in the zones.
func (p *Provider) records(ctx context.Context, c *polycrate.Client, zones []polycrate.DNSZone) ([]record, error) {
	var out []record
	for i := range zones {
		z := &zones[i]
		rows, err := c.DNSRecords().List(ctx, polycrate.Query("dns_zone", z.ID))
		if err != nil {
			return nil, fmt.Errorf("listing the records of zone %s: %w", z.Name, err)
		}
		for _, r := range rows {
			if !slices.Contains(Types, r.Type) {
				continue
			}
			label, _ := r.Labels[WriterLabel].(string)
			out = append(out, record{id: r.ID, zone: z, name: dnsname.Absolute(r.Name, z.Name), typ: r.Type,
				target: targetOf(r.Type, r.Content, r.Priority), ttl: r.TTL, own: label == WriterExternalDNS})
		}
	}
	// Records made before the label: external-dns's TXT ownership records, and
	// the records they stand beside.
	owned := map[string]bool{}
	for i := range out {
		if r := &out[i]; r.typ == "TXT" && strings.Contains(r.target, heritage) {
			r.own = true
			owned[r.name] = true
		}
	}
	for i := range out {
		r := &out[i]
		if !r.own && (owned[r.name] || owned[strings.ToLower(r.typ)+"-"+r.name]) {
			r.own = true
		}
	}
	return out, nil
}

// refused is a change the provider never makes (a record it does not own, a
// DNS01 challenge name, a name outside the domain filter).
func refused(what, why string) error {
	return fmt.Errorf("%w: refused %s: %s; nothing of the plan was written", ErrInvalid, what, why)
}

// targetOf is external-dns's target of an API record: MX and SRV carry their
// priority in the target ("10 mail.example.com"), the API in its own field.
func targetOf(typ, content string, priority *int) string {
	if (typ == "MX" || typ == "SRV") && priority != nil {
		return strconv.Itoa(*priority) + " " + content
	}
	return content
}

// contentOf splits an external-dns target into the API's content and priority.
func contentOf(typ, target string) (string, *int, error) {
	target = strings.TrimSpace(target)
	switch typ {
	case "A":
		if ip := net.ParseIP(target); ip == nil || ip.To4() == nil {
			return "", nil, fmt.Errorf("%w: %q is not an IPv4 address", ErrInvalid, target)
		}
	case "AAAA":
		if ip := net.ParseIP(target); ip == nil || ip.To4() != nil {
			return "", nil, fmt.Errorf("%w: %q is not an IPv6 address", ErrInvalid, target)
		}
	case "MX", "SRV":
		prio, rest, ok := strings.Cut(target, " ")
		n, err := strconv.Atoi(prio)
		if !ok || err != nil || n < 0 || n > 65535 {
			return "", nil, fmt.Errorf("%w: %s target %q does not start with a priority", ErrInvalid, typ, target)
		}
		if typ == "SRV" && len(strings.Fields(rest)) != 3 {
			return "", nil, fmt.Errorf("%w: SRV target %q is not \"priority weight port target\"", ErrInvalid, target)
		}
		return strings.TrimSpace(rest), &n, nil
	case "":
		return "", nil, fmt.Errorf("%w: no record type", ErrInvalid)
	}
	if target == "" {
		return "", nil, fmt.Errorf("%w: an empty %s target", ErrInvalid, typ)
	}
	return target, nil, nil
}

// Records are the zones' records as external-dns endpoints: one per name and
// type, with all targets (TXT content verbatim: external-dns's ownership records
// come back exactly as it wrote them).
func (p *Provider) Records(ctx context.Context) ([]*Endpoint, error) {
	c, err := p.client()
	if err != nil {
		return nil, err
	}
	zones, err := p.zones(ctx, c)
	if err != nil {
		return nil, err
	}
	recs, err := p.records(ctx, c, zones)
	if err != nil {
		return nil, err
	}
	filter := p.filter()
	byKey := map[[2]string]*Endpoint{}
	var out []*Endpoint
	for _, r := range recs {
		if !dnsname.InAny(r.name, filter) {
			continue // not served: external-dns never sees, so never plans for, names outside the filter
		}
		k := [2]string{r.name, r.typ}
		ep := byKey[k]
		if ep == nil {
			ep = &Endpoint{DNSName: r.name, RecordType: r.typ, RecordTTL: int64(r.ttl)}
			byKey[k] = ep
			out = append(out, ep)
		}
		ep.Targets = append(ep.Targets, r.target)
	}
	for _, ep := range out {
		sort.Strings(ep.Targets)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].DNSName < out[j].DNSName || out[i].DNSName == out[j].DNSName && out[i].RecordType < out[j].RecordType
	})
	return out, nil
}

// AdjustEndpoints brings endpoints into the form Records returns them in
// (lower-case names without the trailing dot, sorted targets), so that
// external-dns's plan sees no difference where there is none.
func (p *Provider) AdjustEndpoints(eps []*Endpoint) []*Endpoint {
	for _, ep := range eps {
		ep.DNSName = dnsname.Canonical(ep.DNSName)
		sort.Strings(ep.Targets)
	}
	return eps
}

// write is one API write of a change set.
type write struct {
	create *polycrate.DNSRecordRequest
	delete string // record id
	update *updateTTL
	what   string
}

type updateTTL struct {
	id  string
	ttl int
}

// ApplyChanges applies a change set: deletions, then updates (targets removed,
// added, TTL changed), then creations. The whole set is checked first — every
// name in a zone the token sees, every type supported, every target valid — so
// an invalid set writes nothing (ErrInvalid). Creating a record that exists and
// deleting one that does not are no-ops, so a set applied again (a retry after a
// lost answer) leaves the same records.
func (p *Provider) ApplyChanges(ctx context.Context, ch *Changes) error {
	if len(ch.UpdateOld) != len(ch.UpdateNew) {
		return fmt.Errorf("%w: %d updateOld and %d updateNew endpoints", ErrInvalid, len(ch.UpdateOld), len(ch.UpdateNew))
	}
	c, err := p.client()
	if err != nil {
		return err
	}
	zones, err := p.zones(ctx, c)
	if err != nil {
		return err
	}
	recs, err := p.records(ctx, c, zones)
	if err != nil {
		return err
	}
	pl := &planner{zones: zones, filter: p.filter(), existing: map[string]record{}, foreign: map[string]string{}}
	for _, r := range recs {
		pl.existing[r.name+"|"+r.typ+"|"+r.target] = r
		if !r.own {
			pl.foreign[r.name+"|"+r.typ] = r.target
		}
	}
	for _, ep := range ch.Delete {
		if err := pl.plan(ep, ep.Targets, false); err != nil {
			return err
		}
	}
	for i, old := range ch.UpdateOld {
		nw := ch.UpdateNew[i]
		var gone []string
		for _, t := range old.Targets {
			if !slices.Contains(nw.Targets, t) {
				gone = append(gone, t)
			}
		}
		if err := pl.plan(old, gone, false); err != nil {
			return err
		}
		if err := pl.plan(nw, nw.Targets, true); err != nil {
			return err
		}
	}
	for _, ep := range ch.Create {
		if err := pl.plan(ep, ep.Targets, true); err != nil {
			return err
		}
	}
	return pl.apply(ctx, c)
}

// planner turns a change set into API writes, checking all of it first.
type planner struct {
	zones    []polycrate.DNSZone
	filter   []string
	existing map[string]record // name|type|target → record
	foreign  map[string]string // name|type → a record of that set external-dns does not own
	writes   []write
}

// plan adds the writes of one endpoint's targets (created, or deleted), or
// refuses the whole change set.
func (pl *planner) plan(ep *Endpoint, targets []string, create bool) error {
	name := dnsname.Canonical(ep.DNSName)
	zone, err := pl.check(ep, name, create && len(targets) > 0)
	if err != nil {
		return err
	}
	for _, t := range targets {
		content, prio, err := contentOf(ep.RecordType, t)
		if err != nil {
			return fmt.Errorf("%s %s: %w", ep.RecordType, name, err)
		}
		key := name + "|" + ep.RecordType + "|" + targetOf(ep.RecordType, content, prio)
		r, exists := pl.existing[key]
		if exists && !create && r.id != "" && !r.own {
			return refused("deleting "+ep.RecordType+" "+name+" "+t, fmt.Sprintf("the record was not made by external-dns through this provider "+
				"(no %s=%s label, no external-dns ownership TXT record beside it)", WriterLabel, WriterExternalDNS))
		}
		switch {
		case create && !exists:
			req := &polycrate.DNSRecordRequest{DNSZoneID: zone.ID, Name: dnsname.Relative(name, zone.Name), Type: ep.RecordType, Content: content,
				Priority: prio, TTL: int(ep.RecordTTL), CreatedByComponent: "operator",
				Common: polycrate.Common{Labels: map[string]string{WriterLabel: WriterExternalDNS}}}
			pl.writes = append(pl.writes, write{create: req, what: "creating " + ep.RecordType + " " + name + " " + t})
			pl.existing[key] = record{own: true}
		case create && exists && ep.RecordTTL > 0 && r.id != "" && int64(r.ttl) != ep.RecordTTL:
			pl.writes = append(pl.writes, write{update: &updateTTL{id: r.id, ttl: int(ep.RecordTTL)}, what: "setting the TTL of " + ep.RecordType + " " + name})
		case !create && exists && r.id != "":
			pl.writes = append(pl.writes, write{delete: r.id, what: "deleting " + ep.RecordType + " " + name + " " + t})
			delete(pl.existing, key)
		}
	}
	return nil
}

// check refuses what the provider never writes and finds the name's zone:
// an unsupported type, a DNS01 challenge name, a name outside the domain
// filter or in no zone the token sees, and (writing) a record set that holds
// a record external-dns does not own.
func (pl *planner) check(ep *Endpoint, name string, writing bool) (*polycrate.DNSZone, error) {
	if !slices.Contains(Types, ep.RecordType) {
		return nil, fmt.Errorf("%w: %s record %s: the provider writes %s", ErrInvalid, ep.RecordType, name, strings.Join(Types, ", "))
	}
	switch {
	case isChallenge(name):
		return nil, refused(ep.RecordType+" "+name, "names under _acme-challenge are the DNS01 solver's challenges, never external-dns's")
	case !dnsname.InAny(name, pl.filter):
		return nil, refused(ep.RecordType+" "+name, "it is outside external_dns_webhook.domain_filter ("+strings.Join(pl.filter, ", ")+")")
	}
	zone := zoneFor(pl.zones, name)
	if zone == nil {
		return nil, fmt.Errorf("%w: %s is in no DNS zone the agent token sees", ErrInvalid, name)
	}
	if t, ok := pl.foreign[name+"|"+ep.RecordType]; ok && writing {
		return nil, refused("writing "+ep.RecordType+" "+name, fmt.Sprintf("its record %s %s %s was not made by external-dns through this provider "+
			"(no %s=%s label, no external-dns ownership TXT record beside it)", ep.RecordType, name, t, WriterLabel, WriterExternalDNS))
	}
	return zone, nil
}

// apply sends the planned writes in order; a record already there (a retry)
// or already gone is no error.
func (pl *planner) apply(ctx context.Context, c *polycrate.Client) error {
	for _, w := range pl.writes {
		var err error
		switch {
		case w.create != nil:
			_, err = c.DNSRecords().Create(ctx, *w.create)
			if polycrate.IsConflict(err) {
				err = nil // there already (a retry)
			}
		case w.update != nil:
			_, err = c.DNSRecords().Patch(ctx, w.update.id, map[string]any{"ttl": w.update.ttl})
		default:
			err = c.DNSRecords().Delete(ctx, w.delete)
			if polycrate.IsNotFound(err) {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w.what, err)
		}
	}
	return nil
}
