package emulator

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The three agent operations (reference core §4): the health report registers the
// agent and carries check results; the endpoint list needs X-Agent-ID; error reports.

var checkResultFields = []Field{
	F("endpoint_id", UUID, req), F("success", Bool, req), F("checked_at", DateTime),
	F("status_code", Int, null), F("error_code", Int), F("error_name", String), F("duration_ms", Int, null),
	F("ssl_cert_not_after", DateTime, null),
	F("http_dns_lookup_ms", Int, null), F("http_tcp_connect_ms", Int, null), F("http_tls_handshake_ms", Int, null),
	F("http_time_to_first_byte_ms", Int, null), F("http_response_size_bytes", Int, null), F("http_tls_version", String, null),
	F("http_resolved_ip", String, null), F("resolved_ip", String, null), F("http_error_category", String, null),
	F("http_tls_valid", Bool, null), F("http_tls_days_until_expiry", Int, null), F("http_tls_issuer", String, null),
	F("http_tls_subject", String, null), F("icmp_rtt_ms", Number, null), F("icmp_min_rtt_ms", Number, null),
	F("icmp_max_rtt_ms", Number, null), F("icmp_packet_loss_percent", Number, null), F("icmp_packets_sent", Int, null),
	F("icmp_packets_received", Int, null), F("tcp_connected", Bool, null), F("tcp_banner", String, null),
	F("tcp_response_matched", Bool, null), F("dns_rcode", String, null), F("dns_records", StrList, null),
	F("dns_matched", Bool, null), F("dns_query_time_ms", Int, null), F("dns_protocol", String, null),
	F("dns_record_type", String, null), F("dns_dnssec_valid", Bool, null),
}

// HealthFields is AgentHealthDataRequest; every field optional.
var HealthFields = []Field{
	F("reported_agent_id", String), F("version", String), F("kind", String, enum("agent", "operator")),
	F("status", String, enum("healthy", "degraded", "unhealthy", "critical"), def("healthy")),
	F("uptime_seconds", Int, minOf(0)), F("start_time", DateTime), F("last_config_update", DateTime),
	F("config_version", String), F("storage_healthy", Bool), F("api_connected", Bool), F("reported_at", DateTime),
	F("resource_metrics", Any), F("network_metrics", Any), F("check_metrics", Any), F("error_counts", Any),
	F("warnings", StrList), F("critical_errors", StrList), F("system_info", Any), F("storage_stats", Any),
	F("agent_configuration", Any),
	F("check_summary", Obj, sub(F("monitored_endpoints", Int), F("checks_per_minute", Number), F("checks_in_queue", Int),
		F("failed_checks", Int), F("successful_checks", Int), F("checks_since_last_report", Int), F("total_checks", Int))),
	F("check_results", ObjList, sub(checkResultFields...)),
}

// ErrorReportFields is AgentErrorReportRequestRequest; every field required.
var ErrorReportFields = []Field{
	F("agent_id", String, req), F("timestamp", DateTime, req), F("total_errors", Int, req),
	F("error_counts", Any, req), F("critical_errors", StrList, req), F("recent_errors", Any, req), F("system_info", Any, req),
}

func (s *Server) agentHealth(w http.ResponseWriter, r *http.Request, p principal) {
	if p.system {
		forbidden(w, "No workspace found")
		return
	}
	body, ok := readBody(w, r, true)
	if !ok {
		return
	}
	if errs := validateObject(HealthFields, body, "", false); len(errs) > 0 {
		writeValidation(w, errs)
		return
	}
	applyDefaults(HealthFields, body)
	ws, _ := s.store.Get("workspaces", p.workspace)
	popID, _ := ws.Data["_pop"].(string)
	pop, hasPop := s.store.Get("pops", popID)
	if !hasPop {
		writeValidation(w, []FieldError{{"non_field_errors", "invalid", "Invalid health data or workspace has no PoP"}})
		return
	}
	reported, _ := body["reported_agent_id"].(string)
	kind, _ := body["kind"].(string)
	if kind == "" {
		kind = "agent"
	}
	results, _ := body["check_results"].([]any)
	for i, it := range results {
		id := it.(map[string]any)["endpoint_id"].(string)
		if !s.mayReport(p, reported, kind, id) {
			writeValidation(w, []FieldError{{fmt.Sprintf("check_results.%d.endpoint_id", i), "does_not_exist", fmt.Sprintf("Invalid pk \"%s\" - object does not exist.", id)}})
			return
		}
	}
	now := s.cfg.Now().UTC()
	agent, recovered, err := s.upsertAgent(p, ws, pop, reported, kind, body, now)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
		return
	}
	if recovered != "" {
		s.closeDowntime(recovered)
	}
	s.storeCheckResults(agent, results)
	s.deriveEndpointStates(results)
	org, _ := s.store.Get("organizations", p.org)
	writeJSON(w, http.StatusCreated, map[string]any{
		"status": "success", "agent_id": agent.ID, "reported_agent_id": reported, "health_data_id": nil,
		"pop_name": pop.Data["name"], "pop_id": pop.ID,
		"endpoint_monitoring_mode":         ws.Data["endpoint_monitoring_mode"],
		"operator_global_endpoint_monitor": ws.Data["global_endpoint_monitor"] == true,
		"workspace_id":                     ws.ID, "workspace_name": ws.Data["name"],
		"organization_id": org.ID, "organization_name": org.Data["name"],
	})
}

