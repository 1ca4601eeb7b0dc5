package emulator

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLoadBalancerAddresses: an instance gets its public address from the pool
// after the delay, oldest first; with the pool exhausted it stays without one,
// DEGRADED with a reason, until a deletion frees an address.
func TestLoadBalancerAddresses(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	seed, err := ParseSeed(DefaultSeedYAML)
	if err != nil {
		t.Fatal(err)
	}
	seed.IPPool, seed.IPPoolSize = "203.0.113.", 2
	_, ts := newTestServer(t, Config{Seed: seed, Now: clock, LBAddressDelay: 5 * time.Second})

	_, h, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator"})
	create := func(name string) string {
		t.Helper()
		status, m, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/loadbalancers/instances/", map[string]any{
			"workspace": h["workspace_id"], "organization": h["organization_id"], "display_name": name,
			"ports": []any{map[string]any{"port": 80, "name": "http", "protocol": "TCP", "target_port": 30080}}})
		if status != 201 {
			t.Fatalf("create: %d %s", status, raw)
		}
		advance(time.Millisecond)
		return m["id"].(string)
	}
	get := func(id string) map[string]any {
		t.Helper()
		_, m, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/loadbalancers/instances/"+id+"/", nil)
		return m
	}
	a, b, c := create("a"), create("b"), create("c")
	if m := get(a); m["ip_address_value"] != nil || m["ip_address"] != nil || m["state"] != "WARNING" || m["deployments_ready"] != 0.0 {
		t.Fatalf("before the delay: %v", m)
	}
	deps := get(a)["region_deployments"].([]any)
	if len(deps) != 1 || deps[0].(map[string]any)["deployment_status"] != "pending" || deps[0].(map[string]any)["region"].(map[string]any)["name"] != "fra1" {
		t.Fatalf("region deployments %v", deps)
	}

	advance(5 * time.Second)
	ma, mb, mc := get(a), get(b), get(c)
	if ma["ip_address_value"] != "203.0.113.1" || mb["ip_address_value"] != "203.0.113.2" {
		t.Fatalf("addresses %v %v", ma["ip_address_value"], mb["ip_address_value"])
	}
	if ip := ma["ip_address"].(map[string]any); ip["ip_address"] != "203.0.113.1" || ip["id"] == "" || ma["state"] != "OK" || ma["deployments_ready"] != 1.0 {
		t.Fatalf("assigned instance %v", ma)
	}
	if mc["ip_address_value"] != nil || mc["state"] != "DEGRADED" || !strings.Contains(mc["state_reason"].(string), "no free IP address") {
		t.Fatalf("exhausted pool: %v", mc)
	}

	if status, _, raw := do(t, ts.URL, DevAgentToken, "DELETE", "/api/v1/loadbalancers/instances/"+a+"/", nil); status != 202 {
		t.Fatalf("delete: %d %s", status, raw)
	}
	if mc = get(c); mc["ip_address_value"] != "203.0.113.1" || mc["state"] != "OK" || mc["state_reason"] != nil {
		t.Fatalf("after a deletion freed an address: %v", mc)
	}
}
