package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CertificateSpec mirrors a cert-manager Certificate, named as the seed's example
// and the API's Certificate fields.
type CertificateSpec struct {
	// Name is the cert-manager Certificate's name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	DisplayName string `json:"display_name,omitempty"`
	// Namespace is the namespace of the certificate and its Secret.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// SecretName is the Secret holding the certificate.
	// +kubebuilder:validation:MinLength=1
	SecretName string `json:"secret_name"`
	// +optional
	DNSNames []string `json:"dns_names,omitempty"`
	// +optional
	IPAddresses []string `json:"ip_addresses,omitempty"`
	// +optional
	IssuerName string `json:"issuer_name,omitempty"`
	// IssuerKind in the API's lower-case form.
	// +kubebuilder:validation:Enum=issuer;clusterissuer
	// +optional
	IssuerKind string `json:"issuer_kind,omitempty"`
	// +optional
	IssuerGroup string `json:"issuer_group,omitempty"`
	// CertificateStatus is derived from cert-manager's Ready condition and NotAfter.
	// +kubebuilder:validation:Enum=ready;pending;failed;expired;expiring_soon
	// +optional
	CertificateStatus string `json:"certificate_status,omitempty"`
	// +optional
	IsReady bool `json:"is_ready,omitempty"`
	// +optional
	NotBefore *metav1.Time `json:"not_before,omitempty"`
	// +optional
	NotAfter *metav1.Time `json:"not_after,omitempty"`
	// +optional
	RenewalTime *metav1.Time `json:"renewal_time,omitempty"`
	// SourceCertManager is the cert-manager Certificate this CR mirrors.
	// +optional
	SourceCertManager *CertManagerSource `json:"source_cert_manager,omitempty"`
}

// CertManagerSource names a cert-manager Certificate.
type CertManagerSource struct {
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	UID string `json:"uid,omitempty"`
	// Revision is status.revision of the cert-manager Certificate.
	// +optional
	Revision int64 `json:"revision,omitempty"`
}

// CertificateStatus is the API-sync state of a Certificate.
type CertificateStatus struct {
	SyncStatus `json:",inline"`
}

// Certificate mirrors a cert-manager Certificate in the Polycrate API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cert;pcert,categories=polycrate
// +kubebuilder:printcolumn:name="Issuer",type=string,JSONPath=`.spec.issuer_name`
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.spec.is_ready`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.spec.certificate_status`
// +kubebuilder:printcolumn:name="Sync",type=string,JSONPath=`.status.sync_status`
// +kubebuilder:printcolumn:name="API_ID",type=string,JSONPath=`.status.api_id`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CertificateSpec   `json:"spec"`
	Status CertificateStatus `json:"status,omitempty"`
}

// CertificateList is a list of Certificates.
// +kubebuilder:object:root=true
type CertificateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Certificate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Certificate{}, &CertificateList{})
}
