package polycrate

import (
	"context"
	"time"
)

// K8sApp is the detail model of /api/v1/kubernetes/apps/.
type K8sApp struct {
	Meta
	Kind                string  `json:"kind"`
	Block               *Ref    `json:"block"`
	K8sCluster          *Ref    `json:"k8s_cluster"`
	Namespace           *string `json:"namespace"`
	Active              bool    `json:"active"`
	Source              *string `json:"source"`
	BYOA                bool    `json:"byoa"`
	InstalledVersion    *string `json:"installed_version"`
	Installed           bool    `json:"installed"`
	InstallationRunning bool    `json:"installation_running"`
	InstallationFailed  bool    `json:"installation_failed"`
	Uninstalled         bool    `json:"uninstalled"`
	PodsTotal           int     `json:"pods_total"`
	PodsReady           int     `json:"pods_ready"`
	// PodsRestartCountTotal and PodsRestartCountLastHr: the restarts of the
	// app's Pods, all and in the last hour.
	PodsRestartCountTotal  int        `json:"pods_restart_count_total"`
	PodsRestartCountLastHr int        `json:"pods_restart_count_last_hour"`
	LastInstallation       *time.Time `json:"last_installation"`
	PodsStatusHash         *string    `json:"pods_status_hash"`
	PodsStatusUpdatedAt    *time.Time `json:"pods_status_updated_at"`
	// DesiredVersion is an extension (seed 000): the version the API wants this
	// cluster's operator to run; absent from the published API.
	DesiredVersion *string `json:"desired_version"`
}

// K8sAppRow is a list row.
type K8sAppRow struct {
	Row
	Kind       string `json:"kind"`
	K8sCluster *Ref   `json:"k8s_cluster"`
	Installed  bool   `json:"installed"`
	PodsTotal  int    `json:"pods_total"`
	PodsReady  int    `json:"pods_ready"`
}

// K8sAppRequest is K8sAppRequest (no required fields).
type K8sAppRequest struct {
	Common
	Name                  string     `json:"name,omitempty"`
	Kind                  string     `json:"kind,omitempty"`
	Block                 *string    `json:"block,omitempty"`
	K8sCluster            *string    `json:"k8s_cluster,omitempty"`
	Namespace             *string    `json:"namespace,omitempty"`
	Active                *bool      `json:"active,omitempty"`
	Source                *string    `json:"source,omitempty"`
	BYOA                  bool       `json:"byoa"`
	InstalledVersion      *string    `json:"installed_version,omitempty"`
	Installed             bool       `json:"installed"`
	Uninstalled           bool       `json:"uninstalled"`
	InstallationRunning   bool       `json:"installation_running"`
	InstallationFailed    bool       `json:"installation_failed"`
	PodsTotal             int        `json:"pods_total"`
	PodsReady             int        `json:"pods_ready"`
	PodsAvailable         int        `json:"pods_available"`
	PodsUnavailable       int        `json:"pods_unavailable"`
	PodsRestartCountTotal int        `json:"pods_restart_count_total"`
	PodsDetails           any        `json:"pods_details,omitempty"`
	PodsStatusHash        *string    `json:"pods_status_hash,omitempty"`
	PodsStatusUpdatedAt   *time.Time `json:"pods_status_updated_at,omitempty"`
	CreatedByComponent    string     `json:"created_by_component,omitempty"`
	ManagedByObjectID     *string    `json:"managed_by_object_id,omitempty"`
	UninstallationRunning bool       `json:"uninstallation_running"`
	UninstallationFailed  bool       `json:"uninstallation_failed"`
	// PodsRestartCountLastHr is always sent: a window that emptied is a 0 the
	// API must see.
	PodsRestartCountLastHr int `json:"pods_restart_count_last_hour"`
	// LastInstallation is when the last install action ran (the meta-Secret's
	// action.last_executed_at).
	LastInstallation *time.Time `json:"last_installation,omitempty"`
}

// K8sApps is /api/v1/kubernetes/apps/ (agent tokens may not delete).
func (c *Client) K8sApps() Resource[K8sApp, K8sAppRow, K8sAppRequest] {
	return newResource[K8sApp, K8sAppRow, K8sAppRequest](c, "kubernetes/apps", "/api/v1/kubernetes/apps/")
}

