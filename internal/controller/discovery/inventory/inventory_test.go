package inventory_test

import (
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/inventory"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

func apiGone[D any](get func() (*D, error), deleted func(*D) bool) func() (bool, error) {
	return func() (bool, error) {
		d, err := get()
		if polycrate.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return deleted(d), nil
	}
}

func createNode(name, cpu, mem, ip string) *corev1.Node {
	GinkgoHelper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "hcloud://" + name}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.NodeInfo.Architecture = "amd64"
	Expect(k8s.Status().Update(ctx, n)).To(Succeed())
	return n
}

var _ = Describe("Nodes → Hosts", func() {
	It("mirrors a Node with the seed's field table, follows a change, and removes the Host of a replaced Node", func() {
		n := createNode("worker-a", "4", "16Gi", "10.0.0.11")
		host := &v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "worker-a"}}
		id := syncedCR(host, func() *v1.SyncStatus { return &host.Status.SyncStatus })
		Expect(host.Labels).To(HaveKeyWithValue(v1.LabelHostSourceNode, "worker-a"))
		Expect(host.OwnerReferences).To(ConsistOf(HaveField("UID", n.UID)))
		h := eventually(func() (*polycrate.Host, error) { return apiClient().Hosts().Get(ctx, id) }, func(g Gomega, h *polycrate.Host) {
			// (The Node's status is written after the Node: the first sync may see none.)
			g.Expect(h.ResourceMemory).NotTo(BeNil())
			g.Expect(*h.ResourceMemory).To(BeEquivalentTo(16384))
		})
		Expect(h.Hostname).To(Equal("worker-a"))
		Expect(h.Name).To(MatchRegexp(`^worker-a-[0-9a-f]{20}$`))
		Expect(*h.DefaultIPv4).To(Equal("10.0.0.11"))
		Expect(*h.ResourceCPUCores).To(BeEquivalentTo(4))
		Expect(*h.ResourceCPUArchitecture).To(Equal("amd64"))
		Expect(*h.ProviderReference).To(Equal("hcloud://worker-a"))
		Expect(h.K8sCluster.ID).To(Equal(localCluster()))

		// A change reaches the API.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		n.Status.Capacity[corev1.ResourceMemory] = resource.MustParse("32Gi")
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.11"})
		Expect(k8s.Status().Update(ctx, n)).To(Succeed())
		eventually(func() (*polycrate.Host, error) { return apiClient().Hosts().Get(ctx, id) }, func(g Gomega, h *polycrate.Host) {
			g.Expect(*h.ResourceMemory).To(BeEquivalentTo(32768))
			g.Expect(*h.DefaultIPv4).To(Equal("203.0.113.11"))
		})

		// The Node is replaced: the old Host goes, in Kubernetes and in the API.
		createNode("worker-b", "4", "16Gi", "10.0.0.12")
		Expect(k8s.Delete(ctx, n)).To(Succeed())
		goneCR(host)
		deletedInAPI(apiGone(func() (*polycrate.Host, error) { return apiClient().Hosts().Get(ctx, id) },
			func(h *polycrate.Host) bool { return h.IsDeleted }))
		hostB := &v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "worker-b"}}
		Expect(syncedCR(hostB, func() *v1.SyncStatus { return &hostB.Status.SyncStatus })).NotTo(Equal(id))
	})

	It("honours node_discovery: turned off, the Hosts go; label_selector picks Nodes", func() {
		createNode("pool-gpu-1", "8", "64Gi", "10.0.1.1")
		host := &v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "pool-gpu-1"}}
		id := syncedCR(host, func() *v1.SyncStatus { return &host.Status.SyncStatus })
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.NodeDiscovery.LabelSelector = "pool=gpu" })
		goneCR(host) // not labelled pool=gpu
		deletedInAPI(apiGone(func() (*polycrate.Host, error) { return apiClient().Hosts().Get(ctx, id) },
			func(h *polycrate.Host) bool { return h.IsDeleted }))
		n := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "pool-gpu-1"}, n)).To(Succeed())
		n.Labels = map[string]string{"pool": "gpu"}
		Expect(k8s.Update(ctx, n)).To(Succeed())
		host = &v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "pool-gpu-1"}}
		syncedCR(host, func() *v1.SyncStatus { return &host.Status.SyncStatus })
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.NodeDiscovery.LabelSelector = "" })
	})
})

