package inventory

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

func node(cpu, mem string, addrs ...corev1.NodeAddress) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", UID: "u1"}, Spec: corev1.NodeSpec{ProviderID: "hcloud://123"}}
	n.Status.Capacity = corev1.ResourceList{}
	if cpu != "" {
		n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		n.Status.Capacity[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	n.Status.Addresses = addrs
	n.Status.NodeInfo.Architecture = "arm64"
	return n
}

// TestHostSpecOf is the seed's Host field table, with every quantity form.
func TestHostSpecOf(t *testing.T) {
	ext := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}
	ext6 := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "2001:db8::7"}
	in := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}
	host := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-1"}
	cases := []struct {
		name      string
		n         *corev1.Node
		cores, mb int64
		ip        string
	}{
		{"binary Ki", node("4", "16393216Ki", ext, in), 4, 16009, "203.0.113.7"},
		{"Gi", node("8", "32Gi", in), 8, 32768, "10.0.0.7"},
		{"Mi", node("2", "2048Mi", ext6, in), 2, 2048, "10.0.0.7"},
		{"plain bytes", node("1", "17179869184"), 1, 16384, ""},
		{"decimal G", node("16", "16G", host, in), 16, 15258, "10.0.0.7"},
		{"decimal M", node("1", "512M"), 1, 488, ""},
		{"Ti", node("96", "1Ti"), 96, 1048576, ""},
		{"millicores round up", node("3500m", "1Gi"), 4, 1024, ""},
		{"exponent", node("2", "1e9"), 2, 953, ""},
		{"no capacity", node("", ""), 0, 0, ""},
	}
	for _, c := range cases {
		s := HostSpecOf(c.n)
		if s.ResourceCPUCores != c.cores || s.ResourceMemory != c.mb || s.DefaultIPv4 != c.ip {
			t.Errorf("%s: cores %d mb %d ip %q, want %d %d %q", c.name, s.ResourceCPUCores, s.ResourceMemory, s.DefaultIPv4, c.cores, c.mb, c.ip)
		}
		if s.Name != "worker-1" || s.Hostname != "worker-1" || s.ResourceCPUArchitecture != "arm64" || s.ProviderID != "hcloud://123" ||
			s.Source.Kind != "Node" || s.Source.UID != "u1" {
			t.Errorf("%s: %+v", c.name, s)
		}
	}
}

func TestHostLabelSelector(t *testing.T) {
	var said []string
	m := Hosts(func(msg string) { said = append(said, msg) })
	snap := &liveconfig.Snapshot{}
	n := node("1", "1Gi")
	n.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
	for sel, want := range map[string]bool{"": true, "node-role.kubernetes.io/worker": true, "!node-role.kubernetes.io/worker": false,
		"pool=gpu": false, "pool in (": false} {
		snap.Spec.NodeDiscovery.LabelSelector = sel
		if _, ok, err := m.Declare(n, snap, time.Now()); ok != want || err != nil {
			t.Errorf("selector %q: selected %v (%v), want %v", sel, ok, err, want)
		}
	}
	if _, _, _ = m.Declare(n, snap, time.Now()); len(said) != 1 || !strings.Contains(said[0], "invalid") {
		t.Errorf("an invalid selector is said once: %v", said)
	}
}

