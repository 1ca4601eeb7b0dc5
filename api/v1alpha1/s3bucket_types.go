package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// S3Bucket phases.
const (
	S3BucketPhasePending               = "Pending"
	S3BucketPhaseProvisioning          = "Provisioning"
	S3BucketPhaseWaitingForCredentials = "WaitingForCredentials"
	S3BucketPhaseReady                 = "Ready"
	S3BucketPhaseError                 = "Error"
)

// S3BucketSpec declares an S3 bucket to provision through the Polycrate API.
// +kubebuilder:validation:XValidation:rule="has(self.region) == has(oldSelf.region) && (!has(self.region) || self.region == oldSelf.region)",message="spec.region is immutable"
type S3BucketSpec struct {
	// Name of the bucket: 3–63 characters of lowercase letters, digits, dots and
	// hyphens, starting and ending with a letter or digit, not an IP address; each
	// dot-separated part starts and ends with a letter or digit (no "..", ".-",
	// "-."), so that the credentials Secret s3-<name>-credentials is a valid name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",message="spec.name must not be formatted as an IP address"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.name is immutable"
	Name string `json:"name"`
	// Region is the S3 region (name or region string of an API S3 cluster); empty
	// means the API's default_s3_bucket_cluster.
	// +optional
	Region string `json:"region,omitempty"`
	// ReclaimPolicy "retain" keeps the API bucket when the CR is deleted; "delete" deletes it.
	// +kubebuilder:validation:Enum=retain;delete
	// +kubebuilder:default=retain
	// +optional
	ReclaimPolicy string `json:"reclaim_policy,omitempty"`
}

// S3BucketStatus is the provisioning state of an S3Bucket.
type S3BucketStatus struct {
	// Phase: Pending, Provisioning, WaitingForCredentials, Ready or Error.
	// +kubebuilder:validation:Enum=Pending;Provisioning;WaitingForCredentials;Ready;Error
	// +optional
	Phase string `json:"phase,omitempty"`
	// APIID is the id of the bucket in the Polycrate API.
	// +optional
	APIID string `json:"api_id,omitempty"`
	// Region is the region the bucket was provisioned in.
	// +optional
	Region string `json:"region,omitempty"`
	// Endpoint is the bucket's S3 endpoint URL.
	// +optional
	Endpoint string `json:"s3_endpoint,omitempty"`
	// SecretName is the credentials Secret in the CR's namespace.
	// +optional
	SecretName string `json:"secret_name,omitempty"`
	// LastSyncedAt is when the bucket and Secret were last reconciled with the API.
	// +optional
	LastSyncedAt *metav1.Time `json:"last_synced_at,omitempty"`
	// Message explains the phase, especially an error.
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observed_generation,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// S3Bucket is an S3 bucket provisioned through the Polycrate API, with its
// credentials written to a Secret in the same namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=s3,categories=polycrate
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.status.region`
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaim_policy`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secret_name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type S3Bucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   S3BucketSpec   `json:"spec"`
	Status S3BucketStatus `json:"status,omitempty"`
}

// S3BucketList is a list of S3Buckets.
// +kubebuilder:object:root=true
type S3BucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []S3Bucket `json:"items"`
}

func init() {
	SchemeBuilder.Register(&S3Bucket{}, &S3BucketList{})
}
