package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupSpec mirrors a Velero or CloudNativePG backup, named as the API's Backup fields.
type BackupSpec struct {
	// Name is the source backup's name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Provider is the tool that made the backup.
	// +kubebuilder:validation:Enum=velero;cloudnativepg;custom
	Provider string `json:"provider"`
	// Kind: cluster (whole cluster), app (restricted to namespaces) or database.
	// +kubebuilder:validation:Enum=cluster;app;database
	// +optional
	Kind string `json:"kind,omitempty"`
	// SourceNamespace is the namespace of the source backup (identity: name + provider + source_namespace).
	// +optional
	SourceNamespace string `json:"source_namespace,omitempty"`
	// Status is the normalised backup status.
	// +kubebuilder:validation:Enum=pending;running;completed;failed;partial;expired;unknown
	// +optional
	Status string `json:"status,omitempty"`
	// RetentionPolicy is the TTL as a string, e.g. 720h0m0s.
	// +optional
	RetentionPolicy string `json:"retention_policy,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"started_at,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completed_at,omitempty"`
	// +optional
	Expiration *metav1.Time `json:"expiration,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	ItemsBackedUp int64 `json:"items_backed_up,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	SizeBytes int64 `json:"size_bytes,omitempty"`
	// ScheduleName is the schedule that created the backup, if any.
	// +optional
	ScheduleName string `json:"schedule_name,omitempty"`
	// IncludedNamespaces are the namespaces the backup is restricted to (kind app).
	// +optional
	IncludedNamespaces []string `json:"included_namespaces,omitempty"`
	// Source is the object this Backup mirrors.
	// +optional
	Source *SourceReference `json:"source,omitempty"`
}

// BackupStatus is the API-sync state of a Backup.
type BackupStatus struct {
	SyncStatus `json:",inline"`
}

// Backup mirrors a Velero or CloudNativePG backup.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=backup,categories=polycrate
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.spec.status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupSpec   `json:"spec"`
	Status BackupStatus `json:"status,omitempty"`
}

// BackupList is a list of Backups.
// +kubebuilder:object:root=true
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Backup{}, &BackupList{})
}
