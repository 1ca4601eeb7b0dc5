// Package dns01 is the cert-manager DNS01 webhook solver of the operator: it
// presents and cleans up ACME challenge TXT records through the Polycrate DNS API
// (zone resolution, then record CRUD), and serves cert-manager's webhook API
// from the operator process (server.go).
package dns01

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	whapi "github.com/cert-manager/cert-manager/pkg/acme/webhook/apis/acme/v1alpha1"
	"k8s.io/client-go/rest"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/webhooks/dnsname"
)

// ChallengeTTL is the TTL of a challenge record: short, it lives for minutes.
const ChallengeTTL = 60

// callTimeout bounds one Present or CleanUp (cert-manager retries a failure).
const callTimeout = 30 * time.Second

// Solver implements cert-manager's webhook.Solver. Present and CleanUp are
// idempotent: a record with the challenge's name and key is created once, and
// CleanUp deletes exactly that record, never another value of the same name
// (two challenges of one name run in parallel for a wildcard and its base).
type Solver struct {
	// SolverName is dns01_webhook.solver_name ("polycrate").
	SolverName string
	// Client is the operator's API connection (nil while not connected).
	Client func() *polycrate.Client
}

// Name is the solver's name in the ClusterIssuer's webhook.solverName.
func (s *Solver) Name() string { return s.SolverName }

// Initialize needs nothing: the API token is the operator's.
func (s *Solver) Initialize(*rest.Config, <-chan struct{}) error { return nil }

// Present creates the TXT record _acme-challenge.<name> = key in the zone the
// API resolves for it (internal preferred, else the external primary zone).
func (s *Solver) Present(ch *whapi.ChallengeRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, zone, name, err := s.resolve(ctx, ch)
	if err != nil {
		return err
	}
	records, err := s.records(ctx, c, zone, name)
	if err != nil {
		return err
	}
	for _, r := range records {
		if sameKey(r.Content, ch.Key) {
			return nil // presented already
		}
	}
	_, err = c.DNSRecords().Create(ctx, polycrate.DNSRecordRequest{DNSZoneID: zone.ID, Name: name, Type: "TXT", Content: ch.Key,
		TTL: ChallengeTTL, CreatedByComponent: "operator"})
	if polycrate.IsConflict(err) {
		return nil // created meanwhile (a retry after a lost answer)
	}
	if err != nil {
		return fmt.Errorf("creating TXT %s in zone %s: %w", fqdnOf(ch), zone.Name, err)
	}
	return nil
}

// CleanUp deletes the TXT record with the challenge's name and key, and only it.
func (s *Solver) CleanUp(ch *whapi.ChallengeRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, zone, name, err := s.resolve(ctx, ch)
	if errors.Is(err, errNoZone) {
		return nil // nothing was presented there
	}
	if err != nil {
		return err
	}
	records, err := s.records(ctx, c, zone, name)
	if err != nil {
		return err
	}
	for _, r := range records {
		if !sameKey(r.Content, ch.Key) {
			continue
		}
		if err := c.DNSRecords().Delete(ctx, r.ID); err != nil && !polycrate.IsNotFound(err) {
			return fmt.Errorf("deleting TXT %s in zone %s: %w", fqdnOf(ch), zone.Name, err)
		}
	}
	return nil
}

var errNoZone = errors.New("no zone")

// resolve finds the zone of the challenge's name and the name relative to it.
func (s *Solver) resolve(ctx context.Context, ch *whapi.ChallengeRequest) (*polycrate.Client, *polycrate.DNSZone, string, error) {
	var c *polycrate.Client
	if s.Client != nil {
		c = s.Client()
	}
	if c == nil {
		return nil, nil, "", errors.New("the operator is not connected to the Polycrate API (see the OperatorConfig's conditions)")
	}
	fqdn := fqdnOf(ch)
	zone, err := c.ResolveZone(ctx, fqdn)
	if polycrate.IsNotFound(err) {
		return nil, nil, "", fmt.Errorf("%w: the Polycrate API has no DNS zone for %s that the agent token sees (an internal zone, or an external one with primary_zone=true)", errNoZone, fqdn)
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("resolving the DNS zone of %s: %w", fqdn, err)
	}
	if !dnsname.In(fqdn, zone.Name) {
		return nil, nil, "", fmt.Errorf("the Polycrate API resolved %s to zone %s, which does not hold it", fqdn, zone.Name)
	}
	return c, zone, dnsname.Relative(fqdn, zone.Name), nil
}

// records are the zone's TXT records of the name.
func (s *Solver) records(ctx context.Context, c *polycrate.Client, zone *polycrate.DNSZone, name string) ([]polycrate.DNSRecordRow, error) {
	rows, err := c.DNSRecords().List(ctx, polycrate.Query("dns_zone", zone.ID, "name_exact", name, "type", "TXT"))
	if err != nil {
		return nil, fmt.Errorf("listing TXT %s in zone %s: %w", name, zone.Name, err)
	}
	return rows, nil
}

func fqdnOf(ch *whapi.ChallengeRequest) string {
	return dnsname.Canonical(ch.ResolvedFQDN)
}

// sameKey compares a stored TXT content with a key (a provider may store it quoted).
func sameKey(content, key string) bool {
	return strings.Trim(content, `"`) == key
}
