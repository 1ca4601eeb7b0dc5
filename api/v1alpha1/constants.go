package v1alpha1

// Every label, finalizer, condition type, reason and field-owner name the operator
// writes lives here, so that no controller spells one differently.

// FieldOwner is the server-side-apply field manager of everything the operator declares.
const FieldOwner = "polycrate-operator"

// DefaultOperatorConfigName is the only name an OperatorConfig may have.
const DefaultOperatorConfigName = "default"

// DefaultOperatorNamespace is the namespace the operator runs in unless told otherwise.
const DefaultOperatorNamespace = "polycrate"

// Labels on discovered custom resources.
const (
	// LabelDiscovered marks every CR created by discovery; the stale sweep's scope.
	LabelDiscovered = "polycrate_discovered"
	// LabelOperatorDiscovered is the older discovered label the seed's K8sApp and
	// Certificate examples show; set alongside LabelDiscovered on those kinds.
	LabelOperatorDiscovered = "operator.polycrate.io/discovered"
	// LabelValueTrue is the value of the boolean labels above.
	LabelValueTrue = "true"
	// LabelAPIDefined marks an Endpoint CR that mirrors an endpoint defined in the
	// Polycrate API (no Kubernetes source): the monitoring agent owns it; discovery,
	// its sweep and the sync never write or delete it, nor its API object.
	LabelAPIDefined = "monitoring.polycrate.io/api-defined"

	// LabelEndpointSourceIngress names the Ingress an Endpoint was discovered from.
	LabelEndpointSourceIngress = "endpoints.polycrate.io/source-ingress"
	// LabelEndpointSourceHTTPRoute names the HTTPRoute an Endpoint was discovered from.
	LabelEndpointSourceHTTPRoute = "endpoints.polycrate.io/source-httproute"

	// LabelK8sAppBlock, LabelK8sAppKind and LabelK8sAppType describe a K8sApp's block.
	LabelK8sAppBlock = "k8sapps.polycrate.io/block"
	LabelK8sAppKind  = "k8sapps.polycrate.io/kind"
	LabelK8sAppType  = "k8sapps.polycrate.io/type"
	// LabelK8sAppDiscoverySource names the source kind a K8sApp came from
	// (secret, pod, ingress, httproute).
	LabelK8sAppDiscoverySource = "k8sapps.polycrate.io/discovery-source"
	// LabelK8sAppNameDeprecated is the pre-0.38.0 label that linked an Ingress to a
	// K8sApp; it is honoured and then removed from the source.
	LabelK8sAppNameDeprecated = "k8sapps.polycrate.io/name"

	// LabelCertificateIssuer, LabelCertificateSource and LabelCertificateReady
	// describe a discovered Certificate.
	LabelCertificateIssuer = "certificates.polycrate.io/issuer"
	LabelCertificateSource = "certificates.polycrate.io/source"
	LabelCertificateReady  = "certificates.polycrate.io/ready"

	// LabelHostSourceNode names the Node a Host was discovered from.
	LabelHostSourceNode = "hosts.polycrate.io/source-node"
	// LabelVolumeSourcePV names the PersistentVolume a K8sVolume was discovered from.
	LabelVolumeSourcePV = "volumes.polycrate.io/source-pv"
	// LabelBackupProvider and LabelBackupSource describe a discovered Backup or BackupSchedule.
	LabelBackupProvider = "backups.polycrate.io/provider"
	LabelBackupSource   = "backups.polycrate.io/source"

	// Labels of the credentials Secret an S3Bucket owns.
	LabelManagedBy        = "polycrate_managed_by"
	LabelObjectType       = "polycrate_object_type"
	LabelS3BucketName     = "polycrate_s3_bucket_name"
	LabelS3BucketRegion   = "polycrate_s3_bucket_region"
	ManagedByOperator     = "operator"
	ObjectTypeCredentials = "s3-credentials"
)

