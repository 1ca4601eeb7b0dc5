package emulator

import (
	"math"
	"net/http"
	"sort"
	"strings"
)

// Extension (seed 000 "Operator-Deployment"): the operator-rollout aggregate. The
// published API has no such resource; the contract marks it as an extension and the
// operator treats a 404 on it as "not supported".

// RolloutRow is one cluster of the operator-rollout aggregate.
type RolloutRow struct {
	ClusterID        string   `json:"cluster_id"`
	ClusterName      string   `json:"cluster_name"`
	WorkspaceID      string   `json:"workspace_id"`
	WorkspaceName    string   `json:"workspace_name"`
	InstalledVersion *string  `json:"installed_version"`
	DesiredVersion   *string  `json:"desired_version"`
	Heartbeat        *string  `json:"heartbeat"`
	State            string   `json:"state"`
	RolloutStatus    string   `json:"rollout_status"`
	Blockers         []string `json:"blockers"`
	Paused           bool     `json:"paused"`
	Forced           bool     `json:"forced"`
}

// rolloutPlan computes every cluster's row: clusters on the target version are
// up_to_date; paused ones wait; forced ones update; CRITICAL ones are deferred; of
// the rest, a batch of OPERATOR_ROLLOUT_PERCENTAGE of all clusters (rounded up, in
// cluster-id order) updates and the others wait behind the canary gate.
func (s *Server) rolloutPlan() (target string, pct float64, rows []*RolloutRow) {
	cfg := s.systemConfigValues()
	target, _ = cfg["OPERATOR_BLOCK_VERSION"].(string)
	pct, _ = cfg["OPERATOR_ROLLOUT_PERCENTAGE"].(float64)
	apps := s.store.List("kubernetes/apps")
	agents := s.store.List("agents")
	var candidates []*RolloutRow
	clusters := s.store.List("kubernetes/clusters")
	for _, c := range clusters {
		if c.DeletedAt != nil {
			continue
		}
		row := &RolloutRow{ClusterID: c.ID, ClusterName: scalarString(c.Data["name"]), WorkspaceID: c.Workspace, State: "OK", Blockers: []string{}}
		if ws, ok := s.store.Get("workspaces", c.Workspace); ok {
			row.WorkspaceName = scalarString(ws.Data["name"])
		}
		for _, a := range apps {
			if a.DeletedAt == nil && a.Data["name"] == "polycrate-operator" && a.Data["k8s_cluster"] == c.ID {
				if v, ok := a.Data["installed_version"].(string); ok {
					row.InstalledVersion = &v
				}
			}
		}
		hasAgent := false
		for _, a := range agents {
			if a.DeletedAt == nil && a.Workspace == c.Workspace && a.Data["kind"] == "operator" {
				hasAgent = true
				if seen, ok := a.Data["last_seen"].(string); ok {
					row.Heartbeat = &seen
				}
				if st, ok := a.Data["state"].(string); ok {
					row.State = st
				}
			}
		}
		if !hasAgent {
			row.Blockers = append(row.Blockers, "no operator agent (no agent token or OperatorConfig)")
		}
		if row.InstalledVersion == nil {
			row.Blockers = append(row.Blockers, "no polycrate-operator app reported")
		}
		if f, ok := s.store.Get(internalResource, "rollout:"+c.ID); ok {
			row.Paused, _ = f.Data["paused"].(bool)
			row.Forced, _ = f.Data["forced"].(bool)
		}
		row.DesiredVersion = row.InstalledVersion
		switch {
		case target == "":
			row.RolloutStatus = "no_target"
		case row.InstalledVersion != nil && *row.InstalledVersion == target:
			row.RolloutStatus = "up_to_date"
			row.Forced = false
		case row.Paused:
			row.RolloutStatus = "paused"
		case row.Forced:
			row.RolloutStatus = "forced"
			t := target
			row.DesiredVersion = &t
		case row.State == "CRITICAL":
			row.RolloutStatus = "deferred_critical"
		default:
			candidates = append(candidates, row)
		}
		rows = append(rows, row)
	}
	batch := int(math.Ceil(float64(len(rows)) * pct / 100))
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].ClusterID < candidates[j].ClusterID })
	for i, row := range candidates {
		if i < batch {
			row.RolloutStatus = "updating"
			t := target
			row.DesiredVersion = &t
		} else {
			row.RolloutStatus = "waiting_canary"
		}
	}
	return target, pct, rows
}

// desiredVersion is the K8sApp extension field desired_version (only on the app
// named polycrate-operator).
func (s *Server) desiredVersion(app *Object) any {
	if app.Data["name"] != "polycrate-operator" {
		return nil
	}
	_, _, rows := s.rolloutPlan()
	for _, r := range rows {
		if r.ClusterID == app.Data["k8s_cluster"] && r.DesiredVersion != nil {
			return *r.DesiredVersion
		}
	}
	return nil
}

// operatorRollout serves GET /api/v1/operator-rollout/ and POST
// /api/v1/operator-rollout/{cluster_id}/force-update/ and …/pause/ (platform admins only).
func (s *Server) operatorRollout(w http.ResponseWriter, r *http.Request, p principal) {
	if !p.system {
		forbidden(w, "The operator rollout is available to platform administrators only.")
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/api/v1/operator-rollout/")
	if rest == "" {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", "Method not allowed.", nil)
			return
		}
		target, pct, rows := s.rolloutPlan()
		versions := map[string]int{}
		for _, row := range rows {
			if row.InstalledVersion != nil {
				versions[*row.InstalledVersion]++
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"target_version": target, "rollout_percentage": pct, "clusters": rows, "versions": versions})
		return
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if len(parts) != 2 || (parts[1] != "force-update" && parts[1] != "pause") || r.Method != http.MethodPost {
		notFound(w)
		return
	}
	if _, ok := s.store.Get("kubernetes/clusters", parts[0]); !ok {
		notFound(w)
		return
	}
	id := "rollout:" + parts[0]
	_ = s.store.Update(internalResource, func(objs map[string]*Object) ([]*Object, error) {
		f := objs[id]
		if f == nil {
			f = &Object{Resource: internalResource, ID: id, Data: map[string]any{}}
		} else {
			f = f.clone()
		}
		objs[id] = f
		f.Data["forced"] = parts[1] == "force-update"
		f.Data["paused"] = parts[1] == "pause"
		return []*Object{f}, nil
	})
	_, _, rows := s.rolloutPlan()
	for _, row := range rows {
		if row.ClusterID == parts[0] {
			writeJSON(w, http.StatusOK, row)
			return
		}
	}
	notFound(w)
}