func TestVolumeSpecOf(t *testing.T) {
	fs := corev1.PersistentVolumeBlock
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", UID: "uid-1"},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany}, StorageClassName: "hcloud-volumes",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, VolumeMode: &fs,
			ClaimRef:               &corev1.ObjectReference{Namespace: "shop", Name: "data-postgres-0"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.hetzner.cloud", VolumeHandle: "4711"}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	s := VolumeSpecOf(pv)
	want := v1.K8sVolumeSpec{Name: "pvc-1", ProviderObjectID: "uid-1", CSIDriver: "csi.hetzner.cloud", CloudProviderVolumeID: "4711",
		StorageClass: "hcloud-volumes", CapacityBytes: 10737418240, CapacityString: "10Gi", Phase: "Bound",
		AccessModes: []string{"ReadWriteOnce", "ReadOnlyMany"}, VolumeMode: "Block", ReclaimPolicy: "Retain",
		PVCName: "data-postgres-0", PVCNamespace: "shop"}
	s.Source = nil
	if !equalJSON(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	bare := VolumeSpecOf(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local"}})
	if bare.Phase != "Unknown" || bare.VolumeMode != "Filesystem" || bare.CSIDriver != "" {
		t.Errorf("defaults: %+v", bare)
	}
}

// TestVeleroBackupStatus covers every Velero phase.
func TestVeleroBackupStatus(t *testing.T) {
	for phase, want := range map[velerov1.BackupPhase]string{
		"": "pending", "New": "pending", "Queued": "pending", "ReadyToStart": "pending",
		"InProgress": "running", "WaitingForPluginOperations": "running", "WaitingForPluginOperationsPartiallyFailed": "running",
		"Finalizing": "running", "FinalizingPartiallyFailed": "running",
		"Completed": "completed", "PartiallyFailed": "partial", "Failed": "failed", "FailedValidation": "failed",
		"Deleting": "expired", "SomethingNew": "unknown",
	} {
		if got := VeleroBackupStatus(phase); got != want {
			t.Errorf("%q → %q, want %q", phase, got, want)
		}
	}
}

func TestVeleroBackupSpec(t *testing.T) {
	start, done := metav1.Date(2025, 12, 20, 2, 0, 0, 0, time.UTC), metav1.Date(2025, 12, 20, 2, 5, 30, 0, time.UTC)
	b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "daily-20251220020000", Namespace: "velero", UID: "b1",
		Labels: map[string]string{velerov1.ScheduleNameLabel: "daily"}},
		Spec: velerov1.BackupSpec{TTL: metav1.Duration{Duration: 720 * time.Hour}, IncludedNamespaces: []string{"shop", "crm"}},
		Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, StartTimestamp: &start, CompletionTimestamp: &done,
			Progress: &velerov1.BackupProgress{ItemsBackedUp: 412, TotalItems: 412}}}
	s := VeleroBackupSpec(b)
	if s.Name != b.Name || s.Provider != "velero" || s.Kind != "app" || s.SourceNamespace != "velero" || s.Status != "completed" ||
		s.RetentionPolicy != "720h0m0s" || !s.StartedAt.Equal(&start) || !s.CompletedAt.Equal(&done) || s.ItemsBackedUp != 412 ||
		s.ScheduleName != "daily" || strings.Join(s.IncludedNamespaces, ",") != "shop,crm" {
		t.Errorf("%+v", s)
	}
	for _, inc := range [][]string{nil, {"*"}} {
		b.Spec.IncludedNamespaces = inc
		if s := VeleroBackupSpec(b); s.Kind != "cluster" || s.IncludedNamespaces != nil {
			t.Errorf("%v: kind %s", inc, s.Kind)
		}
	}
}

func TestVeleroSelection(t *testing.T) {
	snap := &liveconfig.Snapshot{}
	snap.Spec.BackupDiscovery.IgnoreNamespaces = []string{"scratch"}
	b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "velero"}}
	for _, c := range []struct {
		ns, veleroNS string
		included     []string
		want         bool
	}{
		{"velero", "", nil, true},
		{"backup-system", "", nil, false},
		{"backup-system", "backup-system", nil, true},
		{"velero", "", []string{"scratch"}, false},
		{"velero", "", []string{"scratch", "shop"}, true},
	} {
		b.Namespace, b.Spec.IncludedNamespaces = c.ns, c.included
		snap.Spec.BackupDiscovery.VeleroNamespace = c.veleroNS
		if _, ok, _ := VeleroBackups.Declare(b, snap, time.Now()); ok != c.want {
			t.Errorf("%+v: selected %v", c, ok)
		}
	}
}

func TestVeleroScheduleSpec(t *testing.T) {
	last := metav1.Date(2025, 12, 20, 2, 0, 0, 0, time.UTC)
	s := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "daily", Namespace: "velero"},
		Spec:   velerov1.ScheduleSpec{Schedule: "0 2 * * *", Template: velerov1.BackupSpec{TTL: metav1.Duration{Duration: 168 * time.Hour}}},
		Status: velerov1.ScheduleStatus{Phase: velerov1.SchedulePhaseEnabled, LastBackup: &last}}
	got := VeleroScheduleSpec(s)
	if got.ScheduleCron != "0 2 * * *" || got.Paused || got.Status != "active" || got.Kind != "cluster" || got.RetentionPolicy != "168h0m0s" ||
		!got.LastBackupAt.Equal(&last) || got.LastBackupName != "daily-20251220020000" || got.Provider != "velero" {
		t.Errorf("%+v", got)
	}
	s.Spec.Paused = true
	if got := VeleroScheduleSpec(s); got.Status != "paused" || !got.Paused {
		t.Errorf("paused: %+v", got)
	}
	s.Spec.Paused, s.Status.Phase, s.Status.LastBackup = false, velerov1.SchedulePhaseFailedValidation, nil
	if got := VeleroScheduleSpec(s); got.Status != "failed" || got.LastBackupName != "" {
		t.Errorf("failed: %+v", got)
	}
	s.Status.Phase = velerov1.SchedulePhaseNew
	if got := VeleroScheduleSpec(s); got.Status != "unknown" {
		t.Errorf("new: %+v", got)
	}
}

