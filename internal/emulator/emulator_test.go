package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// do sends one JSON request and decodes the answer.
func do(t testing.TB, base, token, method, path string, body any) (int, map[string]any, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, raw
}

func TestValidateValue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field Field
		value any
		code  string // "" = valid
	}{
		{"string", F("s", String), "x", ""},
		{"string wrong type", F("s", String), 1.0, "invalid"},
		{"null not allowed", F("s", String), nil, "null"},
		{"null allowed", F("s", String, null), nil, ""},
		{"blank required", F("s", String, req), "", "blank"},
		{"enum", F("e", String, enum("a", "b")), "b", ""},
		{"enum miss", F("e", String, enum("a", "b")), "c", "invalid_choice"},
		{"slug", F("n", String, slug), "my-app-1", ""},
		{"slug upper", F("n", String, slug), "My-App", "invalid"},
		{"slug double hyphen", F("n", String, slug), "a--b", "invalid"},
		{"max length", F("n", String, maxLen(3)), "abcd", "max_length"},
		{"int", F("i", Int), 3.0, ""},
		{"int fraction", F("i", Int), 3.5, "invalid"},
		{"int as string", F("i", Int), "3", "invalid"},
		{"int range", F("p", Int, rangeOf(1, 65535)), 70000.0, "max_value"},
		{"int min", F("p", Int, minOf(1)), 0.0, "min_value"},
		{"bool", F("b", Bool), true, ""},
		{"bool as string", F("b", Bool), "true", "invalid"},
		{"uuid", F("u", UUID), "550e8400-e29b-41d4-a716-446655440000", ""},
		{"uuid bad", F("u", UUID), "550e8400", "invalid"},
		{"datetime", F("d", DateTime), "2026-01-06T14:30:00Z", ""},
		{"datetime bad", F("d", DateTime), "yesterday", "invalid"},
		{"any", F("a", Any), map[string]any{"x": []any{1.0}}, ""},
		{"str list", F("l", StrList), []any{"a", "b"}, ""},
		{"str list wrong item", F("l", StrList), []any{"a", 1.0}, "invalid"},
		{"int list not a list", F("l", IntList), "200", "not_a_list"},
		{"object unknown key", F("o", Obj, sub(F("x", Int))), map[string]any{"y": 1.0}, "unknown_field"},
		{"object list", F("o", ObjList, sub(F("x", Int, req))), []any{map[string]any{}}, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateValue(tc.field, tc.value, tc.field.Name)
			switch {
			case tc.code == "" && len(errs) > 0:
				t.Fatalf("want valid, got %v", errs)
			case tc.code != "" && (len(errs) == 0 || errs[0].Code != tc.code):
				t.Fatalf("want %s, got %v", tc.code, errs)
			}
		})
	}
}

func TestReadOnlyFieldsAreIgnored(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	status, m, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/hosts/", map[string]any{
		"name": "worker-1", "hostname": "worker-1", "id": "not-a-uuid", "is_deleted": true, "provider_id": "hcloud://1", "state": "DOWN"})
	if status != 201 {
		t.Fatalf("status %d: %s", status, raw)
	}
	if m["id"] == "not-a-uuid" || m["is_deleted"] != false || m["provider_id"] != nil || m["state"] != "OK" {
		t.Fatalf("read-only fields were written: %s", raw)
	}
}

