package emulator

// The per-resource table: every path, field, required field, unique constraint,
// natural key and filter the emulator serves, taken from the reference
// (../shared/reference/polycrate-api/) and, for what the published API lacks,
// from the seeds (marked Extension). One generic handler serves them all; the
// contract document's field lists are generated from the same table.

// Scope says whose objects a token sees.
type Scope int

// Scopes.
const (
	ScopeWorkspace    Scope = iota // objects belong to a workspace (agent tokens see their own)
	ScopeOrganization              // objects belong to an organization (DNS zones, downtimes)
	ScopeGlobal                    // platform objects (PoPs, S3 clusters, regions): read by all
)

// Resource is one row of the table.
type Resource struct {
	Name   string // short name used in counters and metrics, e.g. "endpoints"
	Path   string // collection path with trailing slash
	Source string // where the contract comes from, for the document
	Fields []Field
	// CreateFields / UpdateFields replace Fields as the request schema where the API
	// uses a different body for create or update (S3 buckets, load balancers).
	CreateFields, UpdateFields []Field
	Scope                      Scope
	SoftDelete                 bool // DELETE → 202, is_deleted until purged; else 204
	AgentNoDelete              bool // agent tokens may not delete (403)
	AgentReadOnly              bool // agent tokens may only read (403 on writes)
	NoWrites                   bool // POST/PUT/PATCH → 405 (read-only viewsets)
	// UniquePerWorkspace: at most one live object per workspace (409 conflict), the
	// K8s cluster constraint unique_k8s_cluster_per_workspace.
	UniquePerWorkspace bool
	// Unique fields: a second live object with the same values → 409 conflict (across
	// workspaces when UniqueGlobal).
	Unique       []string
	UniqueGlobal bool
	// NaturalKey: the fields the operator finds its object by. The real service has no
	// constraint on them, so duplicates are accepted — and recorded as collisions.
	NaturalKey []string
	// Filters: query parameter → field. FK fields compare ids; "name" is icontains.
	Filters    map[string]string
	ListFields []string // resource-specific list-row fields (besides the common ones)
	ListPlain  bool     // list is a plain JSON array, not paginated
}

var (
	providerEnum    = []string{"loopback", "hetzner_cloud", "hetzner_robot", "bare_metal", "powerdns", "cloudflare", "rook-ceph", "polycrate", "kubernetes", "helm", "generic", "victorialogs", "system"}
	stateEnum       = []string{"OK", "WARNING", "CRITICAL", "READY", "DEGRADED", "DOWN"}
	createdByEnum   = []string{"cli", "operator", "api", ""}
	criticalityEnum = []string{"high", "medium", "low", ""}
)

// commonWritable are the ManagedObject fields every detail model accepts (§0.3).
func commonWritable() []Field {
	return []Field{
		F("display_name", String, null),
		F("labels", Any), F("annotations", Any),
		F("debug_mode", Bool),
		F("provider", String, enum(providerEnum...)),
		F("provider_reference", String, null),
		F("provider_id", String, null),
		F("reconciliation_enabled", Bool),
		F("discovery_enabled", Bool),
		F("platform_service", Bool),
		F("scope", String, enum("system", "user")),
		F("archived", Bool), F("archived_at", DateTime, null), F("archived_reason", String, null),
		F("criticality", String, null, enum(criticalityEnum...)),
		F("target_availability", String, null), F("actual_availability", String),
		F("slo_target", String, null), F("slo_availability", String),
		F("sla_target", String, null), F("sla_availability", String),
	}
}

// commonReadOnly are the server-set fields of every detail model.
func commonReadOnly() []Field {
	return []Field{
		F("id", UUID, ro), F("url", String, ro), F("icon_url", String, ro, null),
		F("created_at", DateTime, ro), F("updated_at", DateTime, ro),
		F("deleted_at", DateTime, ro, null), F("is_deleted", Bool, ro),
		F("state", String, ro, enum(stateEnum...)), F("last_state", String, ro),
		F("state_reason", String, ro, null), F("last_state_change", DateTime, ro, null),
		F("organization", Any, ro), F("workspace", Any, ro), F("created", Any, ro),
		F("conditions", Any, ro), F("effective_criticality", String, ro, null),
		F("reconciliation_running", Bool, ro), F("last_reconciliation", DateTime, ro, null),
	}
}

