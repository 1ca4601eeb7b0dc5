package emulator

import (
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
)

// Load balancer instances (reference inventory §7): a new instance has no public
// address; after Config.LBAddressDelay it gets the lowest free address of the
// seed's pool (ip_pool, ip_pool_size) and is deployed in every active region. With
// the pool exhausted it stays without one, DEGRADED with a state_reason, until an
// address frees up (an instance is deleted).

const lbAddressDue = "_address_due"

func (s *Server) lbPool() (prefix string, size int) {
	prefix, size = s.seed.IPPool, s.seed.IPPoolSize
	s.mu.Lock()
	if s.lbPoolSize > 0 {
		size = s.lbPoolSize
	}
	s.mu.Unlock()
	if prefix == "" {
		prefix = "198.51.100."
	}
	if size <= 0 || size > 254 {
		size = 250
	}
	return prefix, size
}

// newLoadBalancer fills the server-set fields of a new instance.
func (s *Server) newLoadBalancer(o *Object) {
	if _, ok := o.Data["name"]; !ok {
		o.Data["name"] = "lb-" + o.ID[:8]
	}
	o.Data["ip_address"], o.Data["ip_address_value"] = nil, nil
	o.Data["state"], o.Data["state_reason"] = "WARNING", "waiting for a public IP address"
	deployments := []any{}
	for _, r := range s.store.List("loadbalancers/regions") {
		if r.DeletedAt != nil || r.Data["active"] == false {
			continue
		}
		deployments = append(deployments, map[string]any{"deployment_status": "pending", "last_deployment_attempt": nil,
			"deployment_error": nil, "loadbalancer_region": r.ID, "region": map[string]any{"id": r.ID, "name": r.Data["region_name"]}})
	}
	o.Data["region_deployments"] = deployments
	o.Data["deployments_total"], o.Data["deployments_ready"] = float64(len(deployments)), float64(0)
	o.Data[lbAddressDue] = s.cfg.Now().Add(max(s.cfg.LBAddressDelay, 0)).UTC().Format(time.RFC3339Nano)
}

// assignLBAddresses gives every instance whose delay is over an address, oldest
// first, while the pool has one.
func (s *Server) assignLBAddresses() {
	now := s.cfg.Now()
	due := func(o *Object) bool {
		at, ok := o.Data[lbAddressDue].(string)
		if !ok || o.DeletedAt != nil {
			return false
		}
		t, err := time.Parse(time.RFC3339Nano, at)
		return err == nil && !t.After(now)
	}
	pending := false
	for _, o := range s.store.List("loadbalancers/instances") {
		if due(o) {
			pending = true
			break
		}
	}
	if !pending {
		return
	}
	prefix, size := s.lbPool()
	_ = s.store.Update("loadbalancers/instances", func(objs map[string]*Object) ([]*Object, error) {
		used := map[string]bool{}
		var waiting []*Object
		for _, o := range objs {
			if ip, ok := o.Data["ip_address_value"].(string); ok && o.DeletedAt == nil {
				used[ip] = true
			}
			if due(o) {
				waiting = append(waiting, o)
			}
		}
		sort.Slice(waiting, func(i, j int) bool {
			if !waiting[i].CreatedAt.Equal(waiting[j].CreatedAt) {
				return waiting[i].CreatedAt.Before(waiting[j].CreatedAt)
			}
			return waiting[i].Seq < waiting[j].Seq
		})
		var changed []*Object
		for _, w := range waiting {
			o := w.clone()
			ip := ""
			for n := 1; n <= size && ip == ""; n++ {
				if c := fmt.Sprintf("%s%d", prefix, n); !used[c] {
					ip = c
				}
			}
			if ip == "" {
				reason := fmt.Sprintf("no free IP address in the load balancer pool (%s1–%s%d are all allocated)", prefix, prefix, size)
				if o.Data["state_reason"] == reason {
					continue
				}
				o.Data["state"], o.Data["state_reason"] = "DEGRADED", reason
			} else {
				used[ip] = true
				delete(o.Data, lbAddressDue)
				o.Data["ip_address_value"] = ip
				o.Data["ip_address"] = map[string]any{"id": uuid.NewString(), "name": ip, "ip_address": ip}
				o.Data["state"], o.Data["state_reason"] = "OK", nil
				at := now.UTC().Format(time.RFC3339Nano)
				if deps, ok := o.Data["region_deployments"].([]any); ok {
					for _, d := range deps {
						if m, ok := d.(map[string]any); ok {
							m["deployment_status"], m["last_deployment_attempt"] = "deployed", at
						}
					}
					o.Data["deployments_ready"] = float64(len(deps))
				}
				o.Data["last_deployment"] = at
			}
			o.UpdatedAt = now.UTC()
			objs[o.ID] = o
			changed = append(changed, o)
		}
		return changed, nil
	})
}
