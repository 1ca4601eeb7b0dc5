package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// K8sClusterSpec registers an external Kubernetes cluster.
// +kubebuilder:validation:XValidation:rule="has(self.apiServer) || has(self.authentication.kubeconfig)",message="apiServer is required unless authentication.kubeconfig is used"
type K8sClusterSpec struct {
	// DisplayName is the human-readable name of the cluster.
	// +optional
	DisplayName string `json:"displayName,omitempty"`
	// APIServer is the URL of the cluster's kube-apiserver.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	APIServer string `json:"apiServer,omitempty"`
	// Authentication says how the operator authenticates to the cluster.
	Authentication K8sClusterAuthentication `json:"authentication"`
	// CACertificate is the PEM-encoded CA certificate of the cluster's API server.
	// +optional
	CACertificate string `json:"caCertificate,omitempty"`
}

// K8sClusterAuthentication is exactly one of a ServiceAccount token or a kubeconfig.
// +kubebuilder:validation:XValidation:rule="has(self.serviceAccountToken) != has(self.kubeconfig)",message="exactly one of serviceAccountToken or kubeconfig must be set"
type K8sClusterAuthentication struct {
	// ServiceAccountToken authenticates with a bearer token from a Secret.
	// +optional
	ServiceAccountToken *SecretReference `json:"serviceAccountToken,omitempty"`
	// Kubeconfig authenticates with a kubeconfig stored in a Secret.
	// +optional
	Kubeconfig *SecretReference `json:"kubeconfig,omitempty"`
}

// SecretReference wraps a reference to one key of a Secret in the CR's namespace.
type SecretReference struct {
	// SecretRef names the Secret and key.
	SecretRef SecretKeySelector `json:"secretRef"`
}

// K8sClusterStatus is the observed state of an external cluster.
type K8sClusterStatus struct {
	// Phase is Pending, Ready or Error.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Message explains the phase, especially an error.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the status describes; set only when
	// the cluster was reached.
	// +optional
	ObservedGeneration int64 `json:"observed_generation,omitempty"`
	// Conditions: Ready (reachable) and APIReported.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ServerVersion is the Kubernetes version the cluster's API server reported.
	// +optional
	ServerVersion string `json:"server_version,omitempty"`
}

// K8sCluster registers an external Kubernetes cluster with the operator.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=k8sc,categories=polycrate
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="API Server",type=string,JSONPath=`.spec.apiServer`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.server_version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type K8sCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   K8sClusterSpec   `json:"spec"`
	Status K8sClusterStatus `json:"status,omitempty"`
}

// K8sClusterList is a list of K8sClusters.
// +kubebuilder:object:root=true
type K8sClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []K8sCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&K8sCluster{}, &K8sClusterList{})
}
