package emulator

import (
	"encoding/json"
	"net/http"
	"testing"
)

// assigned lists the ids of the endpoints assigned to an agent.
func assigned(t *testing.T, base, token, agentID string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/agent/endpoints/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Agent-ID", agentID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range list {
		ids = append(ids, e["id"].(string))
	}
	return ids
}

func TestAssignmentRule(t *testing.T) {
	for _, c := range []struct {
		mode         string
		samePop      bool
		globexGetsIt bool
	}{
		{"auto", false, true},
		{"organization_only", false, false}, // another organization
		{"pop_only", false, false},
		{"pop_only", true, true},
		{"workspace_only", true, false},
	} {
		t.Run(c.mode, func(t *testing.T) {
			seed := testSeed(t)
			g := &seed.Organizations[1].Workspaces[0]
			g.GlobalEndpointMonitor, g.EndpointMonitoringMode = true, c.mode
			if c.samePop {
				g.Pop = "fra1"
			}
			_, ts := newTestServer(t, Config{Seed: seed})
			_, global, _ := do(t, ts.URL, otherAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "g"})
			_, ep, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "shop", "remote_address": "shop.example.com"})
			got := assigned(t, ts.URL, otherAgentToken, global["agent_id"].(string))
			if (len(got) == 1) != c.globexGetsIt {
				t.Fatalf("the global monitor got %v", got)
			}
			if !c.globexGetsIt {
				return
			}
			// It may report for it; once the workspace's own operator registers, the
			// endpoint goes to that one (own workspace first; one agent per endpoint).
			status, _, raw := do(t, ts.URL, otherAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "g",
				"check_results": []any{map[string]any{"endpoint_id": ep["id"], "success": true}}})
			if status != 201 {
				t.Fatalf("%d %s", status, raw)
			}
			_, own, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "own"})
			if got := assigned(t, ts.URL, otherAgentToken, global["agent_id"].(string)); len(got) != 0 {
				t.Fatalf("still assigned to the global monitor: %v", got)
			}
			if got := assigned(t, ts.URL, DevAgentToken, own["agent_id"].(string)); len(got) != 1 || got[0] != ep["id"] {
				t.Fatalf("own operator got %v", got)
			}
		})
	}
}

func TestCheckResultsDeriveStateAndDowntime(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "op"})
	_, ep, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "shop", "remote_address": "shop.example.com"})
	report := func(success bool, code int, name string) {
		t.Helper()
		res := map[string]any{"endpoint_id": ep["id"], "success": success, "status_code": code}
		if name != "" {
			res["error_code"], res["error_name"] = 400, name
		}
		status, _, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "op",
			"check_results": []any{res}})
		if status != 201 {
			t.Fatalf("%d %s", status, raw)
		}
	}
	get := func() map[string]any {
		_, e, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/endpoints/"+ep["id"].(string)+"/", nil)
		return e
	}
	active := func() int {
		_, page, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/downtimes/?is_active=true", nil)
		n := 0
		for _, d := range page["results"].([]any) {
			if d.(map[string]any)["is_active"] == true {
				n++
			}
		}
		return n
	}
	report(true, 200, "")
	if e := get(); e["state"] != "OK" {
		t.Fatalf("%v", e["state"])
	}
	report(false, 503, "unexpected_status_code")
	e := get()
	if e["state"] != "CRITICAL" || e["state_reason"] != "check failed: unexpected_status_code (status 503)" || e["last_state"] != "OK" || active() != 1 {
		t.Fatalf("state %v reason %v last %v downtimes %d", e["state"], e["state_reason"], e["last_state"], active())
	}
	report(false, 503, "unexpected_status_code") // still down: one downtime
	if active() != 1 {
		t.Fatalf("%d downtimes", active())
	}
	report(true, 200, "")
	if e := get(); e["state"] != "OK" || e["state_reason"] != nil || active() != 0 {
		t.Fatalf("state %v reason %v downtimes %d", e["state"], e["state_reason"], active())
	}
}