var _ = Describe("PersistentVolumes → K8sVolumes", func() {
	It("mirrors a PV with capacity, class, modes, policy, phase, claim and CSI handle, and removes it with the PV", func() {
		mode := corev1.PersistentVolumeFilesystem
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-0b1c"},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "hcloud-volumes",
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, VolumeMode: &mode,
				ClaimRef:               &corev1.ObjectReference{Namespace: "shop", Name: "data-0"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.hetzner.cloud", VolumeHandle: "4711"}}}}
		Expect(k8s.Create(ctx, pv)).To(Succeed())
		vol := &v1.K8sVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-0b1c"}}
		id := syncedCR(vol, func() *v1.SyncStatus { return &vol.Status.SyncStatus })
		got, err := apiClient().K8sVolumes().Get(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(*got.ProviderObjectID).To(Equal(string(pv.UID)))
		Expect(*got.CapacityBytes).To(BeEquivalentTo(10737418240))
		Expect(*got.StorageClass).To(Equal("hcloud-volumes"))
		Expect(*got.PVCNamespace + "/" + *got.PVCName).To(Equal("shop/data-0"))
		Expect(got.K8sCluster.ID).To(Equal(localCluster()))
		Expect(k8s.Delete(ctx, pv)).To(Succeed())
		goneCR(vol)
		deletedInAPI(apiGone(func() (*polycrate.K8sVolume, error) { return apiClient().K8sVolumes().Get(ctx, id) },
			func(v *polycrate.K8sVolume) bool { return v.IsDeleted }))
	})
})

var _ = Describe("Velero → Backups and BackupSchedules", func() {
	It("mirrors a Velero Backup (seed table), follows its phase, and deletes it with the source", func() {
		b := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "daily-20251220020000",
			Labels: map[string]string{velerov1.ScheduleNameLabel: "daily"}},
			Spec: velerov1.BackupSpec{TTL: metav1.Duration{Duration: 720 * time.Hour}, IncludedNamespaces: []string{"shop"}}}
		// Velero's CRDs have no status subresource: status is written with the object.
		start := metav1.NewTime(time.Date(2025, 12, 20, 2, 0, 0, 0, time.UTC))
		b.Status = velerov1.BackupStatus{Phase: velerov1.BackupPhaseInProgress, StartTimestamp: &start}
		Expect(k8s.Create(ctx, b)).To(Succeed())

		cr := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "velero-daily-20251220020000"}}
		id := syncedCR(cr, func() *v1.SyncStatus { return &cr.Status.SyncStatus })
		Expect(cr.Labels).To(HaveKeyWithValue(v1.LabelBackupProvider, "velero"))
		got := eventually(func() (*polycrate.Backup, error) { return apiClient().Backups().Get(ctx, id) }, func(g Gomega, r *polycrate.Backup) {
			g.Expect(r.Status).To(Equal("running"))
		})
		Expect(got.Provider).To(Equal("velero"))
		Expect(got.Kind).To(Equal("app"))
		Expect(*got.SourceNamespace).To(Equal("velero"))
		Expect(got.StartedAt.Equal(start.Time)).To(BeTrue())
		Expect(got.Metadata).To(HaveKeyWithValue("schedule_name", "daily"))

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		done := metav1.NewTime(start.Add(5 * time.Minute))
		b.Status.Phase, b.Status.CompletionTimestamp = velerov1.BackupPhasePartiallyFailed, &done
		b.Status.Progress = &velerov1.BackupProgress{ItemsBackedUp: 40, TotalItems: 41}
		Expect(k8s.Update(ctx, b)).To(Succeed())
		eventually(func() (*polycrate.Backup, error) { return apiClient().Backups().Get(ctx, id) }, func(g Gomega, r *polycrate.Backup) {
			g.Expect(r.Status).To(Equal("partial"))
			g.Expect(r.CompletedAt).NotTo(BeNil())
		})

		Expect(k8s.Delete(ctx, b)).To(Succeed())
		goneCR(cr)
		deletedInAPI(apiGone(func() (*polycrate.Backup, error) { return apiClient().Backups().Get(ctx, id) },
			func(r *polycrate.Backup) bool { return r.IsDeleted }))
	})

	It("mirrors a Velero Schedule with its last backup's name, and ignores Velero objects outside velero_namespace", func() {
		s := &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly"},
			Spec: velerov1.ScheduleSpec{Schedule: "0 2 * * *", Template: velerov1.BackupSpec{TTL: metav1.Duration{Duration: 168 * time.Hour}}}}
		last := metav1.NewTime(time.Date(2025, 12, 20, 2, 0, 0, 0, time.UTC))
		s.Status = velerov1.ScheduleStatus{Phase: velerov1.SchedulePhaseEnabled, LastBackup: &last}
		Expect(k8s.Create(ctx, s)).To(Succeed())
		cr := &v1.BackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "velero-nightly"}}
		id := syncedCR(cr, func() *v1.SyncStatus { return &cr.Status.SyncStatus })
		got := eventually(func() (*polycrate.BackupSchedule, error) { return apiClient().BackupSchedules().Get(ctx, id) },
			func(g Gomega, r *polycrate.BackupSchedule) { g.Expect(r.LastBackupAt).NotTo(BeNil()) })
		Expect(*got.ScheduleCron).To(Equal("0 2 * * *"))
		Expect(got.Kind).To(Equal("cluster"))
		Expect(got.Metadata).To(HaveKeyWithValue("last_backup_name", "nightly-20251220020000"))

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Spec.Paused = true
		Expect(k8s.Update(ctx, s)).To(Succeed())
		eventually(func() (*polycrate.BackupSchedule, error) { return apiClient().BackupSchedules().Get(ctx, id) },
			func(g Gomega, r *polycrate.BackupSchedule) { g.Expect(r.Paused).To(BeTrue()) })

		ns := freshNamespace()
		stray := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray"}}
		Expect(k8s.Create(ctx, stray)).To(Succeed())
		absentCR(&v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "velero-stray"}})
	})
})

