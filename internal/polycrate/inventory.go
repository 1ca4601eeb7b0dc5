package polycrate

import (
	"time"
)

// Host is the detail model of /api/v1/hosts/. provider_id is read-only there; the
// operator writes a Node's providerID to provider_reference.
type Host struct {
	Meta
	Hostname                string  `json:"hostname"`
	DefaultIPv4             *string `json:"default_ipv4"`
	ResourceCPUCores        *int64  `json:"resource_cpu_cores"`
	ResourceMemory          *int64  `json:"resource_memory"`
	ResourceCPUArchitecture *string `json:"resource_cpu_architecture"`
	ProviderReference       *string `json:"provider_reference"`
	K8sCluster              *Ref    `json:"k8s_cluster"`
}

// HostRequest is HostRequest; name (a slug) and hostname are required.
type HostRequest struct {
	Common
	Name                    string  `json:"name"`
	Hostname                string  `json:"hostname"`
	Kind                    string  `json:"kind,omitempty"`
	Role                    string  `json:"role,omitempty"`
	DefaultIPv4             *string `json:"default_ipv4,omitempty"`
	ResourceCPUCores        *int64  `json:"resource_cpu_cores,omitempty"`
	ResourceMemory          *int64  `json:"resource_memory,omitempty"`
	ResourceCPUArchitecture *string `json:"resource_cpu_architecture,omitempty"`
	K8sCluster              *string `json:"k8s_cluster,omitempty"`
	CreatedByComponent      string  `json:"created_by_component,omitempty"`
}

// Hosts is /api/v1/hosts/.
func (c *Client) Hosts() Resource[Host, Row, HostRequest] {
	return newResource[Host, Row, HostRequest](c, "hosts", "/api/v1/hosts/")
}

// Backup is the detail model of /api/v1/backups/backups/.
type Backup struct {
	Meta
	K8sCluster      *Ref       `json:"k8s_cluster"`
	Provider        string     `json:"provider"`
	Kind            string     `json:"kind"`
	SourceNamespace *string    `json:"source_namespace"`
	Status          string     `json:"status"`
	StartedAt       *time.Time `json:"started_at"`
	CompletedAt     *time.Time `json:"completed_at"`
	Metadata        any        `json:"metadata"`
}

// BackupRow is a list row.
type BackupRow struct {
	Row
	Kind            string  `json:"kind"`
	Provider        string  `json:"provider"`
	SourceNamespace *string `json:"source_namespace"`
	Status          string  `json:"status"`
	K8sCluster      *Ref    `json:"k8s_cluster"`
}

// BackupRequest is BackupRequest; name (slug) and k8s_cluster are required.
type BackupRequest struct {
	Common
	Name            string         `json:"name"`
	K8sCluster      string         `json:"k8s_cluster"`
	Provider        string         `json:"provider,omitempty"`
	Kind            string         `json:"kind,omitempty"`
	SourceNamespace *string        `json:"source_namespace,omitempty"`
	Status          string         `json:"status,omitempty"`
	Schedule        *string        `json:"schedule,omitempty"`
	StartedAt       *time.Time     `json:"started_at,omitempty"`
	CompletedAt     *time.Time     `json:"completed_at,omitempty"`
	Expiration      *time.Time     `json:"expiration,omitempty"`
	SizeBytes       *int64         `json:"size_bytes,omitempty"`
	ItemsBackedUp   *int64         `json:"items_backed_up,omitempty"`
	RetentionPolicy *string        `json:"retention_policy,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
}

// Backups is /api/v1/backups/backups/.
func (c *Client) Backups() Resource[Backup, BackupRow, BackupRequest] {
	return newResource[Backup, BackupRow, BackupRequest](c, "backups/backups", "/api/v1/backups/backups/")
}

// BackupSchedule is the detail model of /api/v1/backups/backup-schedules/.
type BackupSchedule struct {
	Meta
	K8sCluster      *Ref       `json:"k8s_cluster"`
	Provider        string     `json:"provider"`
	Kind            string     `json:"kind"`
	SourceNamespace *string    `json:"source_namespace"`
	ScheduleCron    *string    `json:"schedule_cron"`
	Paused          bool       `json:"paused"`
	LastBackupAt    *time.Time `json:"last_backup_at"`
	Metadata        any        `json:"metadata"`
}

// BackupScheduleRequest is BackupScheduleRequest. last_backup_name does not exist in
// the published API: the operator puts it into metadata.
type BackupScheduleRequest struct {
	Common
	Name            string         `json:"name"`
	K8sCluster      string         `json:"k8s_cluster"`
	Provider        string         `json:"provider,omitempty"`
	Kind            string         `json:"kind,omitempty"`
	SourceNamespace *string        `json:"source_namespace,omitempty"`
	Status          string         `json:"status,omitempty"`
	ScheduleCron    *string        `json:"schedule_cron,omitempty"`
	Paused          bool           `json:"paused"`
	RetentionPolicy *string        `json:"retention_policy,omitempty"`
	LastBackupAt    *time.Time     `json:"last_backup_at,omitempty"`
	TotalBackups    *int64         `json:"total_backups,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
}

