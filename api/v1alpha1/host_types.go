package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostSpec mirrors a Node with the fields of the seed's host mapping table.
type HostSpec struct {
	// Name is the API name (the Node name).
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Hostname is the Node name.
	// +kubebuilder:validation:MinLength=1
	Hostname string `json:"hostname"`
	// DefaultIPv4 is the Node's ExternalIP, falling back to its InternalIP.
	// +optional
	DefaultIPv4 string `json:"default_ipv4,omitempty"`
	// ResourceCPUCores is status.capacity.cpu.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ResourceCPUCores int64 `json:"resource_cpu_cores,omitempty"`
	// ResourceMemory is status.capacity.memory in MB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ResourceMemory int64 `json:"resource_memory,omitempty"`
	// ResourceCPUArchitecture is status.nodeInfo.architecture.
	// +optional
	ResourceCPUArchitecture string `json:"resource_cpu_architecture,omitempty"`
	// ProviderID is spec.providerID.
	// +optional
	ProviderID string `json:"provider_id,omitempty"`
	// Source is the Node this Host mirrors.
	// +optional
	Source *SourceReference `json:"source,omitempty"`
}

// HostStatus is the API-sync state of a Host.
type HostStatus struct {
	SyncStatus `json:",inline"`
}

// Host mirrors a Node (cluster-scoped, like the Node it mirrors).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=polycrate
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.spec.hostname`
// +kubebuilder:printcolumn:name="IPv4",type=string,JSONPath=`.spec.default_ipv4`
// +kubebuilder:printcolumn:name="CPU",type=integer,JSONPath=`.spec.resource_cpu_cores`
// +kubebuilder:printcolumn:name="Memory MB",type=integer,JSONPath=`.spec.resource_memory`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Initialized",type=string,JSONPath=`.status.conditions[?(@.type=="NodeInitialized")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Host struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostSpec   `json:"spec"`
	Status HostStatus `json:"status,omitempty"`
}

// HostList is a list of Hosts.
// +kubebuilder:object:root=true
type HostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Host `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Host{}, &HostList{})
}