func TestAgentSilenceOpensAndClosesDowntime(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv, ts := newTestServer(t, Config{Now: clock, AgentSilenceThreshold: 2 * time.Minute})

	report := map[string]any{"kind": "operator", "reported_agent_id": "op", "version": "0.1.0"}
	status, m, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", report)
	if status != 201 {
		t.Fatalf("health: %d %s", status, raw)
	}
	agentID := m["agent_id"].(string)

	advance(time.Minute)
	srv.Tick()
	_, agent, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/agents/"+agentID+"/", nil)
	if agent["state"] != "OK" {
		t.Fatalf("agent %v before the threshold", agent["state"])
	}

	advance(2 * time.Minute)
	srv.Tick()
	_, agent, _ = do(t, ts.URL, DevAgentToken, "GET", "/api/v1/agents/"+agentID+"/", nil)
	if agent["state"] != "CRITICAL" {
		t.Fatalf("silent agent is %v, want CRITICAL", agent["state"])
	}
	_, page, raw := do(t, ts.URL, DevSystemToken, "GET", "/api/v1/downtimes/", nil)
	results := page["results"].([]any)
	if len(results) != 1 {
		t.Fatalf("want one downtime, got %s", raw)
	}
	dt := results[0].(map[string]any)
	if dt["is_active"] != true || dt["ended_at"] != nil || !strings.Contains(fmt.Sprint(dt["affected_objects"]), agentID) {
		t.Fatalf("downtime %v", dt)
	}
	// The agent's own organization sees it too; another does not.
	if _, page, _ := do(t, ts.URL, otherAgentToken, "GET", "/api/v1/downtimes/", nil); page["count"].(float64) != 0 {
		t.Fatalf("another organization sees the downtime")
	}

	// Still silent: no second downtime.
	advance(time.Minute)
	srv.Tick()
	if _, page, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/downtimes/", nil); page["count"].(float64) != 1 {
		t.Fatalf("a second downtime opened")
	}

	// Reports resume: recovered, downtime closed.
	do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", report)
	_, agent, _ = do(t, ts.URL, DevAgentToken, "GET", "/api/v1/agents/"+agentID+"/", nil)
	if agent["state"] != "OK" {
		t.Fatalf("agent %v after reports resumed", agent["state"])
	}
	_, dtNow, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/downtimes/"+dt["id"].(string)+"/", nil)
	if dtNow["is_active"] != false || dtNow["ended_at"] == nil {
		t.Fatalf("downtime not closed: %v", dtNow)
	}
}

func TestEndpointAssignmentAndCheckResults(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	_, h, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "op"})
	agentID := h["agent_id"].(string)
	// A CLI agent registered later does not take the operator's endpoints.
	do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "agent", "reported_agent_id": "cli"})
	_, ep, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "e1", "remote_address": "a.example.com",
		"spec": map[string]any{"http": map[string]any{"path": "/healthz"}}})
	do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "e2", "remote_address": "b.example.com", "do_not_monitor": true})
	// Another workspace's endpoint is never assigned here.
	do(t, ts.URL, otherAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "e3", "remote_address": "c.example.com"})

	req, _ := http.NewRequest("GET", ts.URL+"/api/v1/agent/endpoints/", nil)
	req.Header.Set("Authorization", "Bearer "+DevAgentToken)
	req.Header.Set("X-Agent-ID", agentID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list) != 1 || list[0]["id"] != ep["id"] || list[0]["spec"].(map[string]any)["http"].(map[string]any)["path"] != "/healthz" {
		t.Fatalf("assigned endpoints %v", list)
	}

	status, _, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "reported_agent_id": "op",
		"check_results": []any{map[string]any{"endpoint_id": ep["id"], "success": true, "status_code": 200, "duration_ms": 12}}})
	if status != 201 {
		t.Fatalf("health with results: %d %s", status, raw)
	}
	_, page, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/agents/"+agentID+"/assignments/", nil)
	rows := page["results"].([]any)
	if len(rows) != 1 {
		t.Fatalf("assignments %v", page)
	}
	row := rows[0].(map[string]any)
	if row["last_check_success"] != true || row["last_check_status_code"] != 200.0 || row["checks_executed"] != 1.0 || row["success_rate"] != 100.0 {
		t.Fatalf("assignment %v", row)
	}
	// A result for another workspace's endpoint is refused.
	status, body, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{
		"check_results": []any{map[string]any{"endpoint_id": "00000000-0000-4000-8000-000000000001", "success": true}}})
	if status != 400 || !strings.Contains(fmt.Sprint(body), "check_results.0.endpoint_id") {
		t.Fatalf("foreign check result: %d %v", status, body)
	}
}

