package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// K8sVolumeSpec mirrors a PersistentVolume, named as the API's K8sVolume fields.
type K8sVolumeSpec struct {
	// Name is the PersistentVolume's name (API provider_object_name).
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// ProviderObjectID is the PersistentVolume's UID.
	// +optional
	ProviderObjectID string `json:"provider_object_id,omitempty"`
	// CSIDriver is spec.csi.driver; empty for non-CSI volumes.
	// +optional
	CSIDriver string `json:"csi_driver,omitempty"`
	// CloudProviderVolumeID is the CSI volume handle.
	// +optional
	CloudProviderVolumeID string `json:"cloud_provider_volume_id,omitempty"`
	// StorageClass is spec.storageClassName.
	// +optional
	StorageClass string `json:"storage_class,omitempty"`
	// CapacityBytes is spec.capacity.storage in bytes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	CapacityBytes int64 `json:"capacity_bytes,omitempty"`
	// CapacityString is spec.capacity.storage as written, e.g. 10Gi.
	// +optional
	CapacityString string `json:"capacity_string,omitempty"`
	// Phase is status.phase of the PersistentVolume.
	// +kubebuilder:validation:Enum=Available;Bound;Failed;Pending;Released;Unknown
	// +optional
	Phase string `json:"phase,omitempty"`
	// AccessModes are spec.accessModes.
	// +optional
	AccessModes []string `json:"access_modes,omitempty"`
	// VolumeMode is spec.volumeMode.
	// +kubebuilder:validation:Enum=Block;Filesystem
	// +optional
	VolumeMode string `json:"volume_mode,omitempty"`
	// ReclaimPolicy is spec.persistentVolumeReclaimPolicy.
	// +kubebuilder:validation:Enum=Delete;Recycle;Retain
	// +optional
	ReclaimPolicy string `json:"reclaim_policy,omitempty"`
	// PVCName is the bound claim's name.
	// +optional
	PVCName string `json:"pvc_name,omitempty"`
	// PVCNamespace is the bound claim's namespace.
	// +optional
	PVCNamespace string `json:"pvc_namespace,omitempty"`
	// Source is the PersistentVolume this K8sVolume mirrors.
	// +optional
	Source *SourceReference `json:"source,omitempty"`
}

// K8sVolumeStatus is the API-sync state of a K8sVolume.
type K8sVolumeStatus struct {
	SyncStatus `json:",inline"`
}

// K8sVolume mirrors a PersistentVolume (cluster-scoped, like the PV it mirrors).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vol;pvol,categories=polycrate
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.spec.capacity_string`
// +kubebuilder:printcolumn:name="StorageClass",type=string,JSONPath=`.spec.storage_class`
// +kubebuilder:printcolumn:name="PVC Namespace",type=string,JSONPath=`.spec.pvc_namespace`
// +kubebuilder:printcolumn:name="PVC",type=string,JSONPath=`.spec.pvc_name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type K8sVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   K8sVolumeSpec   `json:"spec"`
	Status K8sVolumeStatus `json:"status,omitempty"`
}

// K8sVolumeList is a list of K8sVolumes.
// +kubebuilder:object:root=true
type K8sVolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []K8sVolume `json:"items"`
}

func init() {
	SchemeBuilder.Register(&K8sVolume{}, &K8sVolumeList{})
}
