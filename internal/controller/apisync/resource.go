package apisync

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// resource is the adapter of one API resource: the same CRUD for every kind. A
// kind gives its payload and its lookup by natural key; the Endpoint and K8sApp
// adapters embed it and override only what differs.
type resource[O Object, D, L, R any] struct {
	api     func(*polycrate.Client) polycrate.Resource[D, L, R]
	meta    func(*D) *polycrate.Meta
	rowID   func(*L) string
	payload func(O, string) (R, error) // the CR and the local cluster's id
	// query filters the list by the natural key; match narrows its rows where
	// the API has no filter (nil: every row matches). find replaces both.
	query func(R) url.Values
	match func(*L, R) bool
	find  func(ctx context.Context, c *polycrate.Client, req R) (string, error)
	// clusterFilter: the list accepts k8s_cluster (hosts and certificates do not).
	clusterFilter bool
}

// Lookup: nothing to read.
func (a resource[O, D, L, R]) Lookup(context.Context, O) (R, error) {
	var none R
	return none, nil
}

// Payload needs the local cluster.
func (a resource[O, D, L, R]) Payload(o O, snap *liveconfig.Snapshot, _ R) (R, error) {
	cluster, err := snap.LocalCluster()
	if err != nil {
		var none R
		return none, err
	}
	return a.payload(o, cluster)
}

// Find lists by the natural key; more than one match is an error (never adopt
// one of several at random).
func (a resource[O, D, L, R]) Find(ctx context.Context, c *polycrate.Client, _ O, req R) (string, error) {
	if a.find != nil {
		return a.find(ctx, c, req)
	}
	rows, err := a.api(c).List(ctx, a.query(req))
	if err != nil {
		return "", err
	}
	var ids []string
	for i := range rows {
		if a.match == nil || a.match(&rows[i], req) {
			ids = append(ids, a.rowID(&rows[i]))
		}
	}
	if len(ids) > 1 {
		return "", fmt.Errorf("%d API objects match one natural key (%s); expected at most one", len(ids), strings.Join(ids, ", "))
	}
	return strings.Join(ids, ""), nil
}

func (a resource[O, D, L, R]) Create(ctx context.Context, c *polycrate.Client, req R) (string, error) {
	d, err := a.api(c).Create(ctx, req)
	if err != nil {
		return "", err
	}
	return a.meta(d).ID, nil
}

func (a resource[O, D, L, R]) Update(ctx context.Context, c *polycrate.Client, id string, req R) error {
	_, err := a.api(c).Update(ctx, id, req)
	return err
}

func (a resource[O, D, L, R]) Exists(ctx context.Context, c *polycrate.Client, id string) (bool, error) {
	d, err := a.api(c).Get(ctx, id)
	if polycrate.IsNotFound(err) {
		return false, nil
	}
	return err == nil && !a.meta(d).IsDeleted, err
}

func (a resource[O, D, L, R]) Delete(ctx context.Context, c *polycrate.Client, id string) error {
	return a.api(c).Delete(ctx, id)
}

