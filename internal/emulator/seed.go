package emulator

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
	"gopkg.in/yaml.v3"
)

// DefaultSeedYAML is the tenancy the emulator starts with when no --seed is given.
//
//go:embed default-seed.yaml
var DefaultSeedYAML []byte

// Development credentials of the default seed (documented in docs/api-emulator.md).
const (
	DevAgentToken  = "polycrate-dev-agent-token"
	DevSystemToken = "polycrate-dev-system-token"
)

// Seed is the emulator's tenancy: organizations with workspaces and their agent
// tokens, PoPs, platform tokens, system config, S3 clusters, DNS zones and
// load balancer regions.
type Seed struct {
	Pops          []SeedPop          `yaml:"pops"`
	Organizations []SeedOrganization `yaml:"organizations"`
	SystemTokens  []string           `yaml:"system_tokens"`
	SystemConfig  map[string]any     `yaml:"system_config"`
	S3Clusters    []SeedS3Cluster    `yaml:"s3_clusters"`
	LBRegions     []string           `yaml:"loadbalancer_regions"`
	// IPPool is the prefix load balancer instances get public addresses from (x.y.z.).
	IPPool string `yaml:"ip_pool"`
	// IPPoolSize is how many addresses the pool has: prefix.1 … prefix.N (default 250).
	IPPoolSize int `yaml:"ip_pool_size"`
}

// SeedPop is a point of presence.
type SeedPop struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	City string `yaml:"city"`
}

// SeedOrganization is an organization with its workspaces and DNS zones.
type SeedOrganization struct {
	Name       string          `yaml:"name"`
	LegalName  string          `yaml:"legal_name"`
	Workspaces []SeedWorkspace `yaml:"workspaces"`
	DNSZones   []SeedDNSZone   `yaml:"dns_zones"`
}

// SeedWorkspace is a workspace, its PoP, agent tokens and blocks.
type SeedWorkspace struct {
	Name   string   `yaml:"name"`
	Pop    string   `yaml:"pop"`
	Tokens []string `yaml:"tokens"`
	// EndpointMonitoringMode (auto|organization_only|workspace_only|pop_only) limits
	// which other workspaces' endpoints a global monitor of this workspace gets;
	// it is returned in the health report.
	EndpointMonitoringMode string `yaml:"endpoint_monitoring_mode"`
	// GlobalEndpointMonitor: this workspace's agents also monitor other workspaces'
	// endpoints (operator_global_endpoint_monitor in the health report).
	GlobalEndpointMonitor bool        `yaml:"global_endpoint_monitor"`
	Blocks                []SeedBlock `yaml:"blocks"`
}

// SeedBlock is a block of a workspace.
type SeedBlock struct {
	Name    string `yaml:"name"`
	Kind    string `yaml:"kind"`
	Version string `yaml:"version"`
}

// SeedS3Cluster is an S3 cluster and the region it is offered as.
type SeedS3Cluster struct {
	Name     string `yaml:"name"`
	Endpoint string `yaml:"endpoint"` // host without scheme
	Region   string `yaml:"region"`
	Kind     string `yaml:"kind"`
	Default  bool   `yaml:"default"` // SystemConfig default_s3_bucket_cluster
}

// SeedDNSZone is a DNS zone of an organization.
type SeedDNSZone struct {
	Name        string `yaml:"name"`
	Kind        string `yaml:"kind"`
	Provider    string `yaml:"provider"`
	PrimaryZone *bool  `yaml:"primary_zone"`
}

// ParseSeed reads a seed.
func ParseSeed(b []byte) (*Seed, error) {
	s := &Seed{}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("invalid seed: %w", err)
	}
	return s, s.validate()
}

// LoadSeed reads a seed file, or the default seed for "".
func LoadSeed(path string) (*Seed, error) {
	if path == "" {
		return ParseSeed(DefaultSeedYAML)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSeed(b)
}

func (s *Seed) validate() error {
	pops := map[string]bool{}
	for _, p := range s.Pops {
		pops[p.Name] = true
	}
	tokens := map[string]bool{}
	for _, t := range s.SystemTokens {
		tokens[t] = true
	}
	for _, o := range s.Organizations {
		if o.Name == "" {
			return fmt.Errorf("invalid seed: an organization has no name")
		}
		for _, w := range o.Workspaces {
			if !pops[w.Pop] {
				return fmt.Errorf("invalid seed: workspace %s/%s names unknown PoP %q (every workspace needs a PoP)", o.Name, w.Name, w.Pop)
			}
			for _, t := range w.Tokens {
				if tokens[t] {
					return fmt.Errorf("invalid seed: token of workspace %s/%s is used twice", o.Name, w.Name)
				}
				tokens[t] = true
			}
		}
	}
	return nil
}

var idNamespace = uuid.MustParse("6f1c2a7e-0b8d-4c4e-9a51-3d2f5b7c9e01")

// seedID is a stable UUID for a seeded object, so restarts keep the same ids.
func seedID(parts ...string) string {
	return uuid.NewSHA1(idNamespace, []byte(strings.Join(parts, "/"))).String()
}
