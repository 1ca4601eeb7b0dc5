package polycrate

import (
	"context"
	"net/url"
)

// DNSZone is DNSZoneSimple, the answer of ResolveZone.
type DNSZone struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Kind        string  `json:"kind"` // internal | external
	Provider    *string `json:"provider"`
	PrimaryZone bool    `json:"primary_zone"`
}

// ResolveZone returns the zone the API would write a name into: the longest
// matching internal zone, else an external zone with primary_zone=true; a 404 when
// none matches.
func (c *Client) ResolveZone(ctx context.Context, fqdn string) (*DNSZone, error) {
	out := &DNSZone{}
	return out, c.getJSON(ctx, "domains/dnszones", "/api/v1/domains/dnszones/resolve/", url.Values{"fqdn": {fqdn}}, out)
}

// DNSZones is /api/v1/domains/dnszones/ (read by agents).
func (c *Client) DNSZones() Resource[DNSZone, DNSZone, struct{}] {
	return newResource[DNSZone, DNSZone, struct{}](c, "domains/dnszones", "/api/v1/domains/dnszones/")
}

// DNSRecord is DNSRecordDetail.
type DNSRecord struct {
	Meta
	DNSZone  *DNSZone `json:"dns_zone"`
	Type     string   `json:"type"`
	Content  string   `json:"content"`
	TTL      int      `json:"ttl"`
	Priority *int     `json:"priority"`
}

// DNSRecordRow is a list row.
type DNSRecordRow struct {
	Row
	DNSZone  *DNSZone `json:"dns_zone"`
	Type     string   `json:"type"`
	Content  string   `json:"content"`
	TTL      int      `json:"ttl"`
	Priority *int     `json:"priority"`
}

// DNSRecordRequest is DNSRecordDetailRequest; dns_zone_id and content are required.
type DNSRecordRequest struct {
	Common
	DNSZoneID          string `json:"dns_zone_id"`
	Name               string `json:"name,omitempty"`
	Type               string `json:"type,omitempty"`
	Content            string `json:"content"`
	TTL                int    `json:"ttl,omitempty"`
	Priority           *int   `json:"priority,omitempty"`
	CreatedByComponent string `json:"created_by_component,omitempty"`
}

// DNSRecords is /api/v1/domains/dnsrecords/ (hard delete: 204).
func (c *Client) DNSRecords() Resource[DNSRecord, DNSRecordRow, DNSRecordRequest] {
	return newResource[DNSRecord, DNSRecordRow, DNSRecordRequest](c, "domains/dnsrecords", "/api/v1/domains/dnsrecords/")
}