// upsertAgent records a health report on the reporting agent (found by
// reported_agent_id and kind in the workspace, else created): last seen, state,
// the report's health; recovered is the downtime the report ends ("" if none).
func (s *Server) upsertAgent(p principal, ws, pop *Object, reported, kind string, body map[string]any, now time.Time) (agent *Object, recovered string, err error) {
	state := map[string]string{"healthy": "OK", "degraded": "WARNING", "unhealthy": "CRITICAL", "critical": "CRITICAL"}[body["status"].(string)]
	err = s.store.Update("agents", func(objs map[string]*Object) ([]*Object, error) {
		for _, o := range objs {
			if o.DeletedAt == nil && o.Workspace == p.workspace && o.Data["reported_agent_id"] == reported && o.Data["kind"] == kind {
				agent = o.clone()
			}
		}
		if agent == nil {
			agent = &Object{Resource: "agents", ID: uuid.NewString(), Workspace: p.workspace, Organization: p.org, CreatedAt: now,
				Data: map[string]any{"name": agentName(ws, kind, reported), "kind": kind, "reported_agent_id": reported,
					"source_pop": map[string]any{"id": pop.ID, "name": pop.Data["name"], "kind": pop.Data["kind"]}, "k8s_app": nil}}
			objs[agent.ID] = agent
		}
		objs[agent.ID] = agent
		if dt, _ := agent.Data["_downtime"].(string); dt != "" {
			recovered = dt
			delete(agent.Data, "_downtime")
		}
		if v, ok := body["version"]; ok {
			agent.Data["version"] = v
		}
		agent.Data["last_seen"] = now.Format(time.RFC3339Nano)
		agent.Data["is_active"] = true
		agent.Data["state"] = state
		agent.Data["_health"] = map[string]any{"status": body["status"], "warnings": body["warnings"], "uptime_seconds": body["uptime_seconds"],
			"api_connected": body["api_connected"], "check_summary": body["check_summary"], "last_health_report_at": now.Format(time.RFC3339Nano)}
		agent.UpdatedAt = now
		return []*Object{agent}, nil
	})
	return agent, recovered, err
}

func agentName(ws *Object, kind, reported string) string {
	name := fmt.Sprintf("%s-%s", ws.Data["name"], kind)
	if reported != "" {
		name += "-" + reported
	}
	return name
}

// mayReport says whether the reporting agent may send a result for endpoint id:
// an endpoint of its workspace, or one assigned to it (a global monitor's).
func (s *Server) mayReport(p principal, reported, kind, id string) bool {
	if _, ok := s.visible(byName["endpoints"], id, p, false); ok {
		return true
	}
	e, ok := s.store.Get("endpoints", id)
	if !ok || e.DeletedAt != nil {
		return false
	}
	for _, a := range s.store.List("agents") {
		if a.DeletedAt == nil && a.Workspace == p.workspace && a.Data["reported_agent_id"] == reported && a.Data["kind"] == kind {
			return contains(s.assignedAgents(e), a.ID)
		}
	}
	return false
}

