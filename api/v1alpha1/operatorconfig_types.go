package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorConfigSpec configures the whole operator. Every section is defaulted by
// the API server, so `spec: {}` is a complete, valid configuration.
type OperatorConfigSpec struct {
	// APISync configures the connection to the Polycrate API.
	// +kubebuilder:default={}
	// +optional
	APISync APISyncConfig `json:"api_sync,omitempty"`
	// LocalCluster registers the cluster the operator runs in with the API.
	// +kubebuilder:default={}
	// +optional
	LocalCluster LocalClusterConfig `json:"local_cluster,omitempty"`
	// EndpointDiscovery turns Ingresses and HTTPRoutes into monitored endpoints.
	// +kubebuilder:default={}
	// +optional
	EndpointDiscovery EndpointDiscoveryConfig `json:"endpoint_discovery,omitempty"`
	// EndpointMonitoring makes the operator the monitoring agent of the endpoints
	// the API assigns to it (docs/monitoring.md).
	// +kubebuilder:default={}
	// +optional
	EndpointMonitoring EndpointMonitoringConfig `json:"endpoint_monitoring,omitempty"`
	// AppDiscovery turns meta-Secrets and annotated Pods into K8sApps.
	// +kubebuilder:default={}
	// +optional
	AppDiscovery AppDiscoveryConfig `json:"app_discovery,omitempty"`
	// NodeDiscovery turns Nodes into Hosts.
	// +kubebuilder:default={}
	// +optional
	NodeDiscovery NodeDiscoveryConfig `json:"node_discovery,omitempty"`
	// BackupDiscovery turns Velero and CloudNativePG backups into Backups and BackupSchedules.
	// +kubebuilder:default={}
	// +optional
	BackupDiscovery BackupDiscoveryConfig `json:"backup_discovery,omitempty"`
	// CertificateDiscovery turns cert-manager Certificates into Certificates.
	// +kubebuilder:default={}
	// +optional
	CertificateDiscovery CertificateDiscoveryConfig `json:"certificate_discovery,omitempty"`
	// S3BucketProvisioning provisions S3Bucket CRs through the API.
	// +kubebuilder:default={}
	// +optional
	S3BucketProvisioning S3BucketProvisioningConfig `json:"s3_bucket_provisioning,omitempty"`
	// CloudController makes the operator the cluster's cloud controller (opt-in).
	// +kubebuilder:default={}
	// +optional
	CloudController CloudControllerConfig `json:"cloud_controller,omitempty"`
	// DNS01Webhook serves a cert-manager DNS01 solver (opt-in).
	// +kubebuilder:default={}
	// +optional
	DNS01Webhook DNS01WebhookConfig `json:"dns01_webhook,omitempty"`
	// ExternalDNSWebhook serves an external-dns webhook provider.
	// +kubebuilder:default={}
	// +optional
	ExternalDNSWebhook ExternalDNSWebhookConfig `json:"external_dns_webhook,omitempty"`
}

// APISyncConfig configures the Polycrate API connection. workspace_id and
// organization_id are not configured: they are derived from the agent token
// (see status.api_sync); the two fields of versions before 0.29.0 are accepted
// and ignored.
type APISyncConfig struct {
	// Enabled turns every write to the Polycrate API on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// APIURL is the base URL of the Polycrate API.
	// +kubebuilder:default="https://api.polycrate.io"
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	APIURL string `json:"api_url,omitempty"`
	// CredentialsRef names the Secret (in the operator namespace) that holds the agent token.
	// +kubebuilder:default={}
	// +optional
	CredentialsRef CredentialsReference `json:"credentials_ref,omitempty"`
	// CACertificate is a PEM bundle trusted for api_url besides the system's roots:
	// for an API behind a private CA or a TLS-inspecting proxy.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	CACertificate string `json:"ca_certificate,omitempty"`
	// HealthReportIntervalSeconds is how often the operator reports its health to the
	// API (which keeps it registered as an agent and alive).
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	HealthReportIntervalSeconds int32 `json:"health_report_interval_seconds,omitempty"`
	// WorkspaceID is deprecated and ignored since 0.29.0: the workspace comes from
	// the agent token (status.api_sync.workspace_id). Accepted so that a manifest
	// from an older version still applies; the SpecCurrent condition says it is
	// ignored. Remove it.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	WorkspaceID string `json:"workspace_id,omitempty"`
	// OrganizationID is deprecated and ignored since 0.29.0: the organization comes
	// from the agent token (status.api_sync.organization_id). Accepted so that a
	// manifest from an older version still applies; the SpecCurrent condition says
	// it is ignored. Remove it.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	OrganizationID string `json:"organization_id,omitempty"`
}