// FindK8sApp finds an app by name in a cluster in one request (name_exact and
// k8s_cluster filters); nil when there is none.
func (c *Client) FindK8sApp(ctx context.Context, name, clusterID string) (*K8sAppRow, error) {
	q := Query("name_exact", name)
	if clusterID != "" {
		q.Set("k8s_cluster", clusterID)
	}
	return findOne(c.K8sApps().List(ctx, q))
}

// K8sCluster is the detail model of /api/v1/kubernetes/clusters/.
type K8sCluster struct {
	Meta
	Kind                       string  `json:"kind"`
	KubernetesVersion          *string `json:"kubernetes_version"`
	DiscoveryIgnoredNamespaces any     `json:"discovery_ignored_namespaces"`
	OperatorIgnoreNamespaces   any     `json:"operator_ignore_namespaces"`
	OperatorLoglevel           any     `json:"operator_loglevel"`
}

// K8sClusterRow is a list row.
type K8sClusterRow struct {
	Row
	Kind              string  `json:"kind"`
	KubernetesVersion *string `json:"kubernetes_version"`
}

// K8sClusterRequest is K8sClusterRequest; only kind is required.
type K8sClusterRequest struct {
	Common
	Kind              string  `json:"kind"` // polycrate | generic | loopback
	Name              string  `json:"name,omitempty"`
	KubernetesVersion *string `json:"kubernetes_version,omitempty"`
}

// K8sClusters is /api/v1/kubernetes/clusters/: one per workspace (a second create
// answers 409 conflict; agent tokens may not delete).
func (c *Client) K8sClusters() Resource[K8sCluster, K8sClusterRow, K8sClusterRequest] {
	return newResource[K8sCluster, K8sClusterRow, K8sClusterRequest](c, "kubernetes/clusters", "/api/v1/kubernetes/clusters/")
}

// K8sVolume is the detail model of /api/v1/kubernetes/volumes/.
type K8sVolume struct {
	Meta
	K8sCluster       *Ref    `json:"k8s_cluster"`
	ProviderObjectID *string `json:"provider_object_id"`
	StorageClass     *string `json:"storage_class"`
	CapacityBytes    *int64  `json:"capacity_bytes"`
	Phase            string  `json:"phase"`
	PVCName          *string `json:"pvc_name"`
	PVCNamespace     *string `json:"pvc_namespace"`
}

// K8sVolumeRow is a list row (k8s_cluster is a nested object here).
type K8sVolumeRow struct {
	Row
	Phase        string  `json:"phase"`
	StorageClass *string `json:"storage_class"`
	K8sCluster   *Ref    `json:"k8s_cluster"`
}

// K8sVolumeRequest is K8sVolumeRequest; k8s_cluster is required.
type K8sVolumeRequest struct {
	Common
	Name                  string   `json:"name,omitempty"`
	K8sCluster            string   `json:"k8s_cluster"`
	ProviderObjectName    *string  `json:"provider_object_name,omitempty"`
	ProviderObjectID      *string  `json:"provider_object_id,omitempty"`
	CloudProviderVolumeID *string  `json:"cloud_provider_volume_id,omitempty"`
	CSIDriver             *string  `json:"csi_driver,omitempty"`
	StorageClass          *string  `json:"storage_class,omitempty"`
	CapacityBytes         *int64   `json:"capacity_bytes,omitempty"`
	CapacityString        *string  `json:"capacity_string,omitempty"`
	Phase                 string   `json:"phase,omitempty"`
	AccessModes           []string `json:"access_modes,omitempty"`
	VolumeMode            string   `json:"volume_mode,omitempty"`
	ReclaimPolicy         string   `json:"reclaim_policy,omitempty"`
	PVCName               *string  `json:"pvc_name,omitempty"`
	PVCNamespace          *string  `json:"pvc_namespace,omitempty"`
}

// K8sVolumes is /api/v1/kubernetes/volumes/.
func (c *Client) K8sVolumes() Resource[K8sVolume, K8sVolumeRow, K8sVolumeRequest] {
	return newResource[K8sVolume, K8sVolumeRow, K8sVolumeRequest](c, "kubernetes/volumes", "/api/v1/kubernetes/volumes/")
}