func certificate(ns, name, issuer string, notAfter time.Time) *certmanagerv1.Certificate {
	GinkgoHelper()
	c := &certmanagerv1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: certmanagerv1.CertificateSpec{SecretName: name, DNSNames: []string{"api.example.com"},
			IssuerRef: cmmeta.IssuerReference{Name: issuer, Kind: "ClusterIssuer", Group: "cert-manager.io"}}}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	na, nb := metav1.NewTime(notAfter.UTC().Truncate(time.Second)), metav1.NewTime(time.Now().Add(-time.Hour).UTC().Truncate(time.Second))
	c.Status = certmanagerv1.CertificateStatus{NotAfter: &na, NotBefore: &nb, Revision: ptr.To(1),
		Conditions: []certmanagerv1.CertificateCondition{{Type: certmanagerv1.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready"}}}
	Expect(k8s.Status().Update(ctx, c)).To(Succeed())
	return c
}

var _ = Describe("cert-manager → Certificates", func() {
	It("mirrors a Certificate as the seed's CR, syncs it, honours the issuer filter and deletes it with the source", func() {
		ns := freshNamespace()
		src := certificate(ns, "api-example-com-tls", "letsencrypt-production", time.Now().Add(90*24*time.Hour))
		cr := &v1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certmanager-" + ns + "-api-example-com-tls"}}
		id := syncedCR(cr, func() *v1.SyncStatus { return &cr.Status.SyncStatus })
		// The Certificate was created before its status was set (status is a
		// subresource): the mirror may first sync it as pending, then as ready.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cr), cr)).To(Succeed())
			g.Expect(cr.Labels).To(SatisfyAll(HaveKeyWithValue(v1.LabelCertificateIssuer, "letsencrypt-production"),
				HaveKeyWithValue(v1.LabelCertificateSource, "api-example-com-tls"), HaveKeyWithValue(v1.LabelCertificateReady, "true"),
				HaveKeyWithValue(v1.LabelOperatorDiscovered, "true")))
			g.Expect(cr.Spec.CertificateStatus).To(Equal("ready"))
			g.Expect(cr.Spec.SourceCertManager.UID).To(Equal(string(src.UID)))
			// The seed's custom-columns read these paths.
			g.Expect(cr.Spec.IssuerName).To(Equal("letsencrypt-production"))
			g.Expect(cr.Spec.IsReady).To(BeTrue())
			g.Expect(cr.Status.SyncStatus.SyncStatus).To(Equal("synced"))
			g.Expect(cr.Status.APIID).To(Equal(id))
		}, timeout, poll).Should(Succeed())
		got := eventually(func() (*polycrate.Certificate, error) { return apiClient().Certificates().Get(ctx, id) },
			func(g Gomega, c *polycrate.Certificate) {
				g.Expect(c.CertificateStatus).To(Equal("ready"))
				g.Expect(c.IsReady).To(BeTrue())
			})
		Expect(got.SecretName).To(Equal("api-example-com-tls"))
		Expect(got.Namespace).To(Equal(ns))
		Expect(got.DNSNames).To(ConsistOf("api.example.com"))
		Expect(*got.IssuerKind).To(Equal("clusterissuer"))
		Expect(got.CertificateStatus).To(Equal("ready"))
		Expect(got.IsReady).To(BeTrue())
		// Its expiry is a metric (the dashboard's and the alert's figure), by the
		// cert-manager Certificate's namespace and name.
		expiry := map[string]string{"certificate_namespace": ns, "certificate": "api-example-com-tls"}
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_certificate_expiration_timestamp_seconds", expiry)
		}, timeout, poll).Should(Equal(float64(src.Status.NotAfter.Unix())))

		// Excluded issuer: not mirrored.
		certificate(ns, "self", "selfsigned-issuer", time.Now().Add(90*24*time.Hour))
		absentCR(&v1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certmanager-" + ns + "-self"}})

		Expect(k8s.Delete(ctx, src)).To(Succeed())
		goneCR(cr)
		deletedInAPI(apiGone(func() (*polycrate.Certificate, error) { return apiClient().Certificates().Get(ctx, id) },
			func(c *polycrate.Certificate) bool { return c.IsDeleted }))
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_certificate_expiration_timestamp_seconds", expiry)
		}, timeout, poll).Should(BeZero(), "the series of a deleted certificate is gone")
	})

	It("turns ready into expiring_soon when the 30-day mark passes, without any cluster event", func() {
		ns := freshNamespace()
		certificate(ns, "soon", "letsencrypt-production", time.Now().Add(inventory.ExpiringSoon+10*time.Second))
		cr := &v1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certmanager-" + ns + "-soon"}}
		id := syncedCR(cr, func() *v1.SyncStatus { return &cr.Status.SyncStatus })
		status := func() (string, error) {
			c, err := apiClient().Certificates().Get(ctx, id)
			if err != nil {
				return "", err
			}
			return c.CertificateStatus, nil
		}
		// First ready (30 days and 10 s ahead), then expiring_soon once the mark passes.
		Eventually(status, 8*time.Second, 100*time.Millisecond).Should(Equal("ready"))
		Eventually(status, 30*time.Second, 200*time.Millisecond).Should(Equal("expiring_soon"))
	})
})

