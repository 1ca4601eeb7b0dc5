package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncStatus is the API-sync part of the status of every snake_case kind
// (K8sApp, Certificate, Host, K8sVolume, Backup, BackupSchedule, K8sCluster),
// named as the seed's Certificate and K8sApp examples name it.
type SyncStatus struct {
	// Phase is the CR's lifecycle phase (Pending, Synced, Error, Deleting).
	// +optional
	Phase string `json:"phase,omitempty"`
	// SyncStatus is the state of the last API sync: pending, synced or error.
	// +optional
	SyncStatus string `json:"sync_status,omitempty"`
	// APIID is the id of the object in the Polycrate API.
	// +optional
	APIID string `json:"api_id,omitempty"`
	// ConfigHash is the hash of the last payload written to the API; an unchanged
	// hash and an existing API object mean no API write.
	// +optional
	ConfigHash string `json:"config_hash,omitempty"`
	// LastSyncedAt is when the API last accepted this object.
	// +optional
	LastSyncedAt *metav1.Time `json:"last_synced_at,omitempty"`
	// Message explains the phase, especially an error.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the status describes; set only on a clean reconcile.
	// +optional
	ObservedGeneration int64 `json:"observed_generation,omitempty"`
	// Conditions are the standard conditions; Ready at least.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SecretKeySelector names one key of a Secret in the object's namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key within the Secret.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// SourceReference names the Kubernetes object a discovered CR mirrors.
type SourceReference struct {
	// APIVersion of the source, e.g. velero.io/v1.
	// +optional
	APIVersion string `json:"api_version,omitempty"`
	// Kind of the source, e.g. Backup.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the source.
	Name string `json:"name"`
	// Namespace of the source; empty for cluster-scoped sources.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// UID of the source.
	// +optional
	UID string `json:"uid,omitempty"`
}
