package inventory

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/names"
)

// +kubebuilder:rbac:groups=velero.io,resources=backups;schedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=postgresql.cnpg.io,resources=backups;scheduledbackups,verbs=get;list;watch

// Providers as the API's enum spells them.
const (
	ProviderVelero = "velero"
	ProviderCNPG   = "cloudnativepg"
)

// CRDs of the gated backup kinds.
const (
	CRDVeleroBackup   = "backups.velero.io"
	CRDVeleroSchedule = "schedules.velero.io"
	CRDCNPGBackup     = "backups.postgresql.cnpg.io"
	CRDCNPGScheduled  = "scheduledbackups.postgresql.cnpg.io"
)

// CNPG kinds (read unstructured: the CNPG Go module is not used).
var (
	CNPGBackupGVK    = schema.GroupVersionKind{Group: "postgresql.cnpg.io", Version: "v1", Kind: "Backup"}
	CNPGScheduledGVK = schema.GroupVersionKind{Group: "postgresql.cnpg.io", Version: "v1", Kind: "ScheduledBackup"}
)

// VeleroBackupStatus normalises every Velero backup phase to the API's enum.
func VeleroBackupStatus(p velerov1.BackupPhase) string {
	switch p {
	case "", velerov1.BackupPhaseNew, velerov1.BackupPhaseQueued, velerov1.BackupPhaseReadyToStart:
		return "pending"
	case velerov1.BackupPhaseInProgress, velerov1.BackupPhaseWaitingForPluginOperations,
		velerov1.BackupPhaseWaitingForPluginOperationsPartiallyFailed, velerov1.BackupPhaseFinalizing,
		velerov1.BackupPhaseFinalizingPartiallyFailed:
		return "running"
	case velerov1.BackupPhaseCompleted:
		return "completed"
	case velerov1.BackupPhasePartiallyFailed:
		return "partial"
	case velerov1.BackupPhaseFailed, velerov1.BackupPhaseFailedValidation:
		return "failed"
	case velerov1.BackupPhaseDeleting:
		return "expired"
	}
	return "unknown"
}

// backupKind: a Velero backup of the whole cluster (no namespace restriction, or
// "*") is "cluster", one restricted to namespaces is "app".
func backupKind(included []string) (string, []string) {
	if len(included) == 0 || (len(included) == 1 && included[0] == "*") {
		return "cluster", nil
	}
	return "app", included
}

// allIgnored: an app backup whose every namespace backup_discovery ignores.
func allIgnored(snap *liveconfig.Snapshot, namespaces []string) bool {
	if len(namespaces) == 0 {
		return false
	}
	f := snap.BackupNamespaces()
	for _, ns := range namespaces {
		if f.Allows(ns) {
			return false
		}
	}
	return true
}

func veleroNamespace(snap *liveconfig.Snapshot) string {
	if ns := snap.Spec.BackupDiscovery.VeleroNamespace; ns != "" {
		return ns
	}
	return "velero"
}

func timePtr(t *metav1.Time) *metav1.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &u
}

// VeleroBackups maps Velero Backups to Backups named velero-<name> in the Velero namespace.
var VeleroBackups = &Mirror[*velerov1.Backup]{Name: "velero-backup", Source: velerov1.SchemeGroupVersion.WithKind("Backup"),
	CRD: CRDVeleroBackup, Target: &v1.Backup{}, Enabled: backupDiscovery, StaleMinutes: backupStale, TargetKey: veleroKey,
	Declare: declareVeleroBackup}

func backupDiscovery(s *liveconfig.Snapshot) bool {
	return liveconfig.Enabled(s.Spec.BackupDiscovery.Enabled)
}

func backupStale(s *liveconfig.Snapshot) int32 { return s.Spec.BackupDiscovery.StaleCleanupMinutes }

func veleroKey(src types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Namespace: src.Namespace, Name: names.DNS("velero", src.Name)}
}

// declareVeleroBackup maps the seed's Velero backup table.
func declareVeleroBackup(b *velerov1.Backup, snap *liveconfig.Snapshot, _ time.Time) (*Declared, bool, error) {
	if b.Namespace != veleroNamespace(snap) {
		return nil, false, nil
	}
	spec := VeleroBackupSpec(b)
	if allIgnored(snap, spec.IncludedNamespaces) {
		return nil, false, nil
	}
	return &Declared{Labels: backupLabels(ProviderVelero, b.Name), Spec: spec}, true, nil
}