func TestPersistenceSurvivesRestartAndUncleanStop(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api.db")
	s1, err := New(Config{Seed: testSeed(t), DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	ts1 := newServing(t, s1)
	_, ep, _ := do(t, ts1, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "kept", "remote_address": "k.example.com"})
	_, del, _ := do(t, ts1, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "gone", "remote_address": "g.example.com"})
	do(t, ts1, DevAgentToken, "DELETE", "/api/v1/endpoints/"+del["id"].(string)+"/", nil)
	do(t, ts1, DevSystemToken, "PATCH", "/api/v1/system/config/", map[string]any{"OPERATOR_BLOCK_VERSION": "0.9.0"})
	// Unclean stop: s1 is never closed. A second process opens the same file.
	s2, err := New(Config{Seed: testSeed(t), DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	ts2 := newServing(t, s2)
	status, got, raw := do(t, ts2, DevAgentToken, "GET", "/api/v1/endpoints/"+ep["id"].(string)+"/", nil)
	if status != 200 || got["name"] != "kept" {
		t.Fatalf("endpoint lost: %d %s", status, raw)
	}
	if _, gone, _ := do(t, ts2, DevAgentToken, "GET", "/api/v1/endpoints/"+del["id"].(string)+"/", nil); gone["is_deleted"] != true {
		t.Fatalf("soft delete lost: %v", gone)
	}
	if _, cfg, _ := do(t, ts2, DevAgentToken, "GET", "/api/v1/system/config/", nil); cfg["OPERATOR_BLOCK_VERSION"] != "0.9.0" {
		t.Fatalf("system config lost: %v", cfg["OPERATOR_BLOCK_VERSION"])
	}
	// Seeded ids are stable across restarts.
	_, h1, _ := do(t, ts2, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{})
	_ = s2.Close()
	s3, err := New(Config{Seed: testSeed(t), DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	ts3 := newServing(t, s3)
	_, h2, _ := do(t, ts3, DevAgentToken, "POST", "/api/v1/agent/health/", map[string]any{})
	if h1["workspace_id"] != h2["workspace_id"] || h1["agent_id"] != h2["agent_id"] {
		t.Fatalf("ids changed across restart: %v / %v", h1, h2)
	}
	_ = s1.Close()
}

func newServing(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptestServer(s)
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestFaultInjectionIsDeterministic(t *testing.T) {
	run := func(seed int64) string {
		srv, ts := newTestServer(t, Config{})
		if err := srv.SetFaults(FaultRule{Path: "/api/v1/endpoints/*", Status: 503, Rate: 0.5, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i := 0; i < 30; i++ {
			status, _, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/endpoints/", nil)
			fmt.Fprintf(&b, "%d,", status)
		}
		return b.String()
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same faults: %s", a)
	}
	if !strings.Contains(a, "503") || !strings.Contains(a, "200") {
		t.Fatalf("rate 0.5 should mix 503 and 200: %s", a)
	}
}

func TestFaultTimesLatencyAndMethod(t *testing.T) {
	srv, ts := newTestServer(t, Config{})
	if err := srv.SetFaults(FaultRule{Path: "/api/v1/hosts/", Method: "WRITE", Status: 500, Times: 2}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/hosts/", nil); s != 200 {
		t.Fatalf("a WRITE fault hit a GET: %d", s)
	}
	body := map[string]any{"name": "h", "hostname": "h"}
	for i, want := range []int{500, 500, 201} {
		if s, _, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/hosts/", body); s != want {
			t.Fatalf("POST %d: %d, want %d", i, s, want)
		}
	}
	if err := srv.SetFaults(FaultRule{Path: "/api/v1/pops/", LatencyMS: 150}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if s, _, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/pops/", nil); s != 200 {
		t.Fatalf("latency-only fault changed the answer: %d", s)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("latency not applied")
	}
	if err := srv.SetFaults(FaultRule{Path: "/api/v1/pops/"}); err == nil {
		t.Fatal("a rule without effect was accepted")
	}
}

func TestCollisionRecord(t *testing.T) {
	srv, ts := newTestServer(t, Config{})
	for i := 0; i < 2; i++ {
		if s, _, raw := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "dup", "remote_address": "d.example.com"}); s != 201 {
			t.Fatalf("create %d: %d %s", i, s, raw)
		}
	}
	// Same name in another workspace is no collision.
	do(t, ts.URL, otherAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "dup", "remote_address": "d.example.com"})
	c := srv.Collisions()
	if len(c) != 1 || c[0].Resource != "endpoints" || c[0].Key != "name=dup" || len(c[0].IDs) != 2 {
		t.Fatalf("collisions %+v", c)
	}
	var viaHTTP []Collision
	resp, _ := http.Get(ts.URL + "/_emulator/collisions")
	_ = json.NewDecoder(resp.Body).Decode(&viaHTTP)
	resp.Body.Close()
	if len(viaHTTP) != 1 {
		t.Fatalf("/_emulator/collisions %v", viaHTTP)
	}
}

func TestPaginationAndCounters(t *testing.T) {
	srv, ts := newTestServer(t, Config{})
	for i := 0; i < 25; i++ {
		do(t, ts.URL, DevAgentToken, "POST", "/api/v1/hosts/", map[string]any{"name": fmt.Sprintf("h%02d", i), "hostname": "x"})
	}
	seen := map[string]bool{}
	next := ts.URL + "/api/v1/hosts/?page_size=10"
	pages := 0
	for next != "" {
		pages++
		path := strings.TrimPrefix(next, "http://"+strings.TrimPrefix(ts.URL, "http://"))
		_, page, _ := do(t, ts.URL, DevAgentToken, "GET", path, nil)
		if page["count"].(float64) != 25 {
			t.Fatalf("count %v", page["count"])
		}
		for _, r := range page["results"].([]any) {
			seen[r.(map[string]any)["id"].(string)] = true
		}
		next, _ = page["next"].(string)
	}
	if pages != 3 || len(seen) != 25 {
		t.Fatalf("%d pages, %d distinct rows", pages, len(seen))
	}
	if s, _, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/hosts/?page=9", nil); s != 404 {
		t.Fatalf("page out of range: %d", s)
	}
	c := srv.Counters()["hosts"]
	if c.Writes != 25 || c.Reads != 4 || c.ByMethod["POST"] != 25 {
		t.Fatalf("counters %+v", c)
	}
}

func TestAuthAndTenancy(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	if s, m, _ := do(t, ts.URL, "wrong", "GET", "/api/v1/endpoints/", nil); s != 401 || !strings.Contains(fmt.Sprint(m), "authentication_failed") {
		t.Fatalf("unknown token: %d %v", s, m)
	}
	// Agents read platform objects but may not write them.
	if s, _, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/pops/", nil); s != 200 {
		t.Fatalf("agent GET pops: %d", s)
	}
	if s, _, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/pops/", map[string]any{"name": "x"}); s != 403 {
		t.Fatalf("agent POST pops: %d", s)
	}
	// The body cannot move an object to another workspace.
	_, other, _ := do(t, ts.URL, otherAgentToken, "POST", "/api/v1/agent/health/", map[string]any{})
	if s, _, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "x", "remote_address": "x", "workspace_id": other["workspace_id"]}); s != 403 {
		t.Fatalf("cross-workspace write: %d", s)
	}
	// Agents see their own workspace only.
	_, page, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/workspaces/", nil)
	if page["count"].(float64) != 1 {
		t.Fatalf("agent sees %v workspaces", page["count"])
	}
	// A system token must name the workspace.
	if s, m, _ := do(t, ts.URL, DevSystemToken, "POST", "/api/v1/hosts/", map[string]any{"name": "h", "hostname": "h"}); s != 400 || !strings.Contains(fmt.Sprint(m), "workspace_id") {
		t.Fatalf("system create without workspace: %d %v", s, m)
	}
	if s, m, raw := do(t, ts.URL, DevSystemToken, "POST", "/api/v1/hosts/", map[string]any{"name": "h", "hostname": "h", "workspace_id": other["workspace_id"]}); s != 201 || m["workspace"].(map[string]any)["name"] != "globex-prod" {
		t.Fatalf("system create: %d %s", s, raw)
	}
	if s, _, _ := do(t, ts.URL, DevAgentToken, "PUT", "/api/v1/agents/"+other["agent_id"].(string)+"/", map[string]any{}); s != 405 && s != 404 {
		t.Fatalf("agents are read-only: %d", s)
	}
}