// managed builds a ManagedObject schema: specific fields, then common writable and read-only ones.
func managed(specific ...Field) []Field {
	out := append([]Field{}, specific...)
	have := map[string]bool{}
	for _, f := range specific {
		have[f.Name] = true
	}
	for _, f := range append(commonWritable(), commonReadOnly()...) {
		if !have[f.Name] {
			out = append(out, f)
		}
	}
	return out
}

func endpointSpecFields() []Field {
	return []Field{
		F("retry", Obj, null, sub(F("enabled", Bool, def(false)), F("count", Int, def(5)), F("sleep", Number, def(1.0)))),
		F("http", Obj, null, sub(
			F("path", String, def("/")), F("tls", Bool, def(false)), F("alert_tls_expiry", Bool, def(true)),
			F("ignore_tls_errors", Bool, def(false)), F("timeout", Int, def(5), minOf(1)), F("interval", Int, def(60), minOf(1)),
			F("method", String, def("GET")), F("user_agent", String), F("referer", String),
			F("follow_redirect", Bool, def(true)), F("max_redirects", Int, def(10)),
			F("expected_status_code", Int, def(200), rangeOf(100, 599)),
			F("accepted_status_codes", IntList), F("bad_status_codes", IntList),
		)),
		F("tcp", Obj, null, sub(
			F("tls", Bool), F("ignore_tls_errors", Bool), F("alert_expiry_days", Int), F("timeout", Int), F("interval", Int),
			F("send_string", String), F("expected_response", String),
		)),
		F("icmp", Obj, null, sub(F("ttl", Int), F("timeout", Number), F("interval", Number))),
		F("dns", Obj, null, sub(
			F("timeout", Int), F("interval", Int), F("record_name", String), F("record_type", String),
			F("protocol", String, enum("udp", "tcp")), F("expected_results", StrList), F("expected_rcode", String),
			F("tls_enabled", Bool), F("tls_ignore_errors", Bool), F("dnssec", Bool),
		)),
	}
}