// VeleroBackupSpec is the mapping.
func VeleroBackupSpec(b *velerov1.Backup) v1.BackupSpec {
	kind, included := backupKind(b.Spec.IncludedNamespaces)
	s := v1.BackupSpec{Name: b.Name, Provider: ProviderVelero, Kind: kind, SourceNamespace: b.Namespace,
		Status: VeleroBackupStatus(b.Status.Phase), StartedAt: timePtr(b.Status.StartTimestamp),
		CompletedAt: timePtr(b.Status.CompletionTimestamp), Expiration: timePtr(b.Status.Expiration),
		ScheduleName: b.Labels[velerov1.ScheduleNameLabel], IncludedNamespaces: included,
		Source: &v1.SourceReference{APIVersion: "velero.io/v1", Kind: "Backup", Name: b.Name, Namespace: b.Namespace, UID: string(b.UID)}}
	if b.Spec.TTL.Duration > 0 {
		s.RetentionPolicy = b.Spec.TTL.Duration.String()
	}
	if p := b.Status.Progress; p != nil {
		s.ItemsBackedUp = int64(p.ItemsBackedUp)
	}
	return s
}

func backupLabels(provider, source string) map[string]string {
	l := map[string]string{v1.LabelBackupProvider: provider}
	for k, v := range labelIfValid(v1.LabelBackupSource, source) {
		l[k] = v
	}
	return l
}

// VeleroSchedules maps Velero Schedules to BackupSchedules named velero-<name> in the Velero namespace.
var VeleroSchedules = &Mirror[*velerov1.Schedule]{Name: "velero-schedule", Source: velerov1.SchemeGroupVersion.WithKind("Schedule"),
	CRD: CRDVeleroSchedule, Target: &v1.BackupSchedule{}, Enabled: backupDiscovery, StaleMinutes: backupStale, TargetKey: veleroKey,
	Declare: declareVeleroSchedule}

// declareVeleroSchedule maps the seed's Velero schedule table.
func declareVeleroSchedule(s *velerov1.Schedule, snap *liveconfig.Snapshot, _ time.Time) (*Declared, bool, error) {
	if s.Namespace != veleroNamespace(snap) {
		return nil, false, nil
	}
	spec := VeleroScheduleSpec(s)
	if _, included := backupKind(s.Spec.Template.IncludedNamespaces); allIgnored(snap, included) {
		return nil, false, nil
	}
	return &Declared{Labels: backupLabels(ProviderVelero, s.Name), Spec: spec}, true, nil
}

// VeleroScheduleSpec is the mapping. Velero's schedule status has no last backup
// name: Velero names a scheduled backup "<schedule>-<run time as
// 20060102150405>", and status.lastBackup is that run time.
func VeleroScheduleSpec(s *velerov1.Schedule) v1.BackupScheduleSpec {
	kind, _ := backupKind(s.Spec.Template.IncludedNamespaces)
	out := v1.BackupScheduleSpec{Name: s.Name, Provider: ProviderVelero, Kind: kind, SourceNamespace: s.Namespace,
		ScheduleCron: s.Spec.Schedule, Paused: s.Spec.Paused, LastBackupAt: timePtr(s.Status.LastBackup),
		Source: &v1.SourceReference{APIVersion: "velero.io/v1", Kind: "Schedule", Name: s.Name, Namespace: s.Namespace, UID: string(s.UID)}}
	switch {
	case s.Spec.Paused:
		out.Status = "paused"
	case s.Status.Phase == velerov1.SchedulePhaseFailedValidation:
		out.Status = "failed"
	case s.Status.Phase == velerov1.SchedulePhaseEnabled:
		out.Status = "active"
	default:
		out.Status = "unknown"
	}
	if ttl := s.Spec.Template.TTL.Duration; ttl > 0 {
		out.RetentionPolicy = ttl.String()
	}
	if out.LastBackupAt != nil {
		out.LastBackupName = s.Name + "-" + out.LastBackupAt.UTC().Format("20060102150405")
	}
	return out
}

// CNPGBackupStatus normalises CloudNativePG's backup phases.
func CNPGBackupStatus(phase string) string {
	switch phase {
	case "", "pending":
		return "pending"
	case "started", "running", "finalizing":
		return "running"
	case "completed":
		return "completed"
	case "failed", "walArchivingFailing":
		return "failed"
	}
	return "unknown"
}

func unstructuredTime(u *unstructured.Unstructured, fields ...string) (*metav1.Time, error) {
	s, found, err := unstructured.NestedString(u.Object, fields...)
	if err != nil || !found || s == "" {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", strings.Join(fields, "."), err)
	}
	mt := metav1.NewTime(t.UTC())
	return &mt, nil
}

// CNPGBackups maps CloudNativePG Backups to Backups (kind database) named cnpg-<name>.
var CNPGBackups = &Mirror[*unstructured.Unstructured]{Name: "cnpg-backup", Source: CNPGBackupGVK, CRD: CRDCNPGBackup,
	Target: &v1.Backup{}, Enabled: cnpgEnabled, StaleMinutes: backupStale, TargetKey: cnpgKey, Declare: declareCNPG(CNPGBackupSpec)}

