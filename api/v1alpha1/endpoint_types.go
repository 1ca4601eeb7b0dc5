package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointSpec is one monitored host, as discovery derived it from an Ingress or
// HTTPRoute (or as a user declared it).
type EndpointSpec struct {
	// DisplayName is shown in the API; discovery sets it to the host.
	// +optional
	DisplayName string `json:"displayName,omitempty"`
	// RemoteAddress is the host name or address to check.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	RemoteAddress string `json:"remoteAddress"`
	// RemotePort is the port to check.
	// +kubebuilder:default=443
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	RemotePort int32 `json:"remotePort,omitempty"`
	// Kind of check; discovery only creates http endpoints.
	// +kubebuilder:validation:Enum=http;tcp;icmp;dns
	// +kubebuilder:default=http
	// +optional
	Kind string `json:"kind,omitempty"`
	// TLS checks over HTTPS.
	// +kubebuilder:default=true
	// +optional
	TLS *bool `json:"tls,omitempty"`
	// Path is the HTTP path of the health check.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Path string `json:"path,omitempty"`
	// Timeout of one check in seconds.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +optional
	Timeout int32 `json:"timeout,omitempty"`
	// Interval between checks in seconds.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +optional
	Interval int32 `json:"interval,omitempty"`
	// ExpectedStatusCodes are the HTTP status codes that count as success.
	// +kubebuilder:default={200}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	// +optional
	ExpectedStatusCodes []int32 `json:"expectedStatusCodes,omitempty"`
	// ExpectedBody, when set, must be contained in the response body.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	ExpectedBody string `json:"expectedBody,omitempty"`
	// K8sAppName links the endpoint to a K8sApp in the same namespace.
	// +optional
	K8sAppName string `json:"k8sAppName,omitempty"`
}

// The defaults of an Endpoint's spec, as the CRD declares them (the
// +kubebuilder:default markers above; TestEndpointDefaultsAreTheCRDs holds
// them equal). Discovery leaves a field at its default out of its apply.
const (
	DefaultEndpointPort       = 443
	DefaultEndpointKind       = "http"
	DefaultEndpointTLS        = true
	DefaultEndpointPath       = "/"
	DefaultEndpointTimeout    = 5
	DefaultEndpointInterval   = 60
	DefaultEndpointStatusCode = 200
)

// EndpointStatus is the API-sync state of an Endpoint.
type EndpointStatus struct {
	// Phase: pending, synced or error.
	// +optional
	Phase string `json:"phase,omitempty"`
	// APIID is the id of the endpoint in the Polycrate API.
	// +optional
	APIID string `json:"apiID,omitempty"`
	// ConfigHash is the hash of the last payload written to the API.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
	// LastSyncedAt is when the API last accepted the endpoint.
	// +optional
	LastSyncedAt *metav1.Time `json:"lastSyncedAt,omitempty"`
	// K8sAppName is the K8sApp the endpoint is associated with.
	// +optional
	K8sAppName string `json:"k8sAppName,omitempty"`
	// Message explains the phase, especially an error.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Monitoring is what this operator's checks of the endpoint found, while the
	// API assigns the endpoint to it (docs/monitoring.md). Written when the state
	// changes and otherwise at most every few minutes, never once per check.
	// +optional
	Monitoring *EndpointMonitoringStatus `json:"monitoring,omitempty"`
	// Conditions are the standard conditions: Ready (the API sync) and, while this
	// operator checks the endpoint, Available (the checks).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EndpointMonitoringStatus is the state of the checks this operator runs.
type EndpointMonitoringStatus struct {
	// State is up or down (the last check's outcome).
	// +kubebuilder:validation:Enum=up;down
	State string `json:"state"`
	// LastCheckAt is when the last check recorded here ran.
	// +optional
	LastCheckAt *metav1.Time `json:"lastCheckAt,omitempty"`
	// LastTransitionTime is when State last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// StatusCode is the last HTTP status code.
	// +optional
	StatusCode int32 `json:"statusCode,omitempty"`
	// DurationMS is how long the last check took.
	// +optional
	DurationMS int64 `json:"durationMS,omitempty"`
	// ErrorName and ErrorCategory say why the last check failed (docs/monitoring.md).
	// +optional
	ErrorName string `json:"errorName,omitempty"`
	// +optional
	ErrorCategory string `json:"errorCategory,omitempty"`
	// Message is the failure in words.
	// +optional
	Message string `json:"message,omitempty"`
	// ConsecutiveFailures counts failed checks since the last success.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// TLSNotAfter is the earliest expiry of the certificate chain the endpoint presented.
	// +optional
	TLSNotAfter *metav1.Time `json:"tlsNotAfter,omitempty"`
	// URL is what an http check requests.
	// +optional
	URL string `json:"url,omitempty"`
}

// Endpoint is one HTTP-monitored host in the Polycrate API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ep;pep,categories=polycrate
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.remoteAddress`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.remotePort`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Check",type=string,JSONPath=`.status.monitoring.state`
// +kubebuilder:printcolumn:name="Checked",type=date,JSONPath=`.status.monitoring.lastCheckAt`,priority=1
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=`.status.monitoring.errorName`,priority=1
// +kubebuilder:printcolumn:name="API ID",type=string,JSONPath=`.status.apiID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Endpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EndpointSpec   `json:"spec"`
	Status EndpointStatus `json:"status,omitempty"`
}

// EndpointList is a list of Endpoints.
// +kubebuilder:object:root=true
type EndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Endpoint `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Endpoint{}, &EndpointList{})
}
