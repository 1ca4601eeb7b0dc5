package emulator

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Extension (seed 000 "Operator-Deployment"): the operator-rollout aggregate. The
// published API has no such resource; the contract marks it as an extension and the
// operator treats a 404 on it as "not supported".

// RolloutRow is one cluster of the operator-rollout aggregate: the seed's
// dashboard columns (workspace/cluster, installed and desired version,
// heartbeat, state, rollout status, blockers).
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
	// Maintenance names the maintenance in progress for the cluster ("" none):
	// such clusters are updated first (the seed: "Wartungsslot legitim").
	Maintenance string `json:"maintenance"`
}

// The rollout statuses.
const (
	RolloutNoTarget         = "no_target"
	RolloutUpToDate         = "up_to_date"
	RolloutUpdating         = "updating"
	RolloutForced           = "forced"
	RolloutPaused           = "paused"
	RolloutDeferredCritical = "deferred_critical"
	RolloutWaitingCanary    = "waiting_canary"
	RolloutBlocked          = "blocked"
)

// rolloutPlan computes every cluster's row with the seed's gating (seed 000
// "Rollout-Gating"): a cluster whose installed version differs from the target
// updates when it is in the batch; the batch is OPERATOR_ROLLOUT_PERCENTAGE of
// all clusters (rounded up) updating at the same time, filled with the clusters
// in an active maintenance first, then in cluster-id order. Paused clusters are
// skipped, forced ones update regardless of the gate, CRITICAL ones are deferred
// until their state settles, and a cluster without an agent token or without an
// operator that ever reported is blocked, each with its reason.
func (s *Server) rolloutPlan() (target string, pct float64, rows []*RolloutRow) {
	cfg := s.systemConfigValues()
	target, _ = cfg["OPERATOR_BLOCK_VERSION"].(string)
	pct, _ = cfg["OPERATOR_ROLLOUT_PERCENTAGE"].(float64)
	apps := s.store.List("kubernetes/apps")
	agents := s.store.List("agents")
	maintenances := s.activeMaintenances()
	tokened := map[string]bool{}
	for _, p := range s.tokens {
		tokened[p.workspace] = true
	}
	var candidates []*RolloutRow
	dispatched := map[string]bool{} // clusters already sent to the target: they keep their slot
	for _, c := range s.store.List("kubernetes/clusters") {
		if c.DeletedAt != nil {
			continue
		}
		row, hasAgent, sent := s.clusterRow(c, apps, agents, maintenances, tokened[c.Workspace], target)
		dispatched[c.ID] = sent
		row.DesiredVersion = row.InstalledVersion
		switch {
		case target == "":
			row.RolloutStatus = RolloutNoTarget
		case row.InstalledVersion != nil && *row.InstalledVersion == target:
			row.RolloutStatus = RolloutUpToDate
			row.Forced = false
		case row.Paused:
			row.RolloutStatus = RolloutPaused
			row.Blockers = append(row.Blockers, "paused by an administrator")
		case row.Forced:
			row.RolloutStatus = RolloutForced
			t := target
			row.DesiredVersion = &t
		case !tokened[c.Workspace] || !hasAgent:
			row.RolloutStatus = RolloutBlocked
		case row.State == "CRITICAL" && !dispatched[c.ID]:
			// (An update in flight keeps its slot: a restarting operator may miss a
			// heartbeat or two.)
			row.RolloutStatus = RolloutDeferredCritical
			row.Blockers = append(row.Blockers, "state CRITICAL: deferred until it settles")
		default:
			candidates = append(candidates, row)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ClusterID < rows[j].ClusterID })
	s.fillBatch(candidates, dispatched, len(rows), target, pct)
	return target, pct, rows
}