// CredentialsReference names the Secret holding the agent token.
type CredentialsReference struct {
	// SecretName is the Secret's name in the operator namespace.
	// +kubebuilder:default="polycrate-api-creds"
	// +kubebuilder:validation:MinLength=1
	// +optional
	SecretName string `json:"secret_name,omitempty"`
	// TokenKey is the key in the Secret that holds the token.
	// +kubebuilder:default="token"
	// +kubebuilder:validation:MinLength=1
	// +optional
	TokenKey string `json:"token_key,omitempty"`
}

// LocalClusterConfig registers the local cluster with the API. If the API already
// has a cluster for the workspace, that cluster wins and cluster_name is ignored;
// otherwise a cluster is created only when cluster_name is set.
type LocalClusterConfig struct {
	// Enabled turns local cluster registration on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// ClusterName is the name of the cluster to create when the workspace has none.
	// +optional
	ClusterName string `json:"cluster_name,omitempty"`
}

// EndpointDiscoveryConfig configures Ingress and HTTPRoute discovery.
type EndpointDiscoveryConfig struct {
	// Enabled turns endpoint discovery on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Mode "annotation" processes only sources with polycrate_endpoint_monitor "true";
	// "auto" processes all sources except those with polycrate_endpoint_monitor "false".
	// +kubebuilder:validation:Enum=annotation;auto
	// +kubebuilder:default=annotation
	// +optional
	Mode string `json:"mode,omitempty"`
	// WatchNamespaces limits discovery to these namespaces; empty means all.
	// +optional
	WatchNamespaces []string `json:"watch_namespaces,omitempty"`
	// IgnoreNamespaces are never discovered; subtracted from watch_namespaces.
	// +kubebuilder:default={kube-system,kube-public,polycrate}
	// +optional
	IgnoreNamespaces []string `json:"ignore_namespaces,omitempty"`
	// IngressClasses limits Ingress discovery to these classes; empty means all.
	// +optional
	IngressClasses []string `json:"ingress_classes,omitempty"`
	// GatewayClasses limits HTTPRoute discovery to routes whose parent Gateway has one
	// of these classes; empty means all.
	// +optional
	GatewayClasses []string `json:"gateway_classes,omitempty"`
	// StaleCleanupMinutes is the interval of the stale sweep.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	StaleCleanupMinutes int32 `json:"stale_cleanup_minutes,omitempty"`
}

// EndpointMonitoringConfig configures the checks of the endpoints the API assigns
// to this operator's agent.
type EndpointMonitoringConfig struct {
	// Enabled turns the checks on or off (off: the agent reports no results and the
	// API assigns its endpoints to it all the same; use do_not_monitor there).
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// AssignmentRefreshSeconds is how often the assigned endpoints are fetched; an
	// Endpoint CR synced to the API also triggers a fetch within seconds.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=5
	// +optional
	AssignmentRefreshSeconds int32 `json:"assignment_refresh_seconds,omitempty"`
	// MaxConcurrentChecks bounds the checks running at once.
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxConcurrentChecks int32 `json:"max_concurrent_checks,omitempty"`
	// ICMPMode is how icmp checks send echo requests: "auto" tries an unprivileged
	// ping socket, then a raw socket (NET_RAW); or only one of them.
	// +kubebuilder:validation:Enum=auto;unprivileged;raw
	// +kubebuilder:default=auto
	// +optional
	ICMPMode string `json:"icmp_mode,omitempty"`
}

// AppDiscoveryConfig configures K8sApp discovery from meta-Secrets and annotated Pods.
type AppDiscoveryConfig struct {
	// Enabled turns app discovery on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// WatchNamespaces limits discovery to these namespaces; empty means all.
	// +optional
	WatchNamespaces []string `json:"watch_namespaces,omitempty"`
	// IgnoreNamespaces are never discovered; subtracted from watch_namespaces.
	// +kubebuilder:default={kube-system,kube-public}
	// +optional
	IgnoreNamespaces []string `json:"ignore_namespaces,omitempty"`
	// LabelDiscoveryEnabled turns discovery of Pods annotated polycrate_k8sapp_name on.
	// +kubebuilder:default=true
	// +optional
	LabelDiscoveryEnabled *bool `json:"label_discovery_enabled,omitempty"`
	// StaleCleanupMinutes is the interval of the stale sweep.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	StaleCleanupMinutes int32 `json:"stale_cleanup_minutes,omitempty"`
}

// NodeDiscoveryConfig configures Node → Host discovery.
type NodeDiscoveryConfig struct {
	// Enabled turns node discovery on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// LabelSelector limits discovery to Nodes matching this label selector; empty means all.
	// +optional
	LabelSelector string `json:"label_selector,omitempty"`
}