// storeCheckResults keeps the latest result and counters per agent and endpoint
// (the EndpointAgentAssignment of the real service).
func (s *Server) storeCheckResults(agent *Object, results []any) {
	if len(results) == 0 {
		return
	}
	now := s.cfg.Now().UTC().Format(time.RFC3339Nano)
	_ = s.store.Update(internalResource, func(objs map[string]*Object) ([]*Object, error) {
		var changed []*Object
		for _, it := range results {
			res := it.(map[string]any)
			id := "assign:" + agent.ID + ":" + res["endpoint_id"].(string)
			a := objs[id]
			if a != nil {
				a = a.clone()
				objs[id] = a
			} else {
				a = &Object{Resource: internalResource, ID: id, Workspace: agent.Workspace, Data: map[string]any{
					"agent_id": agent.ID, "endpoint_id": res["endpoint_id"], "assigned_at": now,
					"checks_executed": float64(0), "checks_successful": float64(0), "checks_failed": float64(0)}}
				objs[id] = a
			}
			checked, _ := res["checked_at"].(string)
			if checked == "" {
				checked = now
			}
			success := res["success"] == true
			a.Data["last_check_at"] = checked
			a.Data["last_check_success"] = success
			a.Data["last_check_status_code"] = res["status_code"]
			a.Data["last_check_error_code"] = orDefault(res["error_code"], float64(0))
			a.Data["last_check_error_name"] = orDefault(res["error_name"], "")
			a.Data["last_check_duration_ms"] = res["duration_ms"]
			a.Data["checks_executed"] = a.Data["checks_executed"].(float64) + 1
			if success {
				a.Data["checks_successful"] = a.Data["checks_successful"].(float64) + 1
			} else {
				a.Data["checks_failed"] = a.Data["checks_failed"].(float64) + 1
			}
			changed = append(changed, a)
		}
		return changed, nil
	})
}

// deriveEndpointStates sets each checked endpoint's state from the latest result
// of each agent assigned to it: OK while any of them succeeds, CRITICAL (reason:
// the failure) when all fail. Turning CRITICAL opens a downtime for the endpoint,
// turning OK again closes it, as the real service does for a ManagedObject.
func (s *Server) deriveEndpointStates(results []any) {
	now := s.cfg.Now().UTC()
	seen := map[string]bool{}
	for _, it := range results {
		id := it.(map[string]any)["endpoint_id"].(string)
		if seen[id] {
			continue
		}
		seen[id] = true
		e, ok := s.store.Get("endpoints", id)
		if !ok || e.DeletedAt != nil {
			continue
		}
		up, reason := false, ""
		for _, agentID := range s.assignedAgents(e) {
			a, ok := s.store.Get(internalResource, "assign:"+agentID+":"+id)
			if !ok {
				continue
			}
			if a.Data["last_check_success"] == true {
				up = true
				break
			}
			reason = fmt.Sprintf("check failed: %v", orDefault(a.Data["last_check_error_name"], "error"))
			if code := a.Data["last_check_status_code"]; code != nil {
				reason += fmt.Sprintf(" (status %v)", code)
			}
		}
		if !up && reason == "" {
			continue // no assigned agent has reported yet
		}
		state := map[bool]string{true: "OK", false: "CRITICAL"}[up]
		var open *Object
		var closeID string
		_ = s.store.Update("endpoints", func(objs map[string]*Object) ([]*Object, error) {
			prev, _ := objs[id].Data["state"].(string)
			if prev == state && (up || objs[id].Data["state_reason"] == reason) {
				return nil, nil
			}
			o := edit(objs, id, func(o *Object) {
				o.Data["last_state"] = prev
				o.Data["state"] = state
				o.Data["state_reason"] = map[bool]any{true: nil, false: reason}[up]
				if prev != state {
					o.Data["last_state_change"] = now.Format(time.RFC3339Nano)
				}
				o.UpdatedAt = now
			})
			dt, _ := o.Data["_downtime"].(string)
			switch {
			case !up && dt == "":
				open = &Object{Resource: "downtimes", ID: uuid.NewString(), Organization: o.Organization, CreatedAt: now, UpdatedAt: now,
					Data: map[string]any{"name": fmt.Sprintf("%s down", o.Data["name"]), "kind": "generic", "severity": "major",
						"is_active": true, "counts_towards_sla": true, "started_at": now.Format(time.RFC3339Nano), "ended_at": nil,
						"state": "CRITICAL", "affected_objects_count": float64(1),
						"affected_objects": []any{map[string]any{"type": "endpoint", "id": o.ID, "name": o.Data["name"]}}}}
				o.Data["_downtime"] = open.ID
			case up && dt != "":
				closeID = dt
				delete(o.Data, "_downtime")
			}
			return []*Object{o}, nil
		})
		if open != nil {
			_ = s.store.Save(open)
		}
		if closeID != "" {
			s.closeDowntime(closeID)
		}
	}
}

func orDefault(v, d any) any {
	if v == nil {
		return d
	}
	return v
}

// agentFor finds a registered agent of the workspace by platform id or reported id.
func (s *Server) agentFor(p principal, id string) *Object {
	for _, o := range s.store.List("agents") {
		if o.DeletedAt == nil && o.Workspace == p.workspace && (o.ID == id || o.Data["reported_agent_id"] == id) {
			return o
		}
	}
	return nil
}