// TestOperatorRolloutBatching: seed 000's gating and blockers, one rule each.
func TestOperatorRolloutBatching(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	seed := testSeed(t)
	seed.Organizations = append(seed.Organizations, SeedOrganization{Name: "initech", Workspaces: []SeedWorkspace{
		{Name: "initech-prod", Pop: "fra1", Tokens: []string{"third-token"}},
		{Name: "initech-dev", Pop: "fra1", Tokens: []string{"fourth-token"}},
		{Name: "initech-lab", Pop: "fra1"}}})
	srv, ts := newTestServer(t, Config{Seed: seed, Now: clock, AgentSilenceThreshold: 2 * time.Minute})
	cluster := map[string]string{} // token → cluster id
	var apps []string
	for _, tok := range []string{DevAgentToken, otherAgentToken, "third-token", "fourth-token"} {
		if tok != "fourth-token" { // initech-dev has a token, but no operator ever reported
			do(t, ts.URL, tok, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "version": "0.1.0"})
		}
		_, c, _ := do(t, ts.URL, tok, "POST", "/api/v1/kubernetes/clusters/", map[string]any{"kind": "generic", "name": "c"})
		cluster[tok] = c["id"].(string)
		_, a, _ := do(t, ts.URL, tok, "POST", "/api/v1/kubernetes/apps/", map[string]any{"name": "polycrate-operator", "kind": "polycrate",
			"k8s_cluster": c["id"], "installed_version": "0.1.0"})
		apps = append(apps, tok+" "+a["id"].(string))
	}
	// initech-lab: a cluster the platform registered; its workspace has no agent token.
	_, wss, _ := do(t, ts.URL, DevSystemToken, "GET", "/api/v1/workspaces/?name_exact=initech-lab", nil)
	lab := wss["results"].([]any)[0].(map[string]any)["id"].(string)
	_, c, raw := do(t, ts.URL, DevSystemToken, "POST", "/api/v1/kubernetes/clusters/", map[string]any{"kind": "generic", "name": "lab", "workspace_id": lab})
	if c["id"] == nil {
		t.Fatalf("lab cluster: %s", raw)
	}
	// The other workspace's operator falls silent: CRITICAL after the threshold.
	advance(3 * time.Minute)
	for _, tok := range []string{DevAgentToken, "third-token"} {
		do(t, ts.URL, tok, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "version": "0.1.0"})
	}
	srv.Tick()
	// initech-prod is in a maintenance now.
	_, wsp, _ := do(t, ts.URL, DevSystemToken, "GET", "/api/v1/workspaces/?name_exact=initech-prod", nil)
	prod := wsp["results"].([]any)[0].(map[string]any)["id"].(string)
	if st, _, raw := do(t, ts.URL, DevSystemToken, "POST", "/api/v1/maintenances/", map[string]any{"name": "kernel updates", "workspace_id": prod,
		"start": now.Add(-time.Minute).Format(time.RFC3339), "end": now.Add(time.Hour).Format(time.RFC3339)}); st != 201 {
		t.Fatalf("maintenance: %d %s", st, raw)
	}
	do(t, ts.URL, DevSystemToken, "PATCH", "/api/v1/system/config/", map[string]any{"OPERATOR_BLOCK_VERSION": "0.2.0", "OPERATOR_ROLLOUT_PERCENTAGE": 20})

	rows := func(token string) map[string]map[string]any {
		t.Helper()
		status, agg, raw := do(t, ts.URL, token, "GET", "/api/v1/operator-rollout/", nil)
		if status != 200 {
			t.Fatalf("%d %s", status, raw)
		}
		out := map[string]map[string]any{}
		for _, c := range agg["clusters"].([]any) {
			row := c.(map[string]any)
			out[row["cluster_id"].(string)] = row
		}
		return out
	}
	expect := func(r map[string]any, status, blocker string) {
		t.Helper()
		if r["rollout_status"] != status || (blocker != "" && !strings.Contains(fmt.Sprint(r["blockers"]), blocker)) {
			t.Fatalf("row %v: want %s with a blocker saying %q", r, status, blocker)
		}
	}
	all := rows(DevSystemToken)
	if len(all) != 5 {
		t.Fatalf("rows %v", all)
	}
	// 20 % of 5 = 1 at a time: the cluster in maintenance goes first.
	expect(all[cluster["third-token"]], RolloutUpdating, "maintenance active: kernel updates")
	expect(all[cluster[DevAgentToken]], RolloutWaitingCanary, "canary gate")
	expect(all[cluster[otherAgentToken]], RolloutDeferredCritical, "state CRITICAL")
	expect(all[cluster["fourth-token"]], RolloutBlocked, "OperatorConfig missing")
	expect(all[c["id"].(string)], RolloutBlocked, "no agent token")
	if all[cluster["third-token"]]["desired_version"] != "0.2.0" || all[cluster[DevAgentToken]]["desired_version"] != "0.1.0" {
		t.Fatalf("desired versions: %v", all)
	}
	// The app of each cluster shows its desired version.
	desired := map[string]int{}
	for _, a := range apps {
		tok, id, _ := strings.Cut(a, " ")
		_, app, _ := do(t, ts.URL, tok, "GET", "/api/v1/kubernetes/apps/"+id+"/", nil)
		desired[fmt.Sprint(app["desired_version"])]++
	}
	if desired["0.2.0"] != 1 || desired["0.1.0"] != 3 {
		t.Fatalf("desired versions %v", desired)
	}

	// Force the waiting cluster: updated regardless of the gate (and no slot taken).
	if _, row, _ := do(t, ts.URL, DevSystemToken, "POST", "/api/v1/operator-rollout/"+cluster[DevAgentToken]+"/force-update/", nil); row["rollout_status"] != RolloutForced || row["desired_version"] != "0.2.0" {
		t.Fatalf("force: %v", row)
	}
	expect(rows(DevSystemToken)[cluster["third-token"]], RolloutUpdating, "")
	// Pause the one in maintenance: skipped; the batch slot is free, nobody else may take it.
	if _, row, _ := do(t, ts.URL, DevSystemToken, "POST", "/api/v1/operator-rollout/"+cluster["third-token"]+"/pause/", nil); row["rollout_status"] != RolloutPaused || row["desired_version"] != "0.1.0" {
		t.Fatalf("pause: %v", row)
	}
	// The silent operator reports again: no longer CRITICAL, it takes the slot.
	do(t, ts.URL, otherAgentToken, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "version": "0.1.0"})
	srv.Tick()
	expect(rows(DevSystemToken)[cluster[otherAgentToken]], RolloutUpdating, "")

	// A customer sees its own cluster's row only, and may not steer.
	own := rows(DevAgentToken)
	if len(own) != 1 || own[cluster[DevAgentToken]] == nil {
		t.Fatalf("a customer's rows: %v", own)
	}
	if s, _, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/operator-rollout/"+cluster[DevAgentToken]+"/pause/", nil); s != 403 {
		t.Fatalf("a customer paused: %d", s)
	}
	// An updated cluster is up to date; the histogram counts versions.
	_, a0, _ := strings.Cut(apps[0], " ")
	do(t, ts.URL, DevAgentToken, "PATCH", "/api/v1/kubernetes/apps/"+a0+"/", map[string]any{"installed_version": "0.2.0"})
	_, agg, _ := do(t, ts.URL, DevSystemToken, "GET", "/api/v1/operator-rollout/", nil)
	if v := agg["versions"].(map[string]any); v["0.2.0"] != 1.0 || v["0.1.0"] != 3.0 {
		t.Fatalf("versions %v", v)
	}
	expect(rows(DevSystemToken)[cluster[DevAgentToken]], RolloutUpToDate, "")
}