// Finalizers. Kubernetes validates finalizer names as qualified names, so they
// follow polycrate.io/<resource>-<purpose>; the two source finalizers keep the
// literal names the seed gives them.
const (
	// FinalizerIngressDiscovery is set on a discovered Ingress.
	FinalizerIngressDiscovery = "endpoints.polycrate.io/discovery-cleanup"
	// FinalizerHTTPRouteDiscovery is set on a discovered HTTPRoute.
	FinalizerHTTPRouteDiscovery = "endpoints.polycrate.io/httproute-discovery-cleanup"

	// API-cleanup finalizers on the operator's own CRs: each removes the CR's API object.
	FinalizerEndpointCleanup       = "polycrate.io/endpoint-cleanup"
	FinalizerK8sAppCleanup         = "polycrate.io/k8sapp-cleanup"
	FinalizerHostCleanup           = "polycrate.io/host-cleanup"
	FinalizerK8sVolumeCleanup      = "polycrate.io/k8svolume-cleanup"
	FinalizerBackupCleanup         = "polycrate.io/backup-cleanup"
	FinalizerBackupScheduleCleanup = "polycrate.io/backupschedule-cleanup"
	FinalizerCertificateCleanup    = "polycrate.io/certificate-cleanup"
	FinalizerS3BucketCleanup       = "polycrate.io/s3bucket-cleanup"
)

// Condition types.
const (
	ConditionReady = "Ready"
	// ConditionAvailable is an Endpoint's check state (written by the monitoring agent).
	ConditionAvailable              = "Available"
	ConditionAPIConnected           = "APIConnected"
	ConditionWorkspaceResolved      = "WorkspaceResolved"
	ConditionLocalClusterRegistered = "LocalClusterRegistered"
	// ConditionCRDsInstalled says what the CRD installation on start did: True
	// when every CRD is this operator's, False when one was left as installed
	// (a newer operator's, or one that would drop a stored version) or the apply
	// failed and the operator runs with the installed ones.
	ConditionCRDsInstalled = "CRDsInstalled"
	// ConditionPreflightPassed: the last run of the provided-cluster checklist
	// found every hard requirement (reason Passed, or Missing with the summary).
	ConditionPreflightPassed = "PreflightPassed"
	// ConditionAPICircuitClosed: the circuit breaker of the API connection lets
	// requests through (True, reason Closed); False (reason CircuitOpen) while the
	// API failed so often in a row that requests are held back and one probe at a
	// time checks for its recovery.
	ConditionAPICircuitClosed = "APICircuitClosed"
	// ConditionSpecCurrent: the OperatorConfig sets no deprecated field (True,
	// reason Current); False (reason DeprecatedFieldIgnored) names each field
	// the operator ignores, e.g. api_sync.workspace_id of versions before 0.29.
	ConditionSpecCurrent = "SpecCurrent"
)

// Condition reasons shared by the controllers.
const (
	ReasonSynced         = "Synced"
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonAPIError       = "APIError"
	ReasonAPIUnavailable = "APIUnavailable"
	// ReasonCircuitOpen: the API connection's circuit breaker is open; an object
	// waiting for it is parked and woken when the API answers again.
	ReasonCircuitOpen            = "CircuitOpen"
	ReasonCircuitClosed          = "Closed"
	ReasonUnauthorized           = "Unauthorized"
	ReasonForbidden              = "Forbidden"
	ReasonSecretNotFound         = "SecretNotFound"
	ReasonSecretKeyMissing       = "SecretKeyMissing"
	ReasonTokenEmpty             = "TokenEmpty"
	ReasonWaitingForHealthReport = "WaitingForHealthReport"
	ReasonConnected              = "Connected"
	ReasonResolved               = "Resolved"
	ReasonWaitingForLocalCluster = "WaitingForLocalCluster"
	ReasonLocalClusterDisabled   = "LocalClusterDisabled"
	ReasonNotSingleton           = "NotSingleton"
	ReasonDisabled               = "Disabled"
	ReasonDeleting               = "Deleting"
	ReasonRecreated              = "Recreated"
	ReasonAdopted                = "Adopted"
	ReasonUnreachable            = "Unreachable"
	ReasonInvalidCACertificate   = "InvalidCACertificate"
	ReasonAPIRedirect            = "APIRedirect"
	ReasonNameCollision          = "NameCollision"
	ReasonWorkspaceNotResolved   = "WorkspaceNotResolved"
	ReasonLocalClusterNotCreated = "LocalClusterNotConfigured"
	ReasonLocalClusterRegistered = "Registered"
	ReasonLocalClusterAdopted    = "AdoptedExisting"
	ReasonOperatorConfigMissing  = "OperatorConfigMissing"
	ReasonCRDsInstalled          = "Installed"
	ReasonCRDsLeftAsInstalled    = "LeftAsInstalled"
	ReasonCRDInstallFailed       = "InstallFailed"
	ReasonPreflightPassed        = "Passed"
	ReasonPreflightMissing       = "RequirementMissing"
	ReasonSpecCurrent            = "Current"
	ReasonDeprecatedFieldIgnored = "DeprecatedFieldIgnored"
	// AnnotationPreflight on the API's cluster record holds the checklist's
	// summary line; AnnotationPreflightCheckedAt when it ran.
	AnnotationPreflight          = "polycrate.io/preflight"
	AnnotationPreflightCheckedAt = "polycrate.io/preflight-checked-at"
	ReasonProvisioning           = "Provisioning"
	ReasonWaitingForCredentials  = "WaitingForCredentials"
	ReasonUnknownRegion          = "UnknownRegion"
	ReasonBucketNameTaken        = "BucketNameTaken"
	ReasonAlreadyClaimed         = "AlreadyClaimed"
	ReasonQuotaExceeded          = "QuotaExceeded"
)

