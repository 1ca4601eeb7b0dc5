package emulator

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
)

// The human page at /: what the API holds, per workspace, for a person looking at
// the demo or debugging a test.

type htmlSection struct {
	Title   string
	Columns []string
	Rows    [][]string
}

// pageColumns: per resource, the columns shown (field names of the rendered object).
var pageColumns = []struct {
	title, resource string
	cols            []string
}{
	{"Workspaces", "workspaces", []string{"name", "organization.name", "pop.name", "endpoint_monitoring_mode"}},
	{"Kubernetes clusters", "kubernetes/clusters", []string{"name", "kind", "kubernetes_version", "workspace.name"}},
	{"Agents", "agents", []string{"name", "kind", "version", "last_seen", "state", "workspace.name"}},
	{"Endpoints", "endpoints", []string{"name", "kind", "remote_address", "remote_port", "spec.http.path", "agents", "state", "last_check"}},
	{"Kubernetes apps", "kubernetes/apps", []string{"name", "kind", "namespace", "installed_version", "pods_ready", "pods_total", "desired_version"}},
	{"Hosts", "hosts", []string{"name", "hostname", "default_ipv4", "resource_cpu_cores", "resource_memory"}},
	{"Kubernetes volumes", "kubernetes/volumes", []string{"name", "capacity_string", "storage_class", "phase", "pvc_namespace", "pvc_name"}},
	{"Backups", "backups/backups", []string{"name", "provider", "kind", "source_namespace", "status", "completed_at"}},
	{"Backup schedules", "backups/backup-schedules", []string{"name", "provider", "schedule_cron", "paused", "last_backup_at"}},
	{"Certificates", "certificates", []string{"name", "namespace", "issuer_name", "certificate_status", "not_after"}},
	{"S3 buckets", "s3/buckets", []string{"name", "s3_region", "s3_endpoint", "workspace.name"}},
	{"DNS zones", "domains/dnszones", []string{"name", "kind", "provider", "primary_zone"}},
	{"DNS records", "domains/dnsrecords", []string{"name", "type", "content", "ttl", "dns_zone.name"}},
	{"Load balancers", "loadbalancers/instances", []string{"name", "display_name", "ip_address_value", "ports"}},
	{"Downtimes", "downtimes", []string{"name", "severity", "is_active", "started_at", "ended_at"}},
}

var indexTemplate = template.Must(template.New("index").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Polycrate API emulator</title>
<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}th{background:#eef}
h2{font-size:18px;margin-bottom:4px}.empty{color:#888;margin-bottom:2em}</style></head><body>
<h1>Polycrate API emulator</h1>
<p>What the API holds. JSON at <code>/api/v1/…</code>; test controls at <code>/_emulator/</code>;
the <a href="/system/operator-rollout/">Operator Rollout</a> dashboard.</p>
{{range .}}<h2>{{.Title}} ({{len .Rows}})</h2>
{{if .Rows}}<table><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>
{{else}}<div class="empty">none</div>{{end}}{{end}}
</body></html>`))

func (s *Server) serveIndex(w http.ResponseWriter, _ *http.Request) {
	var sections []htmlSection
	for _, pc := range pageColumns {
		res := byName[pc.resource]
		sec := htmlSection{Title: pc.title, Columns: pc.cols}
		for _, o := range s.store.List(res.Name) {
			if o.DeletedAt != nil {
				continue
			}
			full := s.render(res, o)
			row := make([]string, len(pc.cols))
			for i, c := range pc.cols {
				switch c {
				case "last_check":
					row[i] = s.lastCheck(o)
				case "agents":
					row[i] = fmt.Sprint(len(s.assignedAgents(o)))
				default:
					if v, ok := lookupPath(full, c); ok && v != nil {
						row[i] = scalarString(v)
					}
				}
			}
			sec.Rows = append(sec.Rows, row)
		}
		sections = append(sections, sec)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexTemplate.Execute(w, sections)
}

// lastCheck is the newest check result any agent reported for an endpoint.
func (s *Server) lastCheck(e *Object) string {
	var newest map[string]any
	for _, a := range s.store.List(internalResource) {
		if !strings.HasPrefix(a.ID, "assign:") || a.Data["endpoint_id"] != e.ID {
			continue
		}
		if newest == nil || scalarString(a.Data["last_check_at"]) > scalarString(newest["last_check_at"]) {
			newest = a.Data
		}
	}
	if newest == nil {
		return "–"
	}
	ok := fmt.Sprintf("FAIL (%v)", orDefault(newest["last_check_error_name"], "error"))
	if newest["last_check_success"] == true {
		ok = "OK"
	}
	return fmt.Sprintf("%s %v in %v ms at %v", ok, orDefault(newest["last_check_status_code"], "-"), orDefault(newest["last_check_duration_ms"], "-"),
		newest["last_check_at"])
}