func (s *Server) agentEndpoints(w http.ResponseWriter, r *http.Request, p principal) {
	if p.system {
		forbidden(w, "No workspace found")
		return
	}
	id := strings.TrimSpace(r.Header.Get("X-Agent-ID"))
	if id == "" {
		writeValidation(w, []FieldError{{"X-Agent-ID", "required", "Agent ID required"}})
		return
	}
	agent := s.agentFor(p, id)
	if agent == nil {
		writeError(w, http.StatusNotFound, "client_error", "not_found", "Agent not registered", nil)
		return
	}
	out := []any{}
	for _, e := range s.store.List("endpoints") {
		if e.DeletedAt != nil || !contains(s.assignedAgents(e), agent.ID) {
			continue
		}
		out = append(out, map[string]any{"id": e.ID, "name": e.Data["name"], "kind": e.Data["kind"],
			"remote_address": e.Data["remote_address"], "remote_port": e.Data["remote_port"], "spec": e.Data["spec"],
			"workspace": minimal(s.workspaceSimple(e.Workspace)), "organization": minimal(s.orgSimple(e.Organization))})
	}
	writeJSON(w, http.StatusOK, out)
}

// assignedAgents is the server-side assignment (docs/api-emulator.md, "Endpoint
// assignment"): a monitored endpoint (not do_not_monitor, not archived) goes to
// active agents, up to max_agents_per_endpoint (default 1), in this order: the
// operators of its own workspace, its CLI agents, then the agents of global
// monitor workspaces (global_endpoint_monitor) whose endpoint_monitoring_mode
// admits it — auto: any workspace; organization_only: the same organization;
// pop_only: a workspace at the same PoP; workspace_only: none. Oldest first
// within each group. An agent that falls silent (inactive) loses its endpoints.
func (s *Server) assignedAgents(e *Object) []string {
	if e.Data["do_not_monitor"] == true || e.Data["archived"] == true || e.DeletedAt != nil {
		return []string{}
	}
	limit := 1
	if n, ok := e.Data["max_agents_per_endpoint"].(float64); ok && n > 0 {
		limit = int(n)
	}
	var ops, others, global []string
	for _, a := range s.store.List("agents") {
		if a.DeletedAt != nil || a.Data["is_active"] == false {
			continue
		}
		switch {
		case a.Workspace == e.Workspace && a.Data["kind"] == "operator":
			ops = append(ops, a.ID)
		case a.Workspace == e.Workspace:
			others = append(others, a.ID)
		case s.monitorsGlobally(a, e):
			global = append(global, a.ID)
		}
	}
	all := append(append(ops, others...), global...)
	if len(all) > limit {
		all = all[:limit]
	}
	if all == nil {
		return []string{}
	}
	return all
}

// minimal is the {id, name} map AgentEndpoint carries for a workspace or
// organization (nil when there is none).
func minimal(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	return map[string]any{"id": m["id"], "name": m["name"]}
}

// monitorsGlobally says whether agent a, of another workspace, may monitor e.
func (s *Server) monitorsGlobally(a, e *Object) bool {
	ws, ok := s.store.Get("workspaces", a.Workspace)
	if !ok || ws.Data["global_endpoint_monitor"] != true {
		return false
	}
	switch ws.Data["endpoint_monitoring_mode"] {
	case "organization_only":
		return a.Organization == e.Organization
	case "pop_only":
		target, ok := s.store.Get("workspaces", e.Workspace)
		return ok && target.Data["_pop"] == ws.Data["_pop"]
	case "workspace_only":
		return false
	}
	return true // auto
}

func (s *Server) agentErrors(w http.ResponseWriter, r *http.Request, p principal) {
	if p.system {
		forbidden(w, "No workspace found")
		return
	}
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	if errs := validateObject(ErrorReportFields, body, "", false); len(errs) > 0 {
		writeValidation(w, errs)
		return
	}
	agent := s.agentFor(p, body["agent_id"].(string))
	if agent == nil {
		writeError(w, http.StatusNotFound, "client_error", "not_found", "Agent not found", nil)
		return
	}
	report := &Object{Resource: internalResource, ID: "error:" + uuid.NewString(), Workspace: p.workspace, Data: body,
		CreatedAt: s.cfg.Now().UTC(), UpdatedAt: s.cfg.Now().UTC()}
	report.Data["_agent"] = agent.ID
	if err := s.store.Save(report); err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
		return
	}
	if crit, _ := body["critical_errors"].([]any); len(crit) > 0 {
		_ = s.store.Update("agents", func(objs map[string]*Object) ([]*Object, error) {
			a := edit(objs, agent.ID, func(a *Object) { a.Data["conditions"] = map[string]any{"critical_errors": crit} })
			return []*Object{a}, nil
		})
	}
	writeJSON(w, http.StatusCreated, map[string]any{"status": "success", "agent_id": agent.ID, "error_id": strings.TrimPrefix(report.ID, "error:")})
}