// TestCNPGBackupStatus covers every CloudNativePG phase.
func TestCNPGBackupStatus(t *testing.T) {
	for phase, want := range map[string]string{"": "pending", "pending": "pending", "started": "running", "running": "running",
		"finalizing": "running", "completed": "completed", "failed": "failed", "walArchivingFailing": "failed", "other": "unknown"} {
		if got := CNPGBackupStatus(phase); got != want {
			t.Errorf("%q → %q, want %q", phase, got, want)
		}
	}
}

func TestCNPGCron(t *testing.T) {
	for in, want := range map[string]string{"0 0 2 * * *": "0 2 * * *", "30 15 3 * * 1-5": "15 3 * * 1-5", "0 2 * * *": "0 2 * * *",
		"@daily": "@daily", "@every 1h": "@every 1h", "  0  0 2 * * *  ": "0 2 * * *"} {
		if got, err := CNPGCron(in); err != nil || got != want {
			t.Errorf("%q → %q (%v), want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "* * *", "0 0 0 2 * * * *"} {
		if _, err := CNPGCron(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCNPGSpecs(t *testing.T) {
	b := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "pg-20251220", "namespace": "shop", "uid": "c1",
		"labels": map[string]any{"cnpg.io/scheduled-backup": "pg-nightly"}},
		"spec":   map[string]any{"cluster": map[string]any{"name": "pg"}},
		"status": map[string]any{"phase": "completed", "startedAt": "2025-12-20T02:00:00Z", "stoppedAt": "2025-12-20T02:01:00Z"}}}
	b.SetGroupVersionKind(CNPGBackupGVK)
	s, err := CNPGBackupSpec(b)
	if err != nil || s.Provider != "cloudnativepg" || s.Kind != "database" || s.Status != "completed" || s.SourceNamespace != "shop" ||
		s.StartedAt == nil || s.CompletedAt.Time.Sub(s.StartedAt.Time) != time.Minute || s.ScheduleName != "pg-nightly" {
		t.Errorf("%+v %v", s, err)
	}
	_ = unstructured.SetNestedField(b.Object, "yesterday", "status", "startedAt")
	if _, err := CNPGBackupSpec(b); err == nil || !strings.Contains(err.Error(), "status.startedAt") {
		t.Errorf("a bad time: %v", err)
	}
	sb := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "pg-nightly", "namespace": "shop"},
		"spec":   map[string]any{"schedule": "0 0 2 * * *", "suspend": true, "cluster": map[string]any{"name": "pg"}},
		"status": map[string]any{"lastScheduleTime": "2025-12-20T02:00:00Z"}}}
	ss, err := CNPGScheduleSpec(sb)
	if err != nil || ss.ScheduleCron != "0 2 * * *" || !ss.Paused || ss.Status != "paused" || ss.LastBackupName != "pg-nightly-20251220020000" ||
		ss.Kind != "database" {
		t.Errorf("%+v %v", ss, err)
	}
	_ = unstructured.SetNestedField(sb.Object, "every night", "spec", "schedule")
	if _, err := CNPGScheduleSpec(sb); err == nil {
		t.Error("a bad schedule accepted")
	}
}

func cert(ready cmmeta.ConditionStatus, reason string, notAfter *time.Time) *certmanagerv1.Certificate {
	c := &certmanagerv1.Certificate{ObjectMeta: metav1.ObjectMeta{Name: "api-example-com-tls", Namespace: "production", UID: "abc"},
		Spec: certmanagerv1.CertificateSpec{SecretName: "api-example-com-tls", DNSNames: []string{"api.example.com"},
			IssuerRef: cmmeta.IssuerReference{Name: "letsencrypt-production", Kind: "ClusterIssuer", Group: "cert-manager.io"}}}
	if ready != "" {
		c.Status.Conditions = []certmanagerv1.CertificateCondition{{Type: certmanagerv1.CertificateConditionReady, Status: ready, Reason: reason}}
	}
	if notAfter != nil {
		na := metav1.NewTime(*notAfter)
		c.Status.NotAfter = &na
	}
	return c
}

