package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupScheduleSpec mirrors a Velero Schedule or CloudNativePG ScheduledBackup.
type BackupScheduleSpec struct {
	// Name is the source schedule's name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Provider is the tool that runs the schedule.
	// +kubebuilder:validation:Enum=velero;cloudnativepg;custom
	Provider string `json:"provider"`
	// Kind: cluster, app or database.
	// +kubebuilder:validation:Enum=cluster;app;database
	// +optional
	Kind string `json:"kind,omitempty"`
	// SourceNamespace is the namespace of the source schedule.
	// +optional
	SourceNamespace string `json:"source_namespace,omitempty"`
	// Status is the normalised schedule status.
	// +kubebuilder:validation:Enum=active;paused;failed;unknown
	// +optional
	Status string `json:"status,omitempty"`
	// ScheduleCron is the schedule's five-field cron expression.
	// +optional
	ScheduleCron string `json:"schedule_cron,omitempty"`
	// Paused is true while the schedule is paused.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// RetentionPolicy is the TTL of the schedule's backups as a string.
	// +optional
	RetentionPolicy string `json:"retention_policy,omitempty"`
	// LastBackupAt is when the schedule last created a backup.
	// +optional
	LastBackupAt *metav1.Time `json:"last_backup_at,omitempty"`
	// LastBackupName is the name of the schedule's last backup.
	// +optional
	LastBackupName string `json:"last_backup_name,omitempty"`
	// Source is the object this BackupSchedule mirrors.
	// +optional
	Source *SourceReference `json:"source,omitempty"`
}

// BackupScheduleStatus is the API-sync state of a BackupSchedule.
type BackupScheduleStatus struct {
	SyncStatus `json:",inline"`
}

// BackupSchedule mirrors a Velero Schedule or CloudNativePG ScheduledBackup.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bs,categories=polycrate
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule_cron`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupScheduleSpec   `json:"spec"`
	Status BackupScheduleStatus `json:"status,omitempty"`
}

// BackupScheduleList is a list of BackupSchedules.
// +kubebuilder:object:root=true
type BackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BackupSchedule{}, &BackupScheduleList{})
}
