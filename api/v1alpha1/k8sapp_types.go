package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// K8sAppSpec describes a deployed app, as its meta-Secret, annotated Pods or an
// Ingress/HTTPRoute claim describe it.
type K8sAppSpec struct {
	// Kind of app in the API: polycrate, helm or external.
	// +kubebuilder:validation:Enum=polycrate;helm;external
	// +optional
	Kind string `json:"kind,omitempty"`
	// DiscoverySource says where the app was discovered: secret, pod, ingress or httproute.
	// +kubebuilder:validation:Enum=secret;pod;ingress;httproute
	// +optional
	DiscoverySource string `json:"discovery_source,omitempty"`
	// BYOA marks a bring-your-own app (only for ingress/httproute-sourced apps).
	// +optional
	BYOA bool `json:"byoa,omitempty"`
	// Block is the Polycrate block that deployed the app.
	// +optional
	Block K8sAppBlock `json:"block,omitempty"`
	// Workspace is the Polycrate workspace the block belongs to.
	// +optional
	Workspace K8sAppWorkspace `json:"workspace,omitempty"`
	// Action is the last action the Polycrate CLI ran for the block.
	// +optional
	Action K8sAppAction `json:"action,omitempty"`
}

// K8sAppBlock describes the block of an app.
type K8sAppBlock struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	DisplayName string `json:"display_name,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	AppVersion string `json:"app_version,omitempty"`
	// From is the block's registry reference.
	// +optional
	From string `json:"from,omitempty"`
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	Flavor string `json:"flavor,omitempty"`
	// +optional
	Chart *K8sAppChart `json:"chart,omitempty"`
}

// K8sAppChart is the Helm chart a block installs.
type K8sAppChart struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	RepoURL string `json:"repo_url,omitempty"`
}

// K8sAppWorkspace names the Polycrate workspace of an app.
type K8sAppWorkspace struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Organization string `json:"organization,omitempty"`
}

// K8sAppAction is the last action run for the app's block.
type K8sAppAction struct {
	// Name of the action, e.g. install or uninstall.
	// +optional
	Name string `json:"name,omitempty"`
	// Status of the action: success, running or failed.
	// +optional
	Status string `json:"status,omitempty"`
	// LastExecutedAt is when the action ran.
	// +optional
	LastExecutedAt *metav1.Time `json:"last_executed_at,omitempty"`
}

// K8sAppArtifact is one distinct container image of the app.
type K8sAppArtifact struct {
	// Name is a DNS-safe form of the image.
	Name string `json:"name"`
	// Image is the image reference.
	Image string `json:"image"`
	// PodCount is the number of Pods running the image.
	PodCount int32 `json:"pod_count"`
}

// K8sAppRestartBucket counts the container restarts of an app's Pods that
// were observed in the 5 minutes from Start.
type K8sAppRestartBucket struct {
	// Start is the bucket's beginning (a multiple of 5 minutes).
	Start metav1.Time `json:"start"`
	// Restarts observed in the bucket.
	// +kubebuilder:validation:Minimum=0
	Restarts int32 `json:"restarts"`
}

// K8sAppStatus is the observed and API-sync state of a K8sApp.
type K8sAppStatus struct {
	SyncStatus `json:",inline"`
	// Installed and its siblings are derived from the last action.
	// +optional
	Installed bool `json:"installed,omitempty"`
	// +optional
	InstallationRunning bool `json:"installation_running,omitempty"`
	// +optional
	InstallationFailed bool `json:"installation_failed,omitempty"`
	// +optional
	Uninstalled bool `json:"uninstalled,omitempty"`
	// State aggregated from pod readiness: OK, WARNING or CRITICAL.
	// +optional
	State string `json:"state,omitempty"`
	// BlockID is the API id of the app's block, once resolved.
	// +optional
	BlockID string `json:"block_id,omitempty"`
	// PodsTotal and PodsReady count the app's Pods (Deployments, StatefulSets, DaemonSets only).
	// +optional
	PodsTotal int32 `json:"pods_total,omitempty"`
	// +optional
	PodsReady int32 `json:"pods_ready,omitempty"`
	// PodsAvailable counts running Pods whose containers are all ready; PodsUnavailable the rest.
	// +optional
	PodsAvailable int32 `json:"pods_available,omitempty"`
	// +optional
	PodsUnavailable int32 `json:"pods_unavailable,omitempty"`
	// PodsRestarts is the sum of the container restart counts of the app's Pods.
	// +optional
	PodsRestarts int32 `json:"pods_restarts,omitempty"`
	// PodsRestartsLastHour is how often the containers of the app's Pods
	// restarted in the last hour (the API's pods_restart_count_last_hour): the
	// sum of PodsRestartWindow.
	// +optional
	PodsRestartsLastHour int32 `json:"pods_restarts_last_hour,omitempty"`
	// PodsRestartWindow holds the restarts of the last hour in 5-minute buckets,
	// so the count survives a restart of the operator. A bucket leaves the
	// window an hour after it began (a restart counts for 55 to 60 minutes).
	// +kubebuilder:validation:MaxItems=13
	// +listType=atomic
	// +optional
	PodsRestartWindow []K8sAppRestartBucket `json:"pods_restart_window,omitempty"`
	// PodsStatusHash detects changes of the pod part of the payload.
	// +optional
	PodsStatusHash string `json:"pods_status_hash,omitempty"`
	// PodsStatusUpdatedAt is when the pod part last changed.
	// +optional
	PodsStatusUpdatedAt *metav1.Time `json:"pods_status_updated_at,omitempty"`
	// BlockLookup is the workspace/block the block ID was last looked up for
	// ("organization/workspace/block"); a lookup runs again only when it changes.
	// +optional
	BlockLookup string `json:"block_lookup,omitempty"`
	// Artifacts lists each distinct image with its pod count.
	// +optional
	Artifacts []K8sAppArtifact `json:"artifacts,omitempty"`
	// ArtifactCount is the number of distinct images.
	// +optional
	ArtifactCount int32 `json:"artifact_count,omitempty"`
}

// K8sApp is a deployed app reported to the Polycrate API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=app;pca,categories=polycrate
// +kubebuilder:printcolumn:name="Block",type=string,JSONPath=`.spec.block.name`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.block.version`
// +kubebuilder:printcolumn:name="Artifacts",type=integer,JSONPath=`.status.artifact_count`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.pods_total`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.pods_ready`,priority=1
// +kubebuilder:printcolumn:name="Restarts-1h",type=integer,JSONPath=`.status.pods_restarts_last_hour`,priority=1
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type K8sApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   K8sAppSpec   `json:"spec,omitempty"`
	Status K8sAppStatus `json:"status,omitempty"`
}

// K8sAppList is a list of K8sApps.
// +kubebuilder:object:root=true
type K8sAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []K8sApp `json:"items"`
}

func init() {
	SchemeBuilder.Register(&K8sApp{}, &K8sAppList{})
}