// TestCertificateStatusAt is the seed's status table with an injected clock.
func TestCertificateStatusAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	cases := []struct {
		name  string
		c     *certmanagerv1.Certificate
		want  string
		ready bool
		next  time.Duration
	}{
		{"ready", cert(cmmeta.ConditionTrue, "Ready", at(90*24*time.Hour)), "ready", true, 60 * 24 * time.Hour},
		{"ready, no NotAfter", cert(cmmeta.ConditionTrue, "Ready", nil), "ready", true, 0},
		{"expiring soon", cert(cmmeta.ConditionTrue, "Ready", at(10*24*time.Hour)), "expiring_soon", true, 10 * 24 * time.Hour},
		{"exactly 30 days", cert(cmmeta.ConditionTrue, "Ready", at(ExpiringSoon)), "expiring_soon", true, ExpiringSoon},
		{"expired", cert(cmmeta.ConditionTrue, "Ready", at(-time.Hour)), "expired", true, 0},
		{"issuing", cert(cmmeta.ConditionFalse, "Issuing", nil), "pending", false, 0},
		{"failed", cert(cmmeta.ConditionFalse, "Failed", nil), "failed", false, 0},
		{"expired reason", cert(cmmeta.ConditionFalse, "Expired", at(-time.Hour)), "expired", false, 0},
		{"other reason", cert(cmmeta.ConditionFalse, "DoesNotExist", nil), "pending", false, 0},
		{"no condition", cert("", "", nil), "pending", false, 0},
	}
	for _, c := range cases {
		got, ready, next := CertificateStatusAt(c.c, now)
		if got != c.want || ready != c.ready || next != c.next {
			t.Errorf("%s: %s %v %v, want %s %v %v", c.name, got, ready, next, c.want, c.ready, c.next)
		}
	}
	// The issuing condition failing also means failed.
	f := cert(cmmeta.ConditionFalse, "Issuing", nil)
	f.Status.Conditions = append(f.Status.Conditions, certmanagerv1.CertificateCondition{Type: certmanagerv1.CertificateConditionIssuing,
		Status: cmmeta.ConditionFalse, Reason: "Failed"})
	if got, _, _ := CertificateStatusAt(f, now); got != "failed" {
		t.Errorf("issuing failed: %s", got)
	}
}

// TestCertificateSpecAt is the seed's example.
func TestCertificateSpecAt(t *testing.T) {
	now := time.Date(2024, 1, 15, 0, 0, 0, 0, time.UTC)
	na := time.Date(2024, 4, 1, 0, 0, 0, 0, time.UTC)
	c := cert(cmmeta.ConditionTrue, "Ready", &na)
	nb, rt := metav1.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), metav1.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	rev := 1
	c.Status.NotBefore, c.Status.RenewalTime, c.Status.Revision = &nb, &rt, &rev
	s, next := CertificateSpecAt(c, now)
	if s.Name != "api-example-com-tls" || s.DisplayName != "api.example.com-tls" || s.Namespace != "production" ||
		s.SecretName != "api-example-com-tls" || s.IssuerName != "letsencrypt-production" || s.IssuerKind != "clusterissuer" ||
		s.IssuerGroup != "cert-manager.io" || s.CertificateStatus != "ready" || !s.IsReady || !s.NotBefore.Equal(&nb) ||
		!s.RenewalTime.Equal(&rt) || s.SourceCertManager.Revision != 1 || s.SourceCertManager.UID != "abc" ||
		next != na.Add(-ExpiringSoon).Sub(now) {
		t.Errorf("%+v next %v", s, next)
	}
	if k := Certificates.TargetKey(keyOf("production", "api-example-com-tls")); k.Name != "certmanager-production-api-example-com-tls" {
		t.Errorf("CR name %s", k.Name)
	}
	c.Spec.IssuerRef.Kind = "AWSPCAClusterIssuer"
	if s, _ := CertificateSpecAt(c, now); s.IssuerKind != "" {
		t.Errorf("external issuer kind kept: %s", s.IssuerKind)
	}
	c.Spec.IssuerRef.Kind = ""
	if s, _ := CertificateSpecAt(c, now); s.IssuerKind != "issuer" {
		t.Errorf("default issuer kind: %s", s.IssuerKind)
	}
}

func TestIssuerSelected(t *testing.T) {
	cases := []struct {
		f      v1.IssuerFilter
		issuer string
		want   bool
	}{
		{v1.IssuerFilter{}, "any", true},
		{v1.IssuerFilter{ExcludeIssuers: []string{"selfsigned-issuer"}}, "selfsigned-issuer", false},
		{v1.IssuerFilter{ExcludeIssuers: []string{"selfsigned-issuer"}}, "letsencrypt", true},
		{v1.IssuerFilter{IncludeIssuers: []string{"letsencrypt"}}, "letsencrypt", true},
		{v1.IssuerFilter{IncludeIssuers: []string{"letsencrypt"}}, "other", false},
		{v1.IssuerFilter{IncludeIssuers: []string{"letsencrypt"}, ExcludeIssuers: []string{"letsencrypt"}}, "letsencrypt", false},
	}
	for _, c := range cases {
		if got := IssuerSelected(c.f, c.issuer); got != c.want {
			t.Errorf("%+v %s: %v", c.f, c.issuer, got)
		}
	}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
