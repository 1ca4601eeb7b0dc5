package emulator

import (
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

// The "System → Operator Rollout" dashboard (seed 000 "Operator Rollout
// Dashboard") as a page of the emulator: one row per cluster with the seed's
// columns, the fleet's version histogram, and force-update and pause per row.
// Like the index page it is the emulator's operator console (no token; off with
// --no-controls); the JSON behind it is GET /api/v1/operator-rollout/ for
// platform tokens.

type dashboardBar struct {
	Version string
	Count   int
	Percent int
}

type dashboardData struct {
	Target     string
	Percentage float64
	Summary    string
	Bars       []dashboardBar
	Rows       []*RolloutRow
}

var dashboardTemplate = template.Must(template.New("rollout").Funcs(template.FuncMap{
	"deref": func(p *string) string {
		if p == nil {
			return "–"
		}
		return *p
	},
	"join": strings.Join,
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Operator Rollout · Polycrate API emulator</title>
<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0 2em}
td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left;vertical-align:top}th{background:#eef}
.bar{display:flex;align-items:center;margin:3px 0}.bar span.label{flex:none;width:12em;font-size:13px}
.bar span.fill{background:#4a7bd0;height:16px;display:inline-block}
.s-up_to_date{color:#1a7f37}.s-updating,.s-forced{color:#0550ae;font-weight:bold}.s-waiting_canary{color:#7d4e00}
.s-deferred_critical,.s-blocked{color:#cf222e}.s-paused{color:#6e7781}form{display:inline}button{font-size:12px}</style></head><body>
<p><a href="/">Polycrate API emulator</a> › System › Operator Rollout</p>
<h1>Operator Rollout</h1>
<p id="target">Target version <b>{{if .Target}}{{.Target}}{{else}}none (OPERATOR_BLOCK_VERSION is not set){{end}}</b>,
canary gate <b>{{.Percentage}} %</b> (OPERATOR_ROLLOUT_PERCENTAGE)</p>
<h2>Versions</h2>
<p id="histogram-summary">{{.Summary}}</p>
<div id="histogram">{{range .Bars}}<div class="bar" data-version="{{.Version}}" data-count="{{.Count}}"><span class="label">{{.Count}} × {{.Version}}</span><span class="fill" style="width:{{.Percent}}%"></span></div>{{end}}</div>
<h2>Clusters ({{len .Rows}})</h2>
<table id="clusters"><tr><th>Workspace / Cluster</th><th>Installed version</th><th>Desired version</th><th>Heartbeat</th><th>State</th><th>Rollout status</th><th>Blockers</th><th></th></tr>
{{range .Rows}}<tr data-cluster="{{.ClusterID}}" data-status="{{.RolloutStatus}}">
<td>{{.WorkspaceName}} / {{.ClusterName}}</td><td class="installed">{{deref .InstalledVersion}}</td><td class="desired">{{deref .DesiredVersion}}</td>
<td>{{deref .Heartbeat}}</td><td>{{.State}}</td><td class="status s-{{.RolloutStatus}}">{{.RolloutStatus}}</td><td class="blockers">{{join .Blockers "; "}}</td>
<td><form method="post" action="/system/operator-rollout/{{.ClusterID}}/force-update/"><button class="force" type="submit">Force update</button></form>
<form method="post" action="/system/operator-rollout/{{.ClusterID}}/pause/"><button class="pause" type="submit">Pause</button></form></td></tr>
{{end}}</table>
</body></html>`))

// serveDashboard serves GET /system/operator-rollout/ and the buttons' POSTs
// (…/{cluster}/force-update/, …/{cluster}/pause/), which answer with a redirect
// back to the page.
func (s *Server) serveDashboard(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/system/operator-rollout"), "/")
	if rest != "" {
		parts := strings.Split(rest, "/")
		if r.Method != http.MethodPost || len(parts) != 2 || (parts[1] != "force-update" && parts[1] != "pause") {
			writeError(w, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
			return
		}
		if _, ok := s.steerRollout(parts[0], parts[1]); !ok {
			writeError(w, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
			return
		}
		http.Redirect(w, r, "/system/operator-rollout/", http.StatusSeeOther)
		return
	}
	agg := s.rolloutAggregate(principal{system: true})
	sort.SliceStable(agg.Clusters, func(i, j int) bool {
		a, b := agg.Clusters[i], agg.Clusters[j]
		return a.WorkspaceName+"/"+a.ClusterName < b.WorkspaceName+"/"+b.ClusterName
	})
	d := dashboardData{Target: agg.TargetVersion, Percentage: agg.RolloutPercentage, Rows: agg.Clusters}
	d.Bars, d.Summary = histogram(agg.Versions)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = dashboardTemplate.Execute(w, d)
}

// histogram orders the versions (oldest first) and scales the bars to the
// largest count; the summary is the seed's "30 × 0.34.0, 12 × 0.35.0, …".
func histogram(versions map[string]int) ([]dashboardBar, string) {
	var bars []dashboardBar
	most := 0
	for v, n := range versions {
		bars = append(bars, dashboardBar{Version: v, Count: n})
		most = max(most, n)
	}
	sort.Slice(bars, func(i, j int) bool {
		a, b := "v"+strings.TrimPrefix(bars[i].Version, "v"), "v"+strings.TrimPrefix(bars[j].Version, "v")
		if c := semver.Compare(a, b); c != 0 && semver.IsValid(a) && semver.IsValid(b) {
			return c < 0
		}
		return bars[i].Version < bars[j].Version
	})
	parts := make([]string, len(bars))
	for i := range bars {
		bars[i].Percent = bars[i].Count * 100 / max(most, 1)
		parts[i] = fmt.Sprintf("%d × %s", bars[i].Count, bars[i].Version)
	}
	if len(parts) == 0 {
		return nil, "no cluster has reported a version yet"
	}
	return bars, strings.Join(parts, ", ")
}