func (a resource[O, D, L, R]) LiveIDs(ctx context.Context, c *polycrate.Client, snap *liveconfig.Snapshot) (map[string]bool, error) {
	q := polycrate.Query()
	if a.clusterFilter && snap.LocalClusterID != "" {
		q.Set("k8s_cluster", snap.LocalClusterID)
	}
	rows, err := a.api(c).List(ctx, q)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(rows))
	for i := range rows {
		ids[a.rowID(&rows[i])] = true
	}
	return ids, nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func int64Ptr(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func sourceLabels(o client.Object) map[string]string {
	l := map[string]string{"polycrate_source_name": o.GetName()}
	if o.GetNamespace() != "" {
		l["polycrate_source_namespace"] = o.GetNamespace()
	}
	if o.GetLabels()[v1.LabelDiscovered] == v1.LabelValueTrue {
		l[v1.LabelDiscovered] = v1.LabelValueTrue
	}
	return l
}

func sourceMetadata(ref *v1.SourceReference) map[string]any {
	if ref == nil {
		return map[string]any{}
	}
	m := map[string]any{"source_kind": ref.Kind, "source_name": ref.Name}
	if ref.APIVersion != "" {
		m["source_api_version"] = ref.APIVersion
	}
	if ref.Namespace != "" {
		m["source_namespace"] = ref.Namespace
	}
	if ref.UID != "" {
		m["source_uid"] = ref.UID
	}
	return m
}

// hostAdapter syncs Hosts to /api/v1/hosts/. The Node's providerID travels as
// provider_reference (provider_id is read-only on hosts).
func hostAdapter() Adapter[*v1.Host, polycrate.HostRequest] {
	return resource[*v1.Host, polycrate.Host, polycrate.Row, polycrate.HostRequest]{
		clusterFilter: false,
		api:           (*polycrate.Client).Hosts,
		meta:          func(d *polycrate.Host) *polycrate.Meta { return &d.Meta },
		rowID:         func(r *polycrate.Row) string { return r.ID },
		payload: func(h *v1.Host, cluster string) (polycrate.HostRequest, error) {
			s := h.Spec
			display := s.Hostname
			req := polycrate.HostRequest{Name: names.Slug(cluster+"/"+s.Name, s.Name), Hostname: s.Hostname,
				DefaultIPv4: strPtr(s.DefaultIPv4), ResourceCPUCores: int64Ptr(s.ResourceCPUCores), ResourceMemory: int64Ptr(s.ResourceMemory),
				ResourceCPUArchitecture: strPtr(s.ResourceCPUArchitecture), K8sCluster: &cluster, CreatedByComponent: "operator",
				Common: polycrate.Common{DisplayName: &display, ProviderReference: strPtr(s.ProviderID), Labels: sourceLabels(h)}}
			return req, nil
		},
		query: func(req polycrate.HostRequest) url.Values { return polycrate.Query("name_exact", req.Name) },
	}
}

// k8sVolumeAdapter syncs K8sVolumes to /api/v1/kubernetes/volumes/ (natural key:
// cluster and the PV's UID as provider_object_id).
func k8sVolumeAdapter() Adapter[*v1.K8sVolume, polycrate.K8sVolumeRequest] {
	return resource[*v1.K8sVolume, polycrate.K8sVolume, polycrate.K8sVolumeRow, polycrate.K8sVolumeRequest]{
		clusterFilter: true,
		api:           (*polycrate.Client).K8sVolumes,
		meta:          func(d *polycrate.K8sVolume) *polycrate.Meta { return &d.Meta },
		rowID:         func(r *polycrate.K8sVolumeRow) string { return r.ID },
		payload: func(v *v1.K8sVolume, cluster string) (polycrate.K8sVolumeRequest, error) {
			s := v.Spec
			req := polycrate.K8sVolumeRequest{Name: s.Name, K8sCluster: cluster, ProviderObjectName: strPtr(s.Name),
				ProviderObjectID: strPtr(s.ProviderObjectID), CloudProviderVolumeID: strPtr(s.CloudProviderVolumeID),
				CSIDriver: strPtr(s.CSIDriver), StorageClass: strPtr(s.StorageClass), CapacityBytes: int64Ptr(s.CapacityBytes),
				CapacityString: strPtr(s.CapacityString), Phase: s.Phase, AccessModes: s.AccessModes, VolumeMode: s.VolumeMode,
				ReclaimPolicy: s.ReclaimPolicy, PVCName: strPtr(s.PVCName), PVCNamespace: strPtr(s.PVCNamespace),
				Common: polycrate.Common{Labels: sourceLabels(v)}}
			return req, nil
		},
		find: func(ctx context.Context, c *polycrate.Client, req polycrate.K8sVolumeRequest) (string, error) {
			rows, err := c.K8sVolumes().List(ctx, polycrate.Query("name_exact", req.Name, "k8s_cluster", req.K8sCluster))
			if err != nil || len(rows) == 0 {
				return "", err
			}
			for _, r := range rows {
				d, err := c.K8sVolumes().Get(ctx, r.ID)
				if err != nil {
					return "", polycrate.IgnoreNotFound(err)
				}
				if d.ProviderObjectID != nil && req.ProviderObjectID != nil && *d.ProviderObjectID == *req.ProviderObjectID {
					return d.ID, nil
				}
			}
			return "", nil // a PV of the same name but another UID: a new volume
		},
	}
}

// backupAdapter syncs Backups to /api/v1/backups/backups/ (identity: name,
// provider, source namespace, cluster). Seed-only data travels in metadata.
func backupAdapter() Adapter[*v1.Backup, polycrate.BackupRequest] {
	return resource[*v1.Backup, polycrate.Backup, polycrate.BackupRow, polycrate.BackupRequest]{
		clusterFilter: true,
		api:           (*polycrate.Client).Backups,
		meta:          func(d *polycrate.Backup) *polycrate.Meta { return &d.Meta },
		rowID:         func(r *polycrate.BackupRow) string { return r.ID },
		payload: func(b *v1.Backup, cluster string) (polycrate.BackupRequest, error) {
			s := b.Spec
			md := sourceMetadata(s.Source)
			if s.ScheduleName != "" {
				md["schedule_name"] = s.ScheduleName
			}
			if len(s.IncludedNamespaces) > 0 {
				md["included_namespaces"] = s.IncludedNamespaces
			}
			display := s.Name
			req := polycrate.BackupRequest{Name: names.Slug(cluster+"/"+s.Provider+"/"+s.SourceNamespace+"/"+s.Name, s.Name),
				K8sCluster: cluster, Provider: s.Provider, Kind: s.Kind, SourceNamespace: strPtr(s.SourceNamespace), Status: s.Status,
				StartedAt: timeOf(s.StartedAt), CompletedAt: timeOf(s.CompletedAt), Expiration: timeOf(s.Expiration),
				ItemsBackedUp: int64Ptr(s.ItemsBackedUp), SizeBytes: int64Ptr(s.SizeBytes), RetentionPolicy: strPtr(s.RetentionPolicy),
				Metadata: md, Common: polycrate.Common{DisplayName: &display, Labels: sourceLabels(b)}}
			return req, nil
		},
		query: func(req polycrate.BackupRequest) url.Values {
			return polycrate.Query("name_exact", req.Name, "provider", req.Provider, "source_namespace", ptr.Deref(req.SourceNamespace, ""), "k8s_cluster", req.K8sCluster)
		},
	}
}

// backupScheduleAdapter syncs BackupSchedules to /api/v1/backups/backup-schedules/;
// last_backup_name (absent from the API) travels in metadata.
func backupScheduleAdapter() Adapter[*v1.BackupSchedule, polycrate.BackupScheduleRequest] {
	return resource[*v1.BackupSchedule, polycrate.BackupSchedule, polycrate.BackupRow, polycrate.BackupScheduleRequest]{
		clusterFilter: true,
		api:           (*polycrate.Client).BackupSchedules,
		meta:          func(d *polycrate.BackupSchedule) *polycrate.Meta { return &d.Meta },
		rowID:         func(r *polycrate.BackupRow) string { return r.ID },
		payload: func(b *v1.BackupSchedule, cluster string) (polycrate.BackupScheduleRequest, error) {
			s := b.Spec
			md := sourceMetadata(s.Source)
			if s.LastBackupName != "" {
				md["last_backup_name"] = s.LastBackupName
			}
			display := s.Name
			req := polycrate.BackupScheduleRequest{Name: names.Slug(cluster+"/"+s.Provider+"/"+s.SourceNamespace+"/"+s.Name, s.Name),
				K8sCluster: cluster, Provider: s.Provider, Kind: s.Kind, SourceNamespace: strPtr(s.SourceNamespace), Status: s.Status,
				ScheduleCron: strPtr(s.ScheduleCron), Paused: s.Paused, RetentionPolicy: strPtr(s.RetentionPolicy),
				LastBackupAt: timeOf(s.LastBackupAt), Metadata: md, Common: polycrate.Common{DisplayName: &display, Labels: sourceLabels(b)}}
			return req, nil
		},
		query: func(req polycrate.BackupScheduleRequest) url.Values {
			return polycrate.Query("name_exact", req.Name, "provider", req.Provider, "source_namespace", ptr.Deref(req.SourceNamespace, ""), "k8s_cluster", req.K8sCluster)
		},
	}
}

// certificateAdapter syncs Certificates to /api/v1/certificates/ (identity: name,
// namespace, cluster); the cert-manager source travels in metadata.
func certificateAdapter() Adapter[*v1.Certificate, polycrate.CertificateRequest] {
	return resource[*v1.Certificate, polycrate.Certificate, polycrate.CertificateRow, polycrate.CertificateRequest]{
		clusterFilter: false,
		api:           (*polycrate.Client).Certificates,
		meta:          func(d *polycrate.Certificate) *polycrate.Meta { return &d.Meta },
		rowID:         func(r *polycrate.CertificateRow) string { return r.ID },
		payload: func(x *v1.Certificate, cluster string) (polycrate.CertificateRequest, error) {
			s := x.Spec
			md := map[string]any{}
			if src := s.SourceCertManager; src != nil {
				md["source_cert_manager"] = map[string]any{"name": src.Name, "namespace": src.Namespace, "uid": src.UID, "revision": src.Revision}
			}
			display := s.DisplayName
			if display == "" {
				display = s.Name
			}
			req := polycrate.CertificateRequest{Name: names.Slug(cluster+"/"+s.Namespace+"/"+s.Name, s.Name), SecretName: s.SecretName,
				Namespace: s.Namespace, K8sCluster: cluster, Kind: "tls", DNSNames: s.DNSNames, IPAddresses: s.IPAddresses,
				IssuerName: strPtr(s.IssuerName), IssuerKind: strPtr(s.IssuerKind), IssuerGroup: s.IssuerGroup,
				NotBefore: timeOf(s.NotBefore), NotAfter: timeOf(s.NotAfter), RenewalTime: timeOf(s.RenewalTime),
				CertificateStatus: s.CertificateStatus, IsReady: s.IsReady, Metadata: md,
				Common: polycrate.Common{DisplayName: &display, Labels: sourceLabels(x)}}
			return req, nil
		},
		// The API filters certificates by name only: namespace and cluster are matched here.
		query: func(req polycrate.CertificateRequest) url.Values { return polycrate.Query("name_exact", req.Name) },
		match: func(r *polycrate.CertificateRow, req polycrate.CertificateRequest) bool {
			return r.Namespace == req.Namespace && r.K8sCluster != nil && r.K8sCluster.ID == req.K8sCluster
		},
	}
}
