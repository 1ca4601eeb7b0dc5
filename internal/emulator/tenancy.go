package emulator

import (
	"fmt"
	"strings"
	"time"
)

// applySeed creates (or refreshes, with the same ids) the seed's tenancy and
// indexes its tokens. Objects the API accepted earlier are never touched.
func (s *Server) applySeed() error {
	sd := &seeding{s: s, now: s.cfg.Now().UTC()}
	s.tokens = map[string]principal{}
	for _, t := range s.seed.SystemTokens {
		s.tokens[t] = principal{system: true}
	}
	popIDs := sd.pops()
	for _, o := range s.seed.Organizations {
		sd.organization(o, popIDs)
	}
	config := defaultSystemConfig()
	sd.objectStorage(config)
	for _, name := range s.seed.LBRegions {
		sd.add("loadbalancers/regions", seedID("lbregion", name), "", "", map[string]any{"region_name": name, "kind": "cilium", "active": true})
	}
	if err := s.store.Save(sd.objs...); err != nil {
		return err
	}
	// System config: seed values over defaults, unless the API already holds a config.
	if _, ok := s.store.Get(internalResource, systemConfigID); !ok {
		for k, v := range s.seed.SystemConfig {
			if _, known := systemConfigKeys[k]; !known {
				return fmt.Errorf("invalid seed: unknown system_config key %q", k)
			}
			config[k] = normaliseYAML(v)
		}
		if err := s.store.Save(&Object{Resource: internalResource, ID: systemConfigID, Data: config, CreatedAt: sd.now, UpdatedAt: sd.now}); err != nil {
			return err
		}
	}
	return nil
}

// seeding collects the seed's objects.
type seeding struct {
	s    *Server
	now  time.Time
	objs []*Object
}

// add adds a seed object; one stored already keeps its creation time, order and
// the fields the seed does not set.
func (sd *seeding) add(res, id, ws, org string, data map[string]any) {
	o := &Object{Resource: res, ID: id, Workspace: ws, Organization: org, Data: data, CreatedAt: sd.now, UpdatedAt: sd.now}
	if old, ok := sd.s.store.Get(res, id); ok {
		o.CreatedAt, o.Seq = old.CreatedAt, old.Seq
		for k, v := range old.Data {
			if _, set := data[k]; !set {
				data[k] = v
			}
		}
	}
	sd.objs = append(sd.objs, o)
}

// pops adds the PoPs and returns their ids by name.
func (sd *seeding) pops() map[string]string {
	popIDs := map[string]string{}
	for _, p := range sd.s.seed.Pops {
		id := seedID("pop", p.Name)
		popIDs[p.Name] = id
		kind := p.Kind
		if kind == "" {
			kind = "datacenter"
		}
		sd.add("pops", id, "", "", map[string]any{"name": p.Name, "kind": kind, "city": p.City})
	}
	return popIDs
}

// organization adds an organization, its workspaces (their tokens indexed, their
// blocks) and its DNS zones.
func (sd *seeding) organization(o SeedOrganization, popIDs map[string]string) {
	orgID := seedID("org", o.Name)
	legal := o.LegalName
	if legal == "" {
		legal = o.Name
	}
	sd.add("organizations", orgID, "", orgID, map[string]any{"name": o.Name, "legal_name": legal, "slug": o.Name, "endpoint_monitoring_mode": "auto"})
	for _, w := range o.Workspaces {
		wsID := seedID("workspace", o.Name, w.Name)
		mode := w.EndpointMonitoringMode
		if mode == "" {
			mode = "auto"
		}
		sd.add("workspaces", wsID, wsID, orgID, map[string]any{"name": w.Name, "_pop": popIDs[w.Pop],
			"pop": map[string]any{"id": popIDs[w.Pop], "name": w.Pop, "kind": "datacenter"}, "endpoint_monitoring_mode": mode,
			"global_endpoint_monitor": w.GlobalEndpointMonitor})
		for _, t := range w.Tokens {
			sd.s.tokens[t] = principal{workspace: wsID, org: orgID}
		}
		for _, b := range w.Blocks {
			kind := b.Kind
			if kind == "" {
				kind = "k8sapp"
			}
			sd.add("blocks", seedID("block", o.Name, w.Name, b.Name), wsID, orgID, map[string]any{"name": b.Name, "kind": kind, "version": b.Version})
		}
	}
	for _, z := range o.DNSZones {
		kind := z.Kind
		if kind == "" {
			kind = "internal"
		}
		primary := true
		if z.PrimaryZone != nil {
			primary = *z.PrimaryZone
		}
		data := map[string]any{"name": strings.TrimSuffix(z.Name, "."), "kind": kind, "primary_zone": primary, "default_ttl": float64(3600)}
		if z.Provider != "" {
			data["provider"] = z.Provider
		}
		sd.add("domains/dnszones", seedID("dnszone", o.Name, z.Name, z.Provider), "", orgID, data)
	}
}

// objectStorage adds the S3 clusters and their regions; the default one goes
// into the system config.
func (sd *seeding) objectStorage(config map[string]any) {
	for _, c := range sd.s.seed.S3Clusters {
		clusterID := seedID("s3cluster", c.Name)
		kind := c.Kind
		if kind == "" {
			kind = "rook-ceph"
		}
		sd.add("s3/clusters", clusterID, "", "", map[string]any{"name": c.Name, "endpoint": c.Endpoint, "region": c.Region, "kind": kind,
			"platform_service": true, "allow_new_buckets": true, "active": true, "endpoint_secure": true})
		sd.add("s3/regions", seedID("s3region", c.Name), "", "", map[string]any{"name": c.Name, "region": c.Region,
			"endpoint": c.Endpoint, "display_name": strings.ToUpper(c.Name), "s3_cluster": clusterID})
		if c.Default {
			config["default_s3_bucket_cluster"] = clusterID
		}
	}
}

// normaliseYAML turns YAML numbers into JSON's float64.
func normaliseYAML(v any) any {
	switch t := v.(type) {
	case int:
		return float64(t)
	case int64:
		return float64(t)
	}
	return v
}

// internalResource holds the emulator's own state (system config, assignments,
// rollout flags, error reports) in the same store, so it is as durable as the rest.
const internalResource = "_internal"
const systemConfigID = "system-config"