// BackupDiscoveryConfig configures Velero and CloudNativePG backup discovery.
type BackupDiscoveryConfig struct {
	// Enabled turns backup discovery on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// VeleroNamespace is the namespace Velero's Backups and Schedules live in.
	// +kubebuilder:default=velero
	// +optional
	VeleroNamespace string `json:"velero_namespace,omitempty"`
	// WatchNamespaces limits discovery to these namespaces; empty means all.
	// +optional
	WatchNamespaces []string `json:"watch_namespaces,omitempty"`
	// IgnoreNamespaces are never discovered; subtracted from watch_namespaces.
	// +optional
	IgnoreNamespaces []string `json:"ignore_namespaces,omitempty"`
	// CNPGEnabled turns discovery of CloudNativePG Backups and ScheduledBackups on.
	// +kubebuilder:default=true
	// +optional
	CNPGEnabled *bool `json:"cnpg_enabled,omitempty"`
	// StaleCleanupMinutes is the interval of the stale sweep.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	StaleCleanupMinutes int32 `json:"stale_cleanup_minutes,omitempty"`
}

// CertificateDiscoveryConfig configures cert-manager Certificate discovery.
type CertificateDiscoveryConfig struct {
	// Enabled turns certificate discovery on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// WatchNamespaces limits discovery to these namespaces; empty means all.
	// +optional
	WatchNamespaces []string `json:"watch_namespaces,omitempty"`
	// IgnoreNamespaces are never discovered; subtracted from watch_namespaces.
	// +kubebuilder:default={kube-system,cert-manager}
	// +optional
	IgnoreNamespaces []string `json:"ignore_namespaces,omitempty"`
	// IssuerFilter limits discovery by issuer name.
	// +optional
	IssuerFilter IssuerFilter `json:"issuer_filter,omitempty"`
	// StaleCleanupMinutes is the interval of the stale sweep.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	StaleCleanupMinutes int32 `json:"stale_cleanup_minutes,omitempty"`
}

// IssuerFilter selects certificates by the name of their issuer.
type IssuerFilter struct {
	// IncludeIssuers limits discovery to these issuers; empty means all.
	// +optional
	IncludeIssuers []string `json:"include_issuers,omitempty"`
	// ExcludeIssuers are never discovered.
	// +optional
	ExcludeIssuers []string `json:"exclude_issuers,omitempty"`
}