// BackupSchedules is /api/v1/backups/backup-schedules/.
func (c *Client) BackupSchedules() Resource[BackupSchedule, BackupRow, BackupScheduleRequest] {
	return newResource[BackupSchedule, BackupRow, BackupScheduleRequest](c, "backups/backup-schedules", "/api/v1/backups/backup-schedules/")
}

// Certificate is the detail model of /api/v1/certificates/.
type Certificate struct {
	Meta
	SecretName        string     `json:"secret_name"`
	Namespace         string     `json:"namespace"`
	K8sCluster        *Ref       `json:"k8s_cluster"`
	DNSNames          []string   `json:"dns_names"`
	IssuerName        *string    `json:"issuer_name"`
	IssuerKind        *string    `json:"issuer_kind"`
	CertificateStatus string     `json:"certificate_status"`
	IsReady           bool       `json:"is_ready"`
	NotAfter          *time.Time `json:"not_after"`
	DaysUntilExpiry   *int       `json:"days_until_expiry"`
	IsExpired         bool       `json:"is_expired"`
	IsExpiringSoon    bool       `json:"is_expiring_soon"`
}

// CertificateRow is a list row (namespace and k8s_cluster included, which the
// lookup by natural key needs: the API has no such filters).
type CertificateRow struct {
	Row
	Namespace         string `json:"namespace"`
	CertificateStatus string `json:"certificate_status"`
	K8sCluster        *Ref   `json:"k8s_cluster"`
}

// CertificateRequest is CertificateRequest; name (slug), secret_name, namespace and
// k8s_cluster are required.
type CertificateRequest struct {
	Common
	Name              string         `json:"name"`
	SecretName        string         `json:"secret_name"`
	Namespace         string         `json:"namespace"`
	K8sCluster        string         `json:"k8s_cluster"`
	Kind              string         `json:"kind,omitempty"`
	DNSNames          []string       `json:"dns_names,omitempty"`
	IPAddresses       []string       `json:"ip_addresses,omitempty"`
	IssuerName        *string        `json:"issuer_name,omitempty"`
	IssuerKind        *string        `json:"issuer_kind,omitempty"`
	IssuerGroup       string         `json:"issuer_group,omitempty"`
	NotBefore         *time.Time     `json:"not_before,omitempty"`
	NotAfter          *time.Time     `json:"not_after,omitempty"`
	RenewalTime       *time.Time     `json:"renewal_time,omitempty"`
	CertificateStatus string         `json:"certificate_status,omitempty"`
	IsReady           bool           `json:"is_ready"`
	Metadata          map[string]any `json:"metadata,omitempty"`
}

// Certificates is /api/v1/certificates/.
func (c *Client) Certificates() Resource[Certificate, CertificateRow, CertificateRequest] {
	return newResource[Certificate, CertificateRow, CertificateRequest](c, "certificates", "/api/v1/certificates/")
}