// clusterRow is a cluster's row before the gate: its operator app's installed
// version and state, its operator agent's heartbeat, its maintenance, its
// flags (dispatched: already sent to the target) and its blockers; tokened says
// its workspace has an agent token.
func (s *Server) clusterRow(c *Object, apps, agents, maintenances []*Object, tokened bool, target string) (row *RolloutRow, hasAgent, dispatched bool) {
	row = &RolloutRow{ClusterID: c.ID, ClusterName: scalarString(c.Data["name"]), WorkspaceID: c.Workspace, State: "OK", Blockers: []string{}}
	ws, _ := s.store.Get("workspaces", c.Workspace)
	if ws != nil {
		row.WorkspaceName = scalarString(ws.Data["name"])
	}
	for _, a := range apps {
		if a.DeletedAt == nil && a.Data["name"] == "polycrate-operator" && a.Data["k8s_cluster"] == c.ID {
			if v, ok := a.Data["installed_version"].(string); ok {
				row.InstalledVersion = &v
			}
			if st, ok := a.Data["state"].(string); ok && st == "CRITICAL" {
				row.State = st
			}
		}
	}
	for _, a := range agents {
		if a.DeletedAt == nil && a.Workspace == c.Workspace && a.Data["kind"] == "operator" {
			hasAgent = true
			if seen, ok := a.Data["last_seen"].(string); ok {
				row.Heartbeat = &seen
			}
			if st, ok := a.Data["state"].(string); ok && st != "" && row.State != "CRITICAL" {
				row.State = st
			}
		}
	}
	if m := maintenanceOf(maintenances, c, ws); m != "" {
		row.Maintenance = m
	}
	if f, ok := s.store.Get(internalResource, "rollout:"+c.ID); ok {
		row.Paused, _ = f.Data["paused"].(bool)
		row.Forced, _ = f.Data["forced"].(bool)
		dispatched = target != "" && f.Data["dispatched"] == target
	}
	switch {
	case !tokened:
		row.Blockers = append(row.Blockers, "no agent token: the cluster's workspace has no API token for an operator")
	case !hasAgent:
		row.Blockers = append(row.Blockers, "OperatorConfig missing: no operator of this cluster has sent a heartbeat")
	}
	if row.Maintenance != "" {
		row.Blockers = append(row.Blockers, "maintenance active: "+row.Maintenance+" (updated first)")
	}
	return row, hasAgent, dispatched
}

// fillBatch gates the candidates: OPERATOR_ROLLOUT_PERCENTAGE of all clusters
// (rounded up) update at a time; a cluster already sent to the target keeps
// its slot (an update in flight cannot be called back), then clusters in an
// active maintenance, then by id. The others wait for the canary gate.
func (s *Server) fillBatch(candidates []*RolloutRow, dispatched map[string]bool, clusters int, target string, pct float64) {
	batch := int(math.Ceil(float64(clusters) * pct / 100))
	sort.SliceStable(candidates, func(i, j int) bool {
		di, dj := dispatched[candidates[i].ClusterID], dispatched[candidates[j].ClusterID]
		if di != dj {
			return di
		}
		mi, mj := candidates[i].Maintenance != "", candidates[j].Maintenance != ""
		if mi != mj {
			return mi
		}
		return candidates[i].ClusterID < candidates[j].ClusterID
	})
	for i, row := range candidates {
		if i < batch {
			row.RolloutStatus = RolloutUpdating
			t := target
			row.DesiredVersion = &t
			if !dispatched[row.ClusterID] {
				s.markDispatched(row.ClusterID, target)
			}
		} else {
			row.RolloutStatus = RolloutWaitingCanary
			row.Blockers = append(row.Blockers, fmt.Sprintf("canary gate: not in the current batch (%g %% of %d clusters = %d at a time)", pct, clusters, batch))
		}
	}
}

// markDispatched records that a cluster was sent to the target version.
func (s *Server) markDispatched(clusterID, target string) {
	s.editRolloutFlags(clusterID, func(d map[string]any) { d["dispatched"] = target })
}

