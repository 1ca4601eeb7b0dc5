package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Status accessors: what the reconcile kit and the sync loop read and write,
// whatever a kind names its fields. They import nothing of the operator.

// Phases of a synced kind (the Endpoint kind spells them in lower case, as the
// seed's example does).
const (
	PhasePending = "Pending"
	PhaseSynced  = "Synced"
	PhaseError   = "Error"
)

// SyncState is the sync part of a synced kind's status.
// +kubebuilder:object:generate=false
type SyncState struct {
	Phase        string // PhasePending, PhaseSynced or PhaseError
	APIID        string
	ConfigHash   string
	LastSyncedAt *metav1.Time
	Message      string
}

// Sync reads the shared sync status.
func (s *SyncStatus) Sync() SyncState {
	return SyncState{Phase: s.Phase, APIID: s.APIID, ConfigHash: s.ConfigHash, LastSyncedAt: s.LastSyncedAt, Message: s.Message}
}

// SetSync writes it (sync_status is the phase in lower case).
func (s *SyncStatus) SetSync(st SyncState) {
	s.Phase, s.APIID, s.ConfigHash, s.LastSyncedAt, s.Message = st.Phase, st.APIID, st.ConfigHash, st.LastSyncedAt, st.Message
	s.SyncStatus = strings.ToLower(st.Phase)
}

// SyncState reads the Endpoint's camelCase status.
func (e *Endpoint) SyncState() SyncState {
	s := &e.Status
	return SyncState{Phase: upperPhase(s.Phase), APIID: s.APIID, ConfigHash: s.ConfigHash, LastSyncedAt: s.LastSyncedAt, Message: s.Message}
}

// upperPhase is an Endpoint's phase with its first letter in upper case. The
// kit's three phases come without an allocation: the phase metric and the
// indexes read every cached Endpoint's state (40,000 concatenations per
// scrape before).
func upperPhase(p string) string {
	switch p {
	case "":
		return ""
	case "synced":
		return PhaseSynced
	case "pending":
		return PhasePending
	case "error":
		return PhaseError
	}
	return strings.ToUpper(p[:1]) + p[1:]
}

// SetSyncState writes it; status.k8sAppName mirrors the claim it was synced with.
func (e *Endpoint) SetSyncState(st SyncState) {
	s := &e.Status
	s.Phase, s.APIID, s.ConfigHash, s.LastSyncedAt, s.Message = strings.ToLower(st.Phase), st.APIID, st.ConfigHash, st.LastSyncedAt, st.Message
	s.K8sAppName = e.Spec.K8sAppName
}

func (e *Endpoint) StatusConditions() *[]metav1.Condition { return &e.Status.Conditions }
func (e *Endpoint) MarkObserved()                         { e.Status.ObservedGeneration = e.Generation }

func (x *K8sApp) SyncState() SyncState                     { return x.Status.Sync() }
func (x *K8sApp) SetSyncState(st SyncState)                { x.Status.SetSync(st) }
func (x *K8sApp) StatusConditions() *[]metav1.Condition    { return &x.Status.Conditions }
func (x *K8sApp) MarkObserved()                            { x.Status.ObservedGeneration = x.Generation }
func (x *Host) SyncState() SyncState                       { return x.Status.Sync() }
func (x *Host) SetSyncState(st SyncState)                  { x.Status.SetSync(st) }
func (x *Host) StatusConditions() *[]metav1.Condition      { return &x.Status.Conditions }
func (x *Host) MarkObserved()                              { x.Status.ObservedGeneration = x.Generation }
func (x *K8sVolume) SyncState() SyncState                  { return x.Status.Sync() }
func (x *K8sVolume) SetSyncState(st SyncState)             { x.Status.SetSync(st) }
func (x *K8sVolume) StatusConditions() *[]metav1.Condition { return &x.Status.Conditions }
func (x *K8sVolume) MarkObserved()                         { x.Status.ObservedGeneration = x.Generation }
func (x *Backup) SyncState() SyncState                     { return x.Status.Sync() }
func (x *Backup) SetSyncState(st SyncState)                { x.Status.SetSync(st) }
func (x *Backup) StatusConditions() *[]metav1.Condition    { return &x.Status.Conditions }
func (x *Backup) MarkObserved()                            { x.Status.ObservedGeneration = x.Generation }
func (x *BackupSchedule) SyncState() SyncState             { return x.Status.Sync() }
func (x *BackupSchedule) SetSyncState(st SyncState)        { x.Status.SetSync(st) }
func (x *BackupSchedule) StatusConditions() *[]metav1.Condition {
	return &x.Status.Conditions
}
func (x *BackupSchedule) MarkObserved()                      { x.Status.ObservedGeneration = x.Generation }
func (x *Certificate) SyncState() SyncState                  { return x.Status.Sync() }
func (x *Certificate) SetSyncState(st SyncState)             { x.Status.SetSync(st) }
func (x *Certificate) StatusConditions() *[]metav1.Condition { return &x.Status.Conditions }
func (x *Certificate) MarkObserved()                         { x.Status.ObservedGeneration = x.Generation }

func (x *S3Bucket) StatusConditions() *[]metav1.Condition   { return &x.Status.Conditions }
func (x *S3Bucket) MarkObserved()                           { x.Status.ObservedGeneration = x.Generation }
func (x *K8sCluster) StatusConditions() *[]metav1.Condition { return &x.Status.Conditions }
func (x *K8sCluster) MarkObserved()                         { x.Status.ObservedGeneration = x.Generation }
func (x *OperatorConfig) StatusConditions() *[]metav1.Condition {
	return &x.Status.Conditions
}

// MarkObserved: for the OperatorConfig, observedGeneration is the generation
// every controller now reads (set as soon as it is published).
func (x *OperatorConfig) MarkObserved() { x.Status.ObservedGeneration = x.Generation }