var _ = Describe("CloudNativePG, installed after the operator", Ordered, func() {
	var ns string
	install := func() {
		GinkgoHelper()
		_, err := envtest.InstallCRDs(oe.Config, envtest.CRDInstallOptions{Paths: []string{cnpgCRDs()}})
		Expect(err).NotTo(HaveOccurred())
	}
	cnpg := func(kind, name string, spec, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(inventory.CNPGBackupGVK.GroupVersion().WithKind(kind))
		u.SetNamespace(ns)
		u.SetName(name)
		Expect(k8s.Create(ctx, u)).To(Succeed())
		if status != nil {
			u.Object["status"] = status
			Expect(k8s.Status().Update(ctx, u)).To(Succeed())
		}
		return u
	}

	It("starts CNPG discovery without a restart when the CRDs appear, and mirrors Backups and ScheduledBackups", func() {
		Expect(oe.Op.Gate.Active(inventory.CRDCNPGBackup)).To(BeFalse())
		install()
		Eventually(func() bool {
			return oe.Op.Gate.Active(inventory.CRDCNPGBackup) && oe.Op.Gate.Active(inventory.CRDCNPGScheduled)
		},
			timeout, poll).Should(BeTrue())
		ns = freshNamespace()
		cnpg("Backup", "pg-20251220", map[string]any{"cluster": map[string]any{"name": "pg"}},
			map[string]any{"phase": "completed", "startedAt": "2025-12-20T02:00:00Z", "stoppedAt": "2025-12-20T02:01:00Z"})
		cnpg("ScheduledBackup", "pg-nightly", map[string]any{"schedule": "0 0 2 * * *", "cluster": map[string]any{"name": "pg"}}, nil)

		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cnpg-pg-20251220"}}
		id := syncedCR(b, func() *v1.SyncStatus { return &b.Status.SyncStatus })
		// The Backup was created before its status was set: the mirror may first
		// sync it as pending, then as completed.
		Eventually(func(g Gomega) {
			got, err := apiClient().Backups().Get(ctx, id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Provider).To(Equal("cloudnativepg"))
			g.Expect(got.Kind).To(Equal("database"))
			g.Expect(got.Status).To(Equal("completed"))
			g.Expect(*got.SourceNamespace).To(Equal(ns))
		}, timeout, poll).Should(Succeed())

		s := &v1.BackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cnpg-pg-nightly"}}
		sid := syncedCR(s, func() *v1.SyncStatus { return &s.Status.SyncStatus })
		gs, err := apiClient().BackupSchedules().Get(ctx, sid)
		Expect(err).NotTo(HaveOccurred())
		Expect(*gs.ScheduleCron).To(Equal("0 2 * * *"))
	})

	It("goes quiet when the CRDs are removed (their objects' mirrors go with them) and resumes when they return", func() {
		for _, name := range []string{inventory.CRDCNPGBackup, inventory.CRDCNPGScheduled} {
			Expect(k8s.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		}
		Eventually(func() bool {
			return oe.Op.Gate.Active(inventory.CRDCNPGBackup) || oe.Op.Gate.Active(inventory.CRDCNPGScheduled)
		},
			timeout, poll).Should(BeFalse())
		goneCR(&v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cnpg-pg-20251220"}})
		goneCR(&v1.BackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cnpg-pg-nightly"}})
		// A configuration change and a sweep while the CRDs are gone do nothing (no hang, no error).
		oe.Op.Inventory["cnpg-backup"].All(ctx, k8s)

		install()
		Eventually(func() bool { return oe.Op.Gate.Active(inventory.CRDCNPGBackup) }, timeout, poll).Should(BeTrue())
		cnpg("Backup", "pg-again", map[string]any{"cluster": map[string]any{"name": "pg"}}, map[string]any{"phase": "running"})
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cnpg-pg-again"}}
		syncedCR(b, func() *v1.SyncStatus { return &b.Status.SyncStatus })
	})
})

var _ = Describe("Inventory across a restart", func() {
	It("writes nothing to the API and nothing to the CRs after a restart when nothing changed", func() {
		createNode("steady-1", "2", "8Gi", "10.0.2.1")
		ns := freshNamespace()
		certificate(ns, "steady", "letsencrypt-production", time.Now().Add(90*24*time.Hour))
		Expect(k8s.Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "steady"}})).To(Succeed())
		for _, o := range []client.Object{&v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "steady-1"}},
			&v1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certmanager-" + ns + "-steady"}},
			&v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "velero-steady"}}} {
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				u, _ := o.(interface{ GetAnnotations() map[string]string })
				g.Expect(u.GetAnnotations()).To(HaveKey(inventory.AnnotationDeclared))
			}, timeout, poll).Should(Succeed())
		}
		// Settle: nothing written for a while.
		specs.Quiet(func() int { return writes(inventoryResources...) }, 1500*time.Millisecond)
		before := writes(inventoryResources...)
		rvs := resourceVersions()

		Expect(oe.StopOperator()).To(Succeed())
		Expect(oe.StartOperator()).To(Succeed())
		Eventually(func() (string, error) { return oe.Op.Config.Get().LocalCluster() }, timeout, poll).ShouldNot(BeEmpty())
		Consistently(func() int { return writes(inventoryResources...) }, 4*time.Second, 200*time.Millisecond).Should(Equal(before))
		Expect(resourceVersions()).To(Equal(rvs))
		Expect(api.Collisions()).To(BeEmpty())
	})
})

func resourceVersions() map[string]string {
	out := map[string]string{}
	add := func(list client.ObjectList, kind string) {
		Expect(k8s.List(ctx, list)).To(Succeed())
		items, _ := metaItems(list)
		for _, o := range items {
			out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	add(&v1.HostList{}, "host")
	add(&v1.K8sVolumeList{}, "volume")
	add(&v1.BackupList{}, "backup")
	add(&v1.BackupScheduleList{}, "schedule")
	add(&v1.CertificateList{}, "certificate")
	return out
}

func updateOC(change func(*v1.OperatorConfig)) { specs.UpdateOperatorConfig(k8s, change) }