// editRolloutFlags changes a cluster's rollout flags (dispatched, forced, paused).
func (s *Server) editRolloutFlags(clusterID string, edit func(map[string]any)) {
	id := "rollout:" + clusterID
	_ = s.store.Update(internalResource, func(objs map[string]*Object) ([]*Object, error) {
		f := objs[id]
		if f == nil {
			f = &Object{Resource: internalResource, ID: id, Data: map[string]any{}}
		} else {
			f = f.clone()
		}
		edit(f.Data)
		objs[id] = f
		return []*Object{f}, nil
	})
}

// activeMaintenances are the published maintenances in progress.
func (s *Server) activeMaintenances() []*Object {
	now := s.cfg.Now()
	var out []*Object
	for _, m := range s.store.List("maintenances") {
		if m.DeletedAt != nil || m.Data["draft"] == true {
			continue
		}
		start, err1 := time.Parse(time.RFC3339, scalarString(m.Data["start"]))
		end, err2 := time.Parse(time.RFC3339, scalarString(m.Data["end"]))
		if err1 == nil && err2 == nil && !now.Before(start) && now.Before(end) {
			out = append(out, m)
		}
	}
	return out
}

// maintenanceOf names the maintenance that affects a cluster: one of its
// workspace, its organization, or its workspace's PoP.
func maintenanceOf(ms []*Object, c, ws *Object) string {
	pop := ""
	if ws != nil {
		pop, _ = ws.Data["_pop"].(string)
	}
	for _, m := range ms {
		hit := m.Data["workspace_id"] == c.Workspace || (m.Data["organization_id"] != nil && m.Data["organization_id"] == c.Organization)
		if pops, ok := m.Data["affected_pop_ids"].([]any); ok && pop != "" {
			for _, p := range pops {
				hit = hit || p == pop
			}
		}
		if hit {
			return fmt.Sprintf("%s until %s", scalarString(m.Data["name"]), scalarString(m.Data["end"]))
		}
	}
	return ""
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
	rest := strings.TrimPrefix(r.URL.Path, "/api/v1/operator-rollout/")
	if rest == "" {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", "Method not allowed.", nil)
			return
		}
		writeJSON(w, http.StatusOK, s.rolloutAggregate(p))
		return
	}
	if !p.system {
		forbidden(w, "Only platform administrators steer the operator rollout.")
		return
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if len(parts) != 2 || (parts[1] != "force-update" && parts[1] != "pause") || r.Method != http.MethodPost {
		notFound(w)
		return
	}
	row, ok := s.steerRollout(parts[0], parts[1])
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, row)
}

// RolloutAggregate is GET /api/v1/operator-rollout/.
type RolloutAggregate struct {
	TargetVersion     string         `json:"target_version"`
	RolloutPercentage float64        `json:"rollout_percentage"`
	Clusters          []*RolloutRow  `json:"clusters"`
	Versions          map[string]int `json:"versions"`
}

// rolloutAggregate is the dashboard's data: every row for platform tokens, a
// customer token's own clusters' rows (seed 000 "Zugriffskontrolle"); the
// version histogram counts the rows shown.
func (s *Server) rolloutAggregate(p principal) RolloutAggregate {
	target, pct, rows := s.rolloutPlan()
	out := RolloutAggregate{TargetVersion: target, RolloutPercentage: pct, Clusters: []*RolloutRow{}, Versions: map[string]int{}}
	for _, row := range rows {
		if !p.system && row.WorkspaceID != p.workspace {
			continue
		}
		out.Clusters = append(out.Clusters, row)
		if row.InstalledVersion != nil {
			out.Versions[*row.InstalledVersion]++
		}
	}
	return out
}

// steerRollout forces or pauses one cluster's update; a forced cluster is no
// longer paused and the other way round.
func (s *Server) steerRollout(clusterID, action string) (*RolloutRow, bool) {
	if _, ok := s.store.Get("kubernetes/clusters", clusterID); !ok {
		return nil, false
	}
	s.editRolloutFlags(clusterID, func(d map[string]any) {
		d["forced"] = action == "force-update"
		d["paused"] = action == "pause"
	})
	_, _, rows := s.rolloutPlan()
	for _, row := range rows {
		if row.ClusterID == clusterID {
			return row, true
		}
	}
	return nil, false
}