// S3BucketProvisioningConfig configures S3Bucket provisioning.
type S3BucketProvisioningConfig struct {
	// Enabled turns S3Bucket provisioning on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// CloudControllerConfig configures the CCM-lite cloud controller.
type CloudControllerConfig struct {
	// Enabled makes the operator initialise Nodes (providerID, region label, taint removal).
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// LoadBalancer configures Services of type LoadBalancer.
	// +kubebuilder:default={}
	// +optional
	LoadBalancer LoadBalancerConfig `json:"load_balancer,omitempty"`
}

// LoadBalancerConfig configures which Services of type LoadBalancer the operator manages.
type LoadBalancerConfig struct {
	// Enabled turns load balancer management on (only while cloud_controller is enabled).
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// ServiceScope "all" manages every LoadBalancer Service except those annotated
	// polycrate.io/loadbalancer=ignore; "opt-in" only those annotated
	// polycrate.io/loadbalancer=managed.
	// +kubebuilder:validation:Enum=all;opt-in
	// +kubebuilder:default=all
	// +optional
	ServiceScope string `json:"service_scope,omitempty"`
}

// DNS01WebhookConfig configures the embedded cert-manager DNS01 solver.
type DNS01WebhookConfig struct {
	// Enabled serves the DNS01 solver (opt-in).
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// GroupName is the API group cert-manager calls the solver under.
	// +kubebuilder:default="webhook.dns.polycrate.io"
	// +optional
	GroupName string `json:"group_name,omitempty"`
	// SolverName is the solver's name in the Issuer's webhook config.
	// +kubebuilder:default=polycrate
	// +optional
	SolverName string `json:"solver_name,omitempty"`
	// Port the solver's HTTPS server listens on.
	// +kubebuilder:default=10250
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
}

// ExternalDNSWebhookConfig configures the external-dns webhook provider.
type ExternalDNSWebhookConfig struct {
	// Enabled serves the external-dns webhook provider.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Port the provider's HTTP server listens on.
	// +kubebuilder:default=8888
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// DomainFilter bounds the names the provider serves and writes to these
	// domains and the names under them (empty: every zone the agent token
	// sees). A plan touching a name outside is refused whole.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9*_]([A-Za-z0-9_.-]*[A-Za-z0-9])?\.?$`
	// +listType=set
	// +optional
	DomainFilter []string `json:"domain_filter,omitempty"`
}

// OperatorConfigStatus is what the operator resolved from its configuration.
type OperatorConfigStatus struct {
	// APISync holds the workspace and organization derived from the agent token.
	// +optional
	APISync *APISyncStatus `json:"api_sync,omitempty"`
	// Agent is the operator as an agent of the API, from the health report's answer.
	// +optional
	Agent *AgentStatus `json:"agent,omitempty"`
	// LocalCluster holds the API cluster this cluster is registered as.
	// +optional
	LocalCluster *LocalClusterStatus `json:"local_cluster,omitempty"`
	// OperatorVersion is this operator's version and the one the API's rollout wants.
	// +optional
	OperatorVersion *OperatorVersionStatus `json:"operator_version,omitempty"`
	// Preflight is the last run of the provided-cluster checklist (seed 004; the
	// preflight command's rows that are not ok).
	// +optional
	Preflight *PreflightStatus `json:"preflight,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observed_generation,omitempty"`
	// Conditions: Ready, APIConnected, WorkspaceResolved, LocalClusterRegistered,
	// APICircuitClosed, CRDsInstalled, PreflightPassed, SpecCurrent.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// APISyncStatus is the workspace resolution the API returned for the agent token.
type APISyncStatus struct {
	// +optional
	WorkspaceID string `json:"workspace_id,omitempty"`
	// +optional
	WorkspaceName string `json:"workspace_name,omitempty"`
	// +optional
	OrganizationID string `json:"organization_id,omitempty"`
	// +optional
	OrganizationName string `json:"organization_name,omitempty"`
	// ResolvedAt is when the workspace was last resolved.
	// +optional
	ResolvedAt *metav1.Time `json:"resolved_at,omitempty"`
}

// AgentStatus is the operator's agent record in the API.
type AgentStatus struct {
	// AgentID is the platform id of the operator's agent.
	// +optional
	AgentID string `json:"agent_id,omitempty"`
	// PopName and PopID are the agent's point of presence (the cloud controller's region).
	// +optional
	PopName string `json:"pop_name,omitempty"`
	// +optional
	PopID string `json:"pop_id,omitempty"`
	// EndpointMonitoringMode is the workspace's monitoring mode.
	// +optional
	EndpointMonitoringMode string `json:"endpoint_monitoring_mode,omitempty"`
}

// PreflightStatus is the last checklist run of the operator.
type PreflightStatus struct {
	// Summary is the run's summary line.
	Summary string `json:"summary"`
	// CheckedAt is when it ran.
	CheckedAt metav1.Time `json:"checked_at"`
	// Failed says a hard requirement is missing.
	Failed bool `json:"failed"`
	// Problems are the rows that are not ok.
	// +optional
	Problems []PreflightProblem `json:"problems,omitempty"`
}

// PreflightProblem is one row of the checklist that is not ok.
type PreflightProblem struct {
	Topic   string `json:"topic"`
	Verdict string `json:"verdict"`
	Found   string `json:"found"`
}

// OperatorVersionStatus compares the running version with the rollout's.
type OperatorVersionStatus struct {
	// Installed is the running operator's version (reported as the K8s app
	// polycrate-operator's installed_version).
	// +optional
	Installed string `json:"installed,omitempty"`
	// Desired is the version the API wants this cluster to run, where the API offers it.
	// +optional
	Desired string `json:"desired,omitempty"`
}

// LocalClusterStatus is the API cluster this cluster is registered as.
type LocalClusterStatus struct {
	// ClusterID is the API id of the cluster.
	// +optional
	ClusterID string `json:"cluster_id,omitempty"`
	// ClusterName is the API name of the cluster.
	// +optional
	ClusterName string `json:"cluster_name,omitempty"`
	// Source says whether the cluster was "adopted" from the API or "created" by the operator.
	// +optional
	Source string `json:"source,omitempty"`
	// RegisteredAt is when the cluster id was resolved.
	// +optional
	RegisteredAt *metav1.Time `json:"registered_at,omitempty"`
}

// OperatorConfig is the operator-wide configuration: a singleton named "default"
// in the operator namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=oc;opcfg,categories=polycrate
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="OperatorConfig is a singleton and must be named 'default'"
// +kubebuilder:printcolumn:name="Workspace",type=string,JSONPath=`.status.api_sync.workspace_name`
// +kubebuilder:printcolumn:name="Organization",type=string,JSONPath=`.status.api_sync.organization_name`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.local_cluster.cluster_name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.operator_version.installed`
// +kubebuilder:printcolumn:name="Desired",type=string,JSONPath=`.status.operator_version.desired`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OperatorConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	// +optional
	Spec   OperatorConfigSpec   `json:"spec,omitempty"`
	Status OperatorConfigStatus `json:"status,omitempty"`
}

// OperatorConfigList is a list of OperatorConfigs.
// +kubebuilder:object:root=true
type OperatorConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OperatorConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OperatorConfig{}, &OperatorConfigList{})
}