func TestIndexPageAndNoControls(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	do(t, ts.URL, DevAgentToken, "POST", "/api/v1/endpoints/", map[string]any{"name": "shown", "remote_address": "shown.example.com"})
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"Polycrate API emulator", "shown.example.com", "production", "Agents", "S3 buckets"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("index page lacks %q", want)
		}
	}
	_, off := newTestServer(t, Config{NoControls: true})
	if r, _ := http.Get(off.URL + "/_emulator/counters"); r.StatusCode != 404 {
		t.Fatalf("controls on with --no-controls: %d", r.StatusCode)
	}
}

// FuzzRequestDecoding: whatever the body, the emulator never panics and never
// answers 5xx; a body it cannot accept is a 4xx.
func FuzzRequestDecoding(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"x","remote_address":"y"}`, `[]`, `"x"`, `{"spec":{"http":{"path":1}}}`, `{"check_results":[{}]}`,
		`{"name":"a","hostname":"b","k8s_cluster":"00000000-0000-4000-8000-000000000000"}`, `{`, `null`, `{"labels":{"a":[1,{"b":null}]}}`} {
		f.Add([]byte(s), uint8(0), uint8(0))
	}
	srv, err := New(Config{Seed: testSeed(f)})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	paths := []string{"/api/v1/endpoints/", "/api/v1/hosts/", "/api/v1/agent/health/", "/api/v1/kubernetes/clusters/",
		"/api/v1/s3/buckets/", "/api/v1/system/config/", "/api/v1/domains/dnsrecords/", "/api/v1/agent/errors/",
		"/api/v1/loadbalancers/instances/", "/api/v1/certificates/"}
	methods := []string{"POST", "PUT", "PATCH"}
	f.Fuzz(func(t *testing.T, body []byte, p, m uint8) {
		path := paths[int(p)%len(paths)]
		method := methods[int(m)%len(methods)]
		if method != "POST" && !strings.HasPrefix(path, "/api/v1/system/") {
			path += "00000000-0000-4000-8000-000000000000/"
		}
		req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+DevSystemToken)
		if len(body)%2 == 0 {
			req.Header.Set("Authorization", "Bearer "+DevAgentToken)
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body.String())
		}
	})
}

// name_exact is served from the name index: exact (not a substring), follows a
// rename and a deletion, and still applies the other filters.
func TestNameExactThroughTheIndex(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	ids := map[string]string{}
	for _, n := range []string{"web", "web-2", "db"} {
		_, o, _ := do(t, ts.URL, DevAgentToken, "POST", "/api/v1/hosts/", map[string]any{"name": n, "hostname": n + ".example.com"})
		ids[n] = o["id"].(string)
	}
	names := func(query string) []string {
		t.Helper()
		_, page, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/hosts/?"+query, nil)
		var out []string
		for _, r := range page["results"].([]any) {
			out = append(out, r.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := names("name_exact=web"); len(got) != 1 || got[0] != ids["web"] {
		t.Fatalf("name_exact=web: %v", got)
	}
	if got := names("name_exact=web&hostname=db.example.com"); len(got) != 0 {
		t.Fatalf("the other filters were not applied: %v", got)
	}
	do(t, ts.URL, DevAgentToken, "PATCH", "/api/v1/hosts/"+ids["web"]+"/", map[string]any{"name": "frontend"})
	if got := names("name_exact=web"); len(got) != 0 {
		t.Fatalf("the old name still matches after a rename: %v", got)
	}
	if got := names("name_exact=frontend"); len(got) != 1 || got[0] != ids["web"] {
		t.Fatalf("name_exact=frontend: %v", got)
	}
	do(t, ts.URL, DevAgentToken, "DELETE", "/api/v1/hosts/"+ids["db"]+"/", nil)
	if got := names("name_exact=db"); len(got) != 0 {
		t.Fatalf("a deleted object matches: %v", got)
	}
}

// A drop after commit takes the write and loses the answer: what a crash or a
// proxy reset after the API committed looks like to a client.
func TestDropAfterCommit(t *testing.T) {
	srv, ts := newTestServer(t, Config{})
	if err := srv.SetFaults(FaultRule{Path: "/api/v1/hosts/", Method: "POST", Drop: true, AfterCommit: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"name": "committed", "hostname": "committed"})
	req, _ := http.NewRequest("POST", ts.URL+"/api/v1/hosts/", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+DevAgentToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("an answer came through: %d", resp.StatusCode)
	}
	_, m, _ := do(t, ts.URL, DevAgentToken, "GET", "/api/v1/hosts/?name_exact=committed", nil)
	if n, _ := m["count"].(float64); n != 1 {
		t.Fatalf("the write was not committed: %v", m)
	}
	if err := srv.SetFaults(FaultRule{Path: "/x", AfterCommit: true, Status: 500}); err == nil {
		t.Fatal("after_commit without drop was accepted")
	}
}