// Table is the emulator's API surface.
var Table = []*Resource{
	{
		Name: "endpoints", Path: "/api/v1/endpoints/", Source: "reference core §6",
		Fields: managed(
			F("name", String, req, slug, maxLen(255), doc("operator: slug of namespace and host plus a short hash")),
			F("remote_address", String, req),
			F("organization_id", UUID, wo), F("workspace_id", UUID, wo, null),
			F("spec", Obj, null, sub(endpointSpecFields()...)),
			F("kind", String, enum("icmp", "http", "tcp", "dns"), def("http")),
			F("remote_port", Int, null, rangeOf(1, 65535)),
			F("k8s_cluster", UUID, null, fk("kubernetes/clusters")),
			F("k8s_app", UUID, null, fk("kubernetes/apps")),
			F("s3_cluster", UUID, null), F("region", UUID, null), F("loadbalancer_instance", UUID, null),
			F("do_not_monitor", Bool, def(false)), F("pop_endpoint", Bool, def(false)),
			F("max_agents_per_endpoint", Int, null, minOf(1)),
			F("check_result_retention_days", Int, null),
			F("check_results", Any), F("last_agent_metrics", Any), F("resolved_ip", String, null),
			F("platform_dns_record_created", Bool),
			F("created_by_component", String, null, enum(createdByEnum...)),
			F("managed_by_object_id", String, null), F("managed_by_content_type", Int, null),
			F("slo_window_days", Int, null), F("sla_window_days", Int, null),
			F("tolerations", Any, ro), F("agents", Any, ro, doc("agents assigned to monitor this endpoint")),
			F("endpoint_monitors", Any, ro),
		),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"name"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "kind": "kind", "k8s_cluster": "k8s_cluster",
			"k8s_app": "k8s_app", "remote_address": "remote_address", "remote_port": "remote_port",
			"created_by_component": "created_by_component", "state": "state"},
		ListFields: []string{"kind", "remote_address"},
	},
	{
		Name: "kubernetes/apps", Path: "/api/v1/kubernetes/apps/", Source: "reference core §7",
		Fields: managed(
			F("name", String), F("kind", String, enum("helm", "polycrate", "external")),
			F("block", UUID, null, fk("blocks")), F("k8s_cluster", UUID, null, fk("kubernetes/clusters")),
			F("namespace", String, null), F("description", String, null), F("active", Bool),
			F("source", String, null), F("byoa", Bool, def(false)), F("ha_enabled", Bool, null),
			F("installed_version", String, null),
			F("installed", Bool, def(false)), F("uninstalled", Bool, def(false)),
			F("installation_running", Bool, def(false)), F("uninstallation_running", Bool, def(false)),
			F("installation_failed", Bool, def(false)), F("uninstallation_failed", Bool, def(false)),
			F("last_installation", DateTime, null), F("last_metrics_check", DateTime, null),
			F("pods_total", Int, def(0)), F("pods_ready", Int, def(0)), F("pods_available", Int, def(0)), F("pods_unavailable", Int, def(0)),
			F("pods_restart_count_total", Int, def(0)), F("pods_restart_count_last_hour", Int, def(0)),
			F("pods_details", Any), F("pods_status_hash", String, null), F("pods_status_updated_at", DateTime, null),
			F("excluded_from_downtime_until", DateTime, null),
			F("helm_chart", UUID, null), F("artifact_package", UUID, null), F("artifact", UUID, null), F("catalogue_app", UUID, null),
			F("created_by_component", String, null, enum(createdByEnum...)),
			F("managed_by_object_id", String, null), F("managed_by_content_type", Int, null),
			F("platform_dns_record_created", Bool),
			F("slo_window_days", Int, null), F("sla_window_days", Int, null),
			F("tolerations", Any, ro),
			F("desired_version", String, ro, null, doc("Extension (seed 000): the operator version this cluster should run; only on the app named polycrate-operator")),
		),
		Scope: ScopeWorkspace, SoftDelete: true, AgentNoDelete: true,
		NaturalKey: []string{"name", "k8s_cluster", "namespace"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "kind": "kind", "k8s_cluster": "k8s_cluster",
			"created_by_component": "created_by_component", "catalogue_app": "catalogue_app", "helm_chart": "helm_chart", "state": "state"},
		ListFields: []string{"kind", "k8s_cluster", "installed", "active", "pods_total", "pods_ready"},
	},
	{
		Name: "kubernetes/clusters", Path: "/api/v1/kubernetes/clusters/", Source: "reference core §8",
		Fields: managed(
			F("kind", String, req, enum("polycrate", "generic", "loopback")),
			F("name", String), F("kubernetes_version", String, null),
			F("installed", Bool), F("is_host_cluster", Bool), F("is_infrastructure_cluster", Bool),
			F("kubeconfig_ca_cert_expiry_date", DateTime, null), F("kubeconfig_client_cert_expiry_date", DateTime, null),
			F("api_server_cert_expiry_date", DateTime, null), F("credential", UUID, null),
			F("discovery_ignored_namespaces", Any), F("operator_loglevel", Any), F("operator_ignore_namespaces", Any),
			F("alias", String, null), F("description", String, null), F("addons", Any), F("active", Bool),
			F("backup_schedules", Any), F("baserow_id", Int, null), F("gitlab_project_id", Int, null),
			F("last_backup_import", DateTime, null), F("platform_dns_record_created", Bool), F("slug", String, null),
			F("managed_by_content_type", Int, null), F("managed_by_object_id", String, null),
			F("tolerations", Any, ro), F("block", Any, ro), F("kubernetes_apps", Any, ro), F("cluster_domain", String, ro, null),
		),
		Scope: ScopeWorkspace, SoftDelete: true, AgentNoDelete: true, UniquePerWorkspace: true,
		NaturalKey: []string{"name"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "kind": "kind", "kubernetes_version": "kubernetes_version",
			"is_host_cluster": "is_host_cluster", "state": "state"},
		ListFields: []string{"kind", "kubernetes_version"},
	},
	{
		Name: "kubernetes/volumes", Path: "/api/v1/kubernetes/volumes/", Source: "reference inventory §2",
		Fields: managed(
			F("name", String), F("k8s_cluster", UUID, req, fk("kubernetes/clusters")), F("k8s_app", UUID, null, fk("kubernetes/apps")),
			F("kind", String, enum("generic")),
			F("provider_object_name", String, null), F("provider_object_id", String, null),
			F("cloud_provider_volume_id", String, null), F("csi_driver", String, null), F("storage_class", String, null),
			F("capacity_bytes", Int, null, minOf(0)), F("capacity_string", String, null),
			F("phase", String, enum("Available", "Bound", "Failed", "Pending", "Released", "Unknown")),
			F("access_modes", Any), F("volume_mode", String, enum("Block", "Filesystem")),
			F("reclaim_policy", String, enum("Delete", "Recycle", "Retain")),
			F("pvc_name", String, null), F("pvc_namespace", String, null), F("node_affinity", Any),
			F("managed_by_content_type", Int, null), F("managed_by_object_id", String, null),
			F("tolerations", Any), F("product", Any, ro), F("computed_cost", Number, ro),
		),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"k8s_cluster", "provider_object_id"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "k8s_cluster": "k8s_cluster", "phase": "phase",
			"storage_class": "storage_class", "pvc_namespace": "pvc_namespace", "state": "state"},
		ListFields: []string{"phase", "storage_class", "capacity_bytes", "capacity_string", "pvc_name", "pvc_namespace", "k8s_cluster"},
	},
	{
		Name: "hosts", Path: "/api/v1/hosts/", Source: "reference inventory §1",
		Fields: managed(
			F("name", String, req, slug), F("hostname", String, req),
			F("kind", String, enum("vm", "bare_metal")),
			F("created_by_component", String, null, enum(createdByEnum...)),
			F("alias", String, null), F("role", String, enum("k8s-worker", "k8s-controlplane", "generic", "")),
			F("active", Bool), F("default_ipv4", String, null), F("default_ipv6", String, null),
			F("resource_cpu_type", String, null), F("resource_cpu_cores", Int, null, minOf(0)),
			F("resource_cpu_architecture", String, null), F("resource_memory", Int, null, minOf(0)), F("resource_disk", Int, null),
			F("provider_location", String, null), F("provider_image", String, null),
			F("provider_image_os_flavor", String, null), F("provider_image_os_version", String, null),
			F("provider_image_os_architecture", String, null), F("provider_type", String, null),
			F("provider_account_id", UUID, null, wo), F("description", String, null), F("credential", UUID, null),
			F("ssh_keys_id", UUID, null, wo), F("k8s_cluster", UUID, null, fk("kubernetes/clusters")), F("product_id", UUID, null, wo),
			F("tolerations", Any),
			// provider_id is read-only on Host: the operator sends the Node's providerID as provider_reference.
			F("provider_id", String, ro, null, doc("read-only on hosts; the operator writes the Node's providerID to provider_reference")),
			F("bootstrap_status", String, ro), F("provider_datacenter", String, ro, null), F("provider_object_id", String, ro, null),
			F("cloud_init_hash", String, ro), F("discovery_enabled", Bool, ro), F("scope", String, ro),
		),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"name"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "hostname": "hostname", "kind": "kind",
			"role": "role", "created_by_component": "created_by_component", "state": "state"},
		ListFields: []string{"role", "bootstrap_status"},
	},
	{
		Name: "backups/backups", Path: "/api/v1/backups/backups/", Source: "reference inventory §3",
		Fields: managed(
			F("name", String, req, slug), F("k8s_cluster", UUID, req, fk("kubernetes/clusters")),
			F("provider", String, enum("velero", "cloudnativepg", "custom")), F("kind", String, enum("cluster", "app", "database")),
			F("source_namespace", String, null),
			F("status", String, enum("pending", "running", "completed", "failed", "partial", "expired", "unknown")),
			F("schedule", UUID, null, fk("backups/backup-schedules")),
			F("started_at", DateTime, null), F("completed_at", DateTime, null), F("expiration", DateTime, null),
			F("size_bytes", Int, null, minOf(0)), F("items_backed_up", Int, null, minOf(0)),
			F("retention_policy", String, null), F("metadata", Any), F("tolerations", Any),
			F("duration_seconds", Number, ro, null),
		),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"k8s_cluster", "name", "provider", "source_namespace"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "k8s_cluster": "k8s_cluster", "kind": "kind",
			"provider": "provider", "source_namespace": "source_namespace", "status": "status", "schedule": "schedule", "state": "state"},
		ListFields: []string{"kind", "provider", "source_namespace", "status", "k8s_cluster", "started_at", "completed_at"},
	},
	{
		Name: "backups/backup-schedules", Path: "/api/v1/backups/backup-schedules/", Source: "reference inventory §3",
		Fields: managed(
			F("name", String, req, slug), F("k8s_cluster", UUID, req, fk("kubernetes/clusters")),
			F("provider", String, enum("velero", "cloudnativepg", "custom")), F("kind", String, enum("cluster", "app", "database")),
			F("source_namespace", String, null),
			F("status", String, enum("active", "paused", "failed", "unknown")),
			F("schedule_cron", String, null), F("paused", Bool), F("retention_policy", String, null),
			F("last_backup_at", DateTime, null), F("total_backups", Int, minOf(0)), F("metadata", Any), F("tolerations", Any),
			F("total_size_bytes", Int, ro),
		),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"k8s_cluster", "name", "provider", "source_namespace"},
		Filters: map[string]string{"name": "name", "name_exact": "name", "k8s_cluster": "k8s_cluster", "kind": "kind",
			"provider": "provider", "source_namespace": "source_namespace", "status": "status", "paused": "paused", "state": "state"},
		ListFields: []string{"kind", "provider", "source_namespace", "status", "schedule_cron", "paused", "k8s_cluster"},
	},
	{
		Name: "certificates", Path: "/api/v1/certificates/", Source: "reference inventory §4",
		Fields: managed(
			F("name", String, req, slug), F("secret_name", String, req), F("namespace", String, req),
			F("k8s_cluster", UUID, req, fk("kubernetes/clusters")),
			F("kind", String, enum("tls", "mtls")), F("dns_names", Any), F("ip_addresses", Any),
			F("issuer_name", String, null), F("issuer_kind", String, null, enum("issuer", "clusterissuer", "")), F("issuer_group", String),
			F("not_before", DateTime, null), F("not_after", DateTime, null), F("renewal_time", DateTime, null),
			F("certificate_status", String, enum("ready", "pending", "failed", "expired", "expiring_soon")), F("is_ready", Bool),
			F("current_challenge_type", String, null), F("current_challenge_status", String, null), F("challenge_reason", String, null),
			F("last_failure_time", DateTime, null), F("failure_reason", String, null), F("last_synced_from_cluster", DateTime, null),
			F("cert_manager_status", Any), F("metadata", Any), F("tolerations", Any),
			F("days_until_expiry", Int, ro, null), F("is_expired", Bool, ro), F("is_expiring_soon", Bool, ro),
		),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"k8s_cluster", "namespace", "name"},
		Filters: map[string]string{"name_exact": "name", "kind": "kind", "certificate_status": "certificate_status",
			"is_ready": "is_ready", "state": "state"},
		ListFields: []string{"kind", "namespace", "dns_names", "issuer_name", "certificate_status", "is_ready", "not_after", "days_until_expiry", "is_expired", "k8s_cluster"},
	},
	{
		Name: "s3/buckets", Path: "/api/v1/s3/buckets/", Source: "reference inventory §5",
		Fields: managed(
			F("name", String), F("kind", String, enum("generic")),
			F("include_in_cost_statement", Bool), F("cors_allow_all", Bool),
			F("region", Any, ro), F("s3_cluster", UUID, ro), F("s3_endpoint", String, ro, null), F("s3_region", String, ro, null),
			F("user_id", String, ro, null), F("credential", Any, ro), F("access_keys", Any, ro),
			F("current_usage", Int, ro), F("current_usage_bytes", Int, ro, null), F("current_object_count", Int, ro),
			F("versioning_status", String, ro, null), F("encryption_enabled", Bool, ro, null),
		),
		CreateFields: []Field{
			F("name", String, req, maxLen(63)), F("region", UUID, null, wo, doc("UUID from GET /api/v1/s3/regions/; omitted = SystemConfig default_s3_bucket_cluster")),
			F("organization", UUID, null, wo), F("workspace", UUID, null, wo),
			F("labels", Any), F("annotations", Any), F("cors_allow_all", Bool),
		},
		UpdateFields: []Field{
			F("workspace", UUID, null, wo), F("labels", Any), F("annotations", Any),
			F("include_in_cost_statement", Bool), F("cors_allow_all", Bool),
		},
		Scope: ScopeWorkspace, SoftDelete: true,
		Unique: []string{"s3_cluster", "name"}, UniqueGlobal: true,
		NaturalKey: []string{"name"},
		Filters:    map[string]string{"name": "name", "name_exact": "name", "s3_cluster": "s3_cluster", "state": "state"},
		ListFields: []string{"region", "current_usage", "current_usage_bytes", "current_object_count"},
	},
	{
		Name: "s3/clusters", Path: "/api/v1/s3/clusters/", Source: "reference inventory §5.6",
		Fields: managed(
			F("name", String), F("slug", String, null), F("alias", String, null),
			F("endpoint", String, req), F("endpoint_secure", Bool), F("admin_endpoint", String), F("admin_endpoint_secure", Bool),
			F("kind", String, enum("rook-ceph", "minio")), F("description", String, null), F("active", Bool),
			F("region", String, null), F("allow_new_buckets", Bool, def(true)), F("include_in_cost_statement", Bool),
			F("namespace", String, null), F("cluster_config", Any), F("cluster_info", Any),
		),
		Scope: ScopeGlobal, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"name": "name", "name_exact": "name", "region": "region", "allow_new_buckets": "allow_new_buckets"},
		ListFields: []string{"kind", "endpoint", "platform_service", "allow_new_buckets"},
	},
	{
		Name: "s3/regions", Path: "/api/v1/s3/regions/", Source: "reference inventory §5.5",
		Fields: []Field{F("id", UUID, ro), F("region", String, null), F("endpoint", String), F("name", String),
			F("display_name", String, null), F("url", String, null), F("s3_cluster", UUID, wo)},
		Scope: ScopeGlobal, NoWrites: true, AgentReadOnly: true, ListPlain: true,
		ListFields: []string{"region", "endpoint", "display_name"},
	},
	{
		Name: "domains/dnszones", Path: "/api/v1/domains/dnszones/", Source: "reference inventory §6",
		Fields: managed(
			F("name", String, req), F("organization_id", UUID, wo), F("credential_id", UUID, null, wo),
			F("kind", String, enum("internal", "external"), def("internal")), F("provider", String, null),
			F("primary_zone", Bool, def(true)), F("default_ttl", Int, def(3600)),
			F("dnssec_enabled", Bool), F("sync_from", UUID, null), F("powerdns_metadata", Any),
			F("created_by_component", String, null, enum(createdByEnum...)),
		),
		Scope: ScopeOrganization, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"name": "name", "name_exact": "name", "kind": "kind"},
		ListFields: []string{"kind", "provider", "primary_zone"},
	},
	{
		Name: "domains/dnsrecords", Path: "/api/v1/domains/dnsrecords/", Source: "reference inventory §6.4",
		Fields: managed(
			F("name", String), F("dns_zone_id", UUID, req, wo, fk("domains/dnszones")),
			F("type", String, enum("A", "AAAA", "CNAME", "MX", "TXT", "SRV", "CAA", "NS", "PTR", "TLSA", "SSHFP", "HTTPS", "SVCB", "ALIAS", "NAPTR")),
			F("content", String, req), F("ttl", Int, minOf(1)), F("priority", Int, null),
			F("kind", String, enum("generic")), F("created_by_component", String, null, enum(createdByEnum...)),
			F("dns_zone", Any, ro),
		),
		Scope: ScopeOrganization, SoftDelete: false,
		NaturalKey: []string{"dns_zone_id", "name", "type", "content"},
		Filters:    map[string]string{"dns_zone": "dns_zone_id", "name": "name", "name_exact": "name", "type": "type"},
		ListFields: []string{"dns_zone", "type", "content", "ttl", "priority"},
	},
	{
		Name: "loadbalancers/instances", Path: "/api/v1/loadbalancers/instances/", Source: "reference inventory §7",
		Fields: managed(
			F("name", String), F("config", String, null), F("ports", Any), F("consumer_meta", Any),
			F("enable_ssl", Bool), F("session_affinity", String, enum("none", "cookie", "ip")),
			F("ip_address", Any, ro), F("ip_address_value", String, ro, null),
			F("deployments_ready", Int, ro), F("deployments_total", Int, ro), F("deployment_summary", String, ro, null),
			F("region_deployments", Any, ro), F("last_deployment", DateTime, ro, null),
		),
		CreateFields: []Field{
			F("workspace", UUID, req), F("organization", UUID, req), F("display_name", String, null),
			F("config", String, null), F("ports", Any), F("wizard_ports", Any, wo), F("consumer_meta", Any),
			F("labels", Any), F("annotations", Any),
		},
		UpdateFields: []Field{F("config", String, null), F("ports", Any), F("wizard_ports", Any, wo), F("labels", Any), F("annotations", Any)},
		Scope:        ScopeWorkspace, SoftDelete: true,
		Filters:    map[string]string{"name": "name", "name_exact": "name", "state": "state"},
		ListFields: []string{"ip_address_value", "ports", "deployments_ready", "deployments_total", "is_deleted"},
	},
	{
		Name: "loadbalancers/regions", Path: "/api/v1/loadbalancers/regions/", Source: "reference inventory §7.5",
		Fields: managed(F("region_name", String, req), F("slug", String, null), F("active", Bool),
			F("description", String, null), F("kind", String, enum("cilium", "metallb")),
			F("external_traffic_policy", String, enum("Local", "Cluster"))),
		Scope: ScopeGlobal, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"active": "active"},
		ListFields: []string{"region_name", "kind", "active"},
	},
	{
		Name: "pops", Path: "/api/v1/pops/", Source: "reference inventory §8",
		Fields: managed(F("name", String), F("kind", String, enum("datacenter", "datacenter-park", "region")),
			F("provider_entity_id", UUID, wo), F("region", String, null), F("country", String, null), F("city", String, null),
			F("description", String, null), F("latitude", String, null), F("longitude", String, null),
			F("pop_endpoint_remote_address", String, null)),
		Scope: ScopeGlobal, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"name": "name", "kind": "kind"},
		ListFields: []string{"kind", "region", "country", "city"},
	},
	{
		Name: "organizations", Path: "/api/v1/organizations/", Source: "reference core §14",
		Fields: managed(F("name", String, req), F("legal_name", String, req), F("slug", String, null),
			F("description", String, null), F("active", Bool), F("endpoint_monitoring_mode", String, enum("auto", "manual"))),
		Scope: ScopeOrganization, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"name_exact": "name", "slug": "slug", "legal_name": "legal_name"},
		ListFields: []string{"slug"},
	},
	{
		Name: "workspaces", Path: "/api/v1/workspaces/", Source: "reference core §13",
		Fields: managed(F("name", String, req), F("pop_id", UUID, req, wo, fk("pops")), F("description", String, null),
			F("global_endpoint_monitor", Bool), F("on_premise", Bool), F("pop", Any, ro),
			F("endpoint_monitoring_mode", String, enum("auto", "organization_only", "workspace_only", "pop_only"))),
		Scope: ScopeWorkspace, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"name": "name", "name_exact": "name", "organization_name": "organization.name"},
		ListFields: []string{},
	},
	{
		Name: "blocks", Path: "/api/v1/blocks/", Source: "reference core §15",
		Fields: managed(F("name", String),
			F("kind", String, enum("dockerapp", "linuxapp", "k8sapp", "k8sappinstance", "k8scluster", "library", "generic")),
			F("type", String, null), F("flavor", String, null), F("version", String, null), F("app_version", String, null),
			F("from_block", String, null), F("registry_url", String, null), F("description", String, null), F("config", Any),
			F("created_by_component", String, null, enum(createdByEnum...)),
			F("installed", Bool, ro), F("installed_version", String, ro, null), F("update_needed", Bool, ro)),
		Scope: ScopeWorkspace, SoftDelete: true,
		NaturalKey: []string{"name"},
		Filters: map[string]string{"name_exact": "name", "kind": "kind", "version": "version", "registry_url": "registry_url",
			"workspaces": "workspace.id"},
		ListFields: []string{"kind", "version"},
	},
	{
		Name: "downtimes", Path: "/api/v1/downtimes/", Source: "reference core §11",
		Fields: []Field{
			F("id", UUID, ro), F("url", String, ro), F("name", String), F("display_name", String, null),
			F("labels", Any), F("annotations", Any), F("tolerations", Any),
			F("kind", String, enum("generic", "planned-maintenance", "emergency-maintenance", "customer-caused", "upstream-provider", "force-majeure", "false-positive"), def("generic")),
			F("severity", String, enum("minor", "major", "critical"), def("major")),
			F("is_active", Bool, def(true)), F("counts_towards_sla", Bool), F("excluded_reason", String, null),
			F("organization", Any, ro), F("started_at", DateTime, ro), F("ended_at", DateTime, ro, null),
			F("affected_objects", Any, ro), F("affected_objects_count", Int, ro), F("state", String, ro),
			F("created_at", DateTime, ro), F("updated_at", DateTime, ro), F("is_deleted", Bool, ro), F("deleted_at", DateTime, ro, null),
		},
		Scope: ScopeOrganization, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"kind": "kind", "state": "state"},
		ListFields: []string{"kind", "severity", "is_active", "started_at", "ended_at", "affected_objects"},
	},
	{
		Name: "maintenances", Path: "/api/v1/maintenances/", Source: "reference core §12.1",
		Fields: managed(F("name", String), F("start", DateTime, req), F("end", DateTime, req),
			F("organization_id", UUID, null, wo), F("workspace_id", UUID, null, wo), F("affected_pop_ids", Any, wo),
			F("draft", Bool, def(false)), F("reference_url", String, null), F("kind", String, enum("generic"))),
		Scope: ScopeGlobal, SoftDelete: true, AgentReadOnly: true,
		Filters:    map[string]string{"name_exact": "name", "draft": "draft"},
		ListFields: []string{"start", "end", "draft"},
	},
	{
		Name: "block-rollout-configs", Path: "/api/v1/block-rollout-configs/", Source: "reference core §10",
		Fields: managed(F("name", String), F("kind", String, enum("trigger", "config"), def("config")),
			F("block_name", String, null), F("active", Bool), F("is_system_config", Bool, def(false)),
			F("trigger_type", String, null, enum("reconciliation", "schedule", "")), F("cron_expression", String, null),
			F("action_name", String, null), F("target_version", String, null), F("max_concurrent_percent", Int, rangeOf(1, 100)),
			F("failure_threshold_percent", Int), F("max_retries", Int), F("target_workspaces", Any), F("target_organizations", Any)),
		Scope: ScopeWorkspace, SoftDelete: true, AgentReadOnly: true,
		Filters: map[string]string{"active": "active", "kind": "kind"},
	},
	{
		Name: "block-rollouts", Path: "/api/v1/block-rollouts/", Source: "reference core §10",
		Fields: managed(F("name", String), F("batch_identifier", String, req),
			F("status", String, enum("active", "paused", "blocked", "completed", "cancelled")),
			F("total_items", Int), F("dispatched_items", Int), F("completed_items", Int), F("failed_items", Int),
			F("quiescence_seconds", Int), F("kind", String, enum("generic"))),
		Scope: ScopeWorkspace, SoftDelete: true, AgentReadOnly: true,
		Filters: map[string]string{"status": "status"},
	},
	{
		Name: "agents", Path: "/api/v1/agents/", Source: "reference core §5",
		Fields: []Field{
			F("id", UUID, ro), F("name", String, ro), F("state", String, ro), F("organization", Any, ro), F("workspace", Any, ro),
			F("kind", String, ro), F("version", String, ro, null), F("is_active", Bool, ro), F("last_seen", DateTime, ro, null),
			F("reported_agent_id", String, ro, null), F("source_pop", Any, ro), F("k8s_app", UUID, ro, null),
			F("created_at", DateTime, ro), F("updated_at", DateTime, ro), F("url", String, ro),
			F("is_deleted", Bool, ro), F("deleted_at", DateTime, ro, null),
		},
		Scope: ScopeWorkspace, SoftDelete: true, NoWrites: true,
		Filters:    map[string]string{"kind": "kind", "version": "version", "name_exact": "name", "state": "state"},
		ListFields: []string{"kind", "version", "is_active", "last_seen"},
	},
}

// byName indexes the table.
var byName = func() map[string]*Resource {
	m := map[string]*Resource{}
	for _, r := range Table {
		m[r.Name] = r
	}
	return m
}()

// requestFields is the schema of a create (POST) or update (PUT/PATCH) body.
func (r *Resource) requestFields(create bool) []Field {
	if create && r.CreateFields != nil {
		return r.CreateFields
	}
	if !create && r.UpdateFields != nil {
		return r.UpdateFields
	}
	return r.Fields
}

func (r *Resource) field(name string) (Field, bool) {
	for _, f := range r.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}