func cnpgEnabled(s *liveconfig.Snapshot) bool {
	return liveconfig.Enabled(s.Spec.BackupDiscovery.Enabled) && liveconfig.Enabled(s.Spec.BackupDiscovery.CNPGEnabled)
}

func cnpgKey(src types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Namespace: src.Namespace, Name: names.DNS("cnpg", src.Name)}
}

// declareCNPG declares a CNPG object in a namespace backup discovery watches
// with its mapping.
func declareCNPG[T any](spec func(*unstructured.Unstructured) (T, error)) func(*unstructured.Unstructured, *liveconfig.Snapshot, time.Time) (*Declared, bool, error) {
	return func(u *unstructured.Unstructured, snap *liveconfig.Snapshot, _ time.Time) (*Declared, bool, error) {
		if !snap.BackupNamespaces().Allows(u.GetNamespace()) {
			return nil, false, nil
		}
		s, err := spec(u)
		if err != nil {
			return nil, false, err
		}
		return &Declared{Labels: backupLabels(ProviderCNPG, u.GetName()), Spec: s}, true, nil
	}
}

// CNPGBackupSpec is the mapping (docs/inventory.md).
func CNPGBackupSpec(u *unstructured.Unstructured) (v1.BackupSpec, error) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	s := v1.BackupSpec{Name: u.GetName(), Provider: ProviderCNPG, Kind: "database", SourceNamespace: u.GetNamespace(),
		Status: CNPGBackupStatus(phase), ScheduleName: u.GetLabels()["cnpg.io/scheduled-backup"],
		Source: &v1.SourceReference{APIVersion: CNPGBackupGVK.GroupVersion().String(), Kind: "Backup", Name: u.GetName(),
			Namespace: u.GetNamespace(), UID: string(u.GetUID())}}
	var err error
	if s.StartedAt, err = unstructuredTime(u, "status", "startedAt"); err != nil {
		return s, err
	}
	if s.CompletedAt, err = unstructuredTime(u, "status", "stoppedAt"); err != nil {
		return s, err
	}
	return s, nil
}

// CNPGScheduledBackups maps CloudNativePG ScheduledBackups to BackupSchedules named cnpg-<name>.
var CNPGScheduledBackups = &Mirror[*unstructured.Unstructured]{Name: "cnpg-scheduledbackup", Source: CNPGScheduledGVK,
	CRD: CRDCNPGScheduled, Target: &v1.BackupSchedule{}, Enabled: cnpgEnabled, StaleMinutes: backupStale, TargetKey: cnpgKey,
	Declare: declareCNPG(CNPGScheduleSpec)}

// CNPGScheduleSpec is the mapping; CNPG's six-field cron (seconds first) becomes
// the API's five fields (CNPGCron). CNPG names a scheduled backup
// "<scheduledbackup>-<run time as 20060102150405>".
func CNPGScheduleSpec(u *unstructured.Unstructured) (v1.BackupScheduleSpec, error) {
	cron, _, _ := unstructured.NestedString(u.Object, "spec", "schedule")
	suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
	s := v1.BackupScheduleSpec{Name: u.GetName(), Provider: ProviderCNPG, Kind: "database", SourceNamespace: u.GetNamespace(),
		Paused: suspend, Status: "active",
		Source: &v1.SourceReference{APIVersion: CNPGScheduledGVK.GroupVersion().String(), Kind: "ScheduledBackup", Name: u.GetName(),
			Namespace: u.GetNamespace(), UID: string(u.GetUID())}}
	five, err := CNPGCron(cron)
	if err != nil {
		return s, err
	}
	s.ScheduleCron = five
	if suspend {
		s.Status = "paused"
	}
	if s.LastBackupAt, err = unstructuredTime(u, "status", "lastScheduleTime"); err != nil {
		return s, err
	}
	if s.LastBackupAt != nil {
		s.LastBackupName = u.GetName() + "-" + s.LastBackupAt.UTC().Format("20060102150405")
	}
	return s, nil
}

// CNPGCron converts CNPG's schedule to five fields: a six-field expression drops
// its leading seconds field (the API schedules by the minute); a five-field one or
// a descriptor (@daily, @every 1h) stays as it is.
func CNPGCron(expr string) (string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return "", fmt.Errorf("spec.schedule is empty")
	}
	if strings.HasPrefix(expr, "@") {
		return expr, nil
	}
	f := strings.Fields(expr)
	switch len(f) {
	case 5:
		return strings.Join(f, " "), nil
	case 6:
		return strings.Join(f[1:], " "), nil
	}
	return "", fmt.Errorf("spec.schedule %q has %d fields, expected 6 (CNPG, with seconds) or 5", expr, len(f))
}