// Condition types and reasons of single controllers.
const (
	// ConditionBlockLinked: a K8sApp's block link (meta-Secret discovery) resolved.
	ConditionBlockLinked   = "BlockLinked"
	ReasonBlockResolved    = "BlockResolved"
	ReasonWorkspaceMissing = "WorkspaceNotFound"
	ReasonBlockMissing     = "BlockNotFound"
	// ConditionAPIReported says whether a K8sCluster is a record of the Polycrate
	// API; ReasonOneClusterPerWorkspace: the API keeps one cluster per workspace,
	// and that record is the local cluster's.
	ConditionAPIReported         = "APIReported"
	ReasonOneClusterPerWorkspace = "OneClusterPerWorkspace"

	// Discovery's events on sources.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonHostClaimed       = "HostClaimedByAnotherSource"
	ReasonTooManyHosts      = "TooManyHosts"
	ReasonInvalidMetaSecret = "InvalidMetaSecret"
	ReasonAppConflict       = "K8sAppNameConflict"
	ReasonDiscovered        = "Discovered"
	ReasonInvalidSource     = "InvalidSource"
	ReasonNameTaken         = "NameTaken"

	// S3Bucket provisioning's events.
	ReasonSecretWritten = "SecretWritten"
	ReasonBucketCreated = "BucketCreated"
	ReasonBucketDeleted = "BucketDeleted"
	ReasonBucketKept    = "BucketRetained"
	ReasonSecretForeign = "SecretNotOwned"
	// ReasonSecretNamespaceNotGranted: the operator may not write Secrets in the
	// S3Bucket's namespace (run --secret-namespaces).
	ReasonSecretNamespaceNotGranted = "SecretNamespaceNotGranted"
)

// The monitoring agent's reasons: the Available condition of an Endpoint (the
// failure's name in CamelCase when a check fails) and its events.
const (
	ReasonCheckSucceeded = "CheckSucceeded"
	ReasonEndpointDown   = "EndpointDown"
	ReasonEndpointUp     = "EndpointUp"
	// ReasonMirrored: an Endpoint CR of an endpoint defined in the API.
	ReasonMirrored = "Mirrored"
	// AnnotationAPIEndpointID names the API endpoint an API-defined Endpoint CR mirrors.
	AnnotationAPIEndpointID = "monitoring.polycrate.io/api-id"
)

// The cloud controller (seed 002 "Cloud Controller (CCM-lite)").
const (
	// ConditionNodeInitialized is a Host's cloud initialization: its Node got the
	// operator's providerID and region and lost the uninitialized taint.
	ConditionNodeInitialized = "NodeInitialized"
	// ReasonNodeInitialized: providerID and region set, taint removed.
	ReasonNodeInitialized = "Initialized"
	// ReasonForeignProviderID: another provider's providerID; the Node is left alone.
	ReasonForeignProviderID = "ForeignProviderID"
	// ReasonWaitingForPop: the agent has no pop_name yet; the Node keeps its taint.
	ReasonWaitingForPop = "WaitingForPop"
	// ReasonWaitingForHostSync: the Node's Host has not synced to the API yet.
	ReasonWaitingForHostSync = "WaitingForHostSync"
	// AnnotationLoadBalancer is the Service annotation of service_scope:
	// "ignore" (scope all) or "managed" (scope opt-in).
	AnnotationLoadBalancer = "polycrate.io/loadbalancer"
	// ProviderIDPrefix starts every providerID the operator sets:
	// polycrate://<cluster id>/<node>.
	ProviderIDPrefix = "polycrate://"
)