// agentAssignments serves GET /api/v1/agents/{id}/assignments/.
func (s *Server) agentAssignments(w http.ResponseWriter, r *http.Request, p principal) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/agents/"), "/assignments/")
	agent, ok := s.visible(byName["agents"], id, p, false)
	if !ok {
		notFound(w)
		return
	}
	var rows []*Object
	for _, e := range s.store.List("endpoints") {
		if e.DeletedAt != nil || !contains(s.assignedAgents(e), agent.ID) {
			continue
		}
		row := map[string]any{"endpoint_id": e.ID, "endpoint_name": e.Data["name"], "endpoint_kind": e.Data["kind"],
			"endpoint_url": "http://emulator/api/v1/endpoints/" + e.ID + "/", "workspace_id": e.Workspace,
			"workspace_name":    s.workspaceSimple(e.Workspace).(map[string]any)["name"],
			"organization_name": s.orgSimple(e.Organization).(map[string]any)["name"],
			"assigned_at":       e.CreatedAt.Format(time.RFC3339Nano), "last_check_at": nil, "last_check_success": nil,
			"last_check_status_code": nil, "last_check_error_code": 0, "last_check_error_name": "", "last_check_duration_ms": nil,
			"checks_executed": 0, "checks_successful": 0, "checks_failed": 0, "success_rate": 0.0}
		if a, found := s.store.Get(internalResource, "assign:"+agent.ID+":"+e.ID); found {
			for k, v := range a.Data {
				if strings.HasPrefix(k, "last_check") || strings.HasPrefix(k, "checks_") {
					row[k] = v
				}
			}
			if n := a.Data["checks_executed"].(float64); n > 0 {
				row["success_rate"] = a.Data["checks_successful"].(float64) / n * 100
			}
		}
		rows = append(rows, &Object{Data: row, Seq: e.Seq})
	}
	s.paginate(w, r, rows, func(o *Object) any { return o.Data })
}

// checkAgentSilence turns agents silent past the threshold CRITICAL and opens a
// downtime for each (the real service does this for every ManagedObject that
// turns unhealthy, API 0.11.0).
func (s *Server) checkAgentSilence() {
	now := s.cfg.Now().UTC()
	var opened []*Object
	_ = s.store.Update("agents", func(objs map[string]*Object) ([]*Object, error) {
		var changed []*Object
		for id, a := range objs {
			seen, _ := a.Data["last_seen"].(string)
			t, err := time.Parse(time.RFC3339Nano, seen)
			if a.DeletedAt != nil || err != nil || now.Sub(t) < s.cfg.AgentSilenceThreshold {
				continue
			}
			if dt, _ := a.Data["_downtime"].(string); dt != "" {
				continue
			}
			d := &Object{Resource: "downtimes", ID: uuid.NewString(), Organization: a.Organization, CreatedAt: now, UpdatedAt: now,
				Data: map[string]any{"name": fmt.Sprintf("%s silent", a.Data["name"]), "kind": "generic", "severity": "major",
					"is_active": true, "counts_towards_sla": true, "started_at": now.Format(time.RFC3339Nano), "ended_at": nil,
					"state": "CRITICAL", "affected_objects_count": float64(1),
					"affected_objects": []any{map[string]any{"type": "agent", "id": a.ID, "name": a.Data["name"]}}}}
			opened = append(opened, d)
			a = edit(objs, id, func(*Object) {})
			a.Data["_downtime"] = d.ID
			a.Data["state"] = "CRITICAL"
			a.Data["is_active"] = false
			a.Data["state_reason"] = fmt.Sprintf("No health report since %s", seen)
			changed = append(changed, a)
		}
		return changed, nil
	})
	if len(opened) > 0 {
		_ = s.store.Save(opened...)
	}
}

func (s *Server) closeDowntime(id string) {
	now := s.cfg.Now().UTC().Format(time.RFC3339Nano)
	_ = s.store.Update("downtimes", func(objs map[string]*Object) ([]*Object, error) {
		d := edit(objs, id, func(d *Object) {
			d.Data["is_active"] = false
			d.Data["ended_at"] = now
			d.Data["state"] = "OK"
		})
		if d == nil {
			return nil, nil
		}
		return []*Object{d}, nil
	})
}
