package k8sapps_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/k8sapps"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

func ingress(ns, name string, ann map[string]string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: name + ".example.com"}}}}
}

var _ = Describe("K8sApps from meta-Secrets", func() {
	It("declares the seed's K8sApp CR, syncs it with the block ID resolved, and counts the namespace's workload Pods", func() {
		ns := freshNamespace()
		rs := workload(ns, "ingress-nginx-controller")
		pod(ns, "ctrl-a", podOpts{owner: rsOwner(rs), images: []string{"cargo.ayedo.cloud/library/nginx:1.25.3", "busybox:1.36"}, ready: true, restarts: 2})
		pod(ns, "ctrl-b", podOpts{owner: rsOwner(rs), images: []string{"cargo.ayedo.cloud/library/nginx:1.25.3"}, ready: true, restarts: 1})
		pod(ns, "backup-job", podOpts{owner: jobOwner("velero-backup"), images: []string{"velero:1.13"}, ready: false})
		sec := metaSecret(ns, "nginx-ingress", metaDoc("nginx-ingress", "helm", "production", "install", "success"))
		Expect(k8s.Create(ctx, sec)).To(Succeed())

		a, remote := synced(ns, "nginx-ingress")
		Expect(a.Labels).To(SatisfyAll(
			HaveKeyWithValue(v1.LabelK8sAppBlock, "nginx-ingress"), HaveKeyWithValue(v1.LabelK8sAppKind, "helm"),
			HaveKeyWithValue(v1.LabelK8sAppType, "ingress-controller"), HaveKeyWithValue(v1.LabelOperatorDiscovered, "true"),
			HaveKeyWithValue(v1.LabelDiscovered, "true"), HaveKeyWithValue(v1.LabelK8sAppDiscoverySource, "secret")))
		Expect(a.OwnerReferences).To(ConsistOf(HaveField("UID", sec.UID)))
		Expect(a.OwnerReferences[0].Kind).To(Equal("Secret"))
		Expect(a.Spec.Kind).To(Equal("helm"))
		Expect(a.Spec.Block).To(Equal(v1.K8sAppBlock{Name: "nginx-ingress", DisplayName: "nginx-ingress display", Version: "1.2.0", AppVersion: "1.9.6",
			From: "cargo.ayedo.cloud/ayedo/k8s/nginx-ingress", Type: "ingress-controller", Flavor: "nginx",
			Chart: &v1.K8sAppChart{Name: "ingress-nginx", Version: "4.9.0", RepoURL: "https://kubernetes.github.io/ingress-nginx"}}))
		Expect(a.Spec.Workspace).To(Equal(v1.K8sAppWorkspace{Name: "production", Organization: "acme-corp"}))
		Expect(a.Spec.Action.Name).To(Equal("install"))
		Expect(a.Spec.Action.LastExecutedAt.UTC()).To(Equal(time.Date(2025, 12, 20, 10, 0, 0, 0, time.UTC)))

		// Status: installed; the Job's Pod never counts; artifacts are distinct images.
		a = app(ns, "nginx-ingress", func(g Gomega, a *v1.K8sApp) {
			g.Expect(a.Status.PodsTotal).To(BeEquivalentTo(2))
		})
		Expect(a.Status.Installed).To(BeTrue())
		Expect(a.Status.PodsReady).To(BeEquivalentTo(2))
		Expect(a.Status.PodsRestarts).To(BeEquivalentTo(5))
		Expect(a.Status.State).To(Equal("OK"))
		Expect(a.Status.ArtifactCount).To(BeEquivalentTo(2))
		Expect(a.Status.Artifacts).To(ConsistOf(
			v1.K8sAppArtifact{Name: "busybox-1-36", Image: "busybox:1.36", PodCount: 1},
			v1.K8sAppArtifact{Name: "cargo-ayedo-cloud-library-nginx-1-25-3", Image: "cargo.ayedo.cloud/library/nginx:1.25.3", PodCount: 2}))

		// The API app: the seed's block linked, kind, namespace, version, pods.
		ws, err := apiClient().FindWorkspace(ctx, "production", "acme-corp")
		Expect(err).NotTo(HaveOccurred())
		block, err := apiClient().FindBlock(ctx, "nginx-ingress", ws.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(block).NotTo(BeNil())
		Expect(meta.IsStatusConditionTrue(a.Status.Conditions, v1.ConditionBlockLinked)).To(BeTrue())
		Expect(a.Status.BlockID).To(Equal(block.ID))
		remote = apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.PodsTotal).To(Equal(2))
		})
		Expect(remote.Name).To(Equal("nginx-ingress"))
		Expect(remote.Kind).To(Equal("helm"))
		Expect(remote.Block).NotTo(BeNil())
		Expect(remote.Block.ID).To(Equal(block.ID))
		Expect(remote.K8sCluster.ID).To(Equal(localCluster()))
		Expect(*remote.Namespace).To(Equal(ns))
		Expect(*remote.InstalledVersion).To(Equal("1.2.0"))
		Expect(remote.Installed).To(BeTrue())
		Expect(remote.Active).To(BeTrue())
		Expect(*remote.Source).To(Equal("secret"))
		Expect(remote.PodsReady).To(Equal(2))
		Expect(*remote.PodsStatusHash).To(Equal(a.Status.PodsStatusHash))
		// The last action ran at the meta-Secret's action.last_executed_at.
		Expect(remote.LastInstallation).NotTo(BeNil())
		Expect(remote.LastInstallation.UTC()).To(Equal(time.Date(2025, 12, 20, 10, 0, 0, 0, time.UTC)))
		// Restarts the Pods had before discovery are history, not the last hour's.
		Expect(remote.PodsRestartCountTotal).To(Equal(5))
		Expect(remote.PodsRestartCountLastHr).To(Equal(0))
		Expect(a.Status.PodsRestartsLastHour).To(BeZero())

		// A Pod turning unready changes state, hash and the API.
		p := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ctrl-b"}, p)).To(Succeed())
		setPodStatus(p, false, 1)
		app(ns, "nginx-ingress", func(g Gomega, a *v1.K8sApp) {
			g.Expect(a.Status.State).To(Equal("WARNING"))
			g.Expect(a.Status.PodsReady).To(BeEquivalentTo(1))
		})
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.PodsReady).To(Equal(1))
		})
	})

	It("derives the installation state from the last action (the seed's table) and follows Secret updates", func() {
		ns := freshNamespace()
		sec := metaSecret(ns, "redis", metaDoc("redis", "polycrate", "production", "install", "running"))
		Expect(k8s.Create(ctx, sec)).To(Succeed())
		a, _ := synced(ns, "redis")
		Expect(a.Status.InstallationRunning).To(BeTrue())
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) { g.Expect(r.InstallationRunning).To(BeTrue()) })

		for _, step := range []struct {
			action, status string
			check          func(Gomega, *polycrate.K8sApp)
		}{
			{"install", "failed", func(g Gomega, r *polycrate.K8sApp) {
				g.Expect(r.InstallationFailed).To(BeTrue())
				g.Expect(r.InstallationRunning || r.Installed).To(BeFalse())
			}},
			{"install", "success", func(g Gomega, r *polycrate.K8sApp) {
				g.Expect(r.Installed).To(BeTrue())
				g.Expect(r.InstallationFailed).To(BeFalse())
			}},
			{"uninstall", "success", func(g Gomega, r *polycrate.K8sApp) {
				g.Expect(r.Uninstalled).To(BeTrue())
				g.Expect(r.Installed).To(BeFalse())
			}},
		} {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sec), sec)).To(Succeed())
			sec.StringData = map[string]string{"block.poly": metaDoc("redis", "polycrate", "production", step.action, step.status)}
			Expect(k8s.Update(ctx, sec)).To(Succeed())
			apiApp(a.Status.APIID, step.check)
		}
	})

	It("syncs an app whose workspace the agent cannot see without a block link, and says so", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, metaSecret(ns, "grafana", metaDoc("grafana", "helm", "staging", "install", "success")))).To(Succeed())
		a, remote := synced(ns, "grafana")
		cond := meta.FindStatusCondition(a.Status.Conditions, v1.ConditionBlockLinked)
		Expect(cond).NotTo(BeNil())
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(v1.ReasonWorkspaceMissing))
		Expect(cond.Message).To(ContainSubstring(`workspace "staging"`))
		Expect(remote.Block).To(BeNil())
	})

	It("emits a Warning event on a malformed meta-Secret and creates nothing", func() {
		ns := freshNamespace()
		doc := metaDoc("broken", "external", "production", "install", "success") // kind external is not a block kind
		Expect(k8s.Create(ctx, metaSecret(ns, "broken", doc))).To(Succeed())
		Eventually(warnings(ns, "Secret", "broken.poly", "InvalidMetaSecret"), timeout, poll).Should(ContainElement(
			ContainSubstring(`block.kind "external" is not one of helm, polycrate`)))
		absent(ns, "broken")
		rows, err := apiClient().K8sApps().List(ctx, polycrate.Query("name_exact", "broken"))
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(BeEmpty())
	})

	It("retires the API app when the meta-Secret goes: uninstalled and inactive, never deleted (agents may not delete apps)", func() {
		ns := freshNamespace()
		sec := metaSecret(ns, "loki", metaDoc("loki", "helm", "production", "install", "success"))
		Expect(k8s.Create(ctx, sec)).To(Succeed())
		a, _ := synced(ns, "loki")
		Expect(k8s.Delete(ctx, sec)).To(Succeed())
		gone(ns, "loki")
		r := apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.Uninstalled).To(BeTrue())
			g.Expect(r.Active).To(BeFalse())
		})
		Expect(r.Installed).To(BeFalse())
		Expect(r.IsDeleted).To(BeFalse())
		// The emulator refuses an agent's DELETE, as the real API does.
		err := apiClient().K8sApps().Delete(ctx, a.Status.APIID)
		Expect(polycrate.IsForbidden(err)).To(BeTrue(), "DELETE answered %v", err)

		// Deployed again: the retired API app is adopted and active again, not duplicated.
		Expect(k8s.Create(ctx, metaSecret(ns, "loki", metaDoc("loki", "helm", "production", "install", "success")))).To(Succeed())
		again, _ := synced(ns, "loki")
		Expect(again.Status.APIID).To(Equal(a.Status.APIID))
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.Active).To(BeTrue())
			g.Expect(r.Installed).To(BeTrue())
		})
	})

	It("adopts an app the API already has (e.g. from block reconciliation) instead of creating a duplicate", func() {
		ns := freshNamespace()
		cluster := localCluster()
		existing, err := apiClient().K8sApps().Create(ctx, polycrate.K8sAppRequest{Name: "tempo", Kind: "helm", K8sCluster: &cluster})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, metaSecret(ns, "tempo", metaDoc("tempo", "helm", "production", "install", "success")))).To(Succeed())
		a, remote := synced(ns, "tempo")
		Expect(a.Status.APIID).To(Equal(existing.ID))
		Expect(*remote.Namespace).To(Equal(ns))
		rows, err := apiClient().K8sApps().List(ctx, polycrate.Query("name_exact", "tempo"))
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(1))
		Expect(api.Collisions()).To(BeEmpty())
	})

	It("ignores namespaces app discovery ignores", func() {
		Expect(k8s.Create(ctx, metaSecret("apps-ignored", "mimir", metaDoc("mimir", "helm", "production", "install", "success")))).To(Succeed())
		absent("apps-ignored", "mimir")
	})
})

var _ = Describe("K8sApps from annotated Pods", func() {
	It("makes one external app of several replicas, counts only workload Pods, and removes it with the last Pod", func() {
		ns := freshNamespace()
		rs := workload(ns, "my-app")
		p1 := pod(ns, "my-app-1", podOpts{app: "my-app", owner: rsOwner(rs), ready: true})
		p2 := pod(ns, "my-app-2", podOpts{app: "my-app", owner: rsOwner(rs), ready: false})
		job := pod(ns, "my-app-migrate", podOpts{app: "my-app", owner: jobOwner("migrate"), images: []string{"migrate:1"}})
		a, remote := synced(ns, "my-app")
		Expect(a.Spec.Kind).To(Equal("external"))
		Expect(a.Spec.DiscoverySource).To(Equal("pod"))
		Expect(a.OwnerReferences).To(BeEmpty())
		a = app(ns, "my-app", func(g Gomega, a *v1.K8sApp) { g.Expect(a.Status.PodsTotal).To(BeEquivalentTo(2)) })
		Expect(a.Status.PodsReady).To(BeEquivalentTo(1))
		Expect(a.Status.State).To(Equal("WARNING"))
		Expect(a.Status.Artifacts).To(ConsistOf(v1.K8sAppArtifact{Name: "nginx-1-25-3", Image: "nginx:1.25.3", PodCount: 2}))
		Expect(remote.Kind).To(Equal("external"))
		Expect(remote.BYOA).To(BeFalse())
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.PodsTotal).To(Equal(2))
			g.Expect(r.PodsReady).To(Equal(1))
		})

		// A Job Pod alone is no app.
		Expect(k8s.Delete(ctx, p1)).To(Succeed())
		Expect(k8s.Delete(ctx, p2)).To(Succeed())
		gone(ns, "my-app")
		_ = job
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.Uninstalled).To(BeTrue())
			g.Expect(r.Active).To(BeFalse())
		})
	})

	It("ignores a name used in two namespaces and warns on each Pod's owner; resolves when one side goes", func() {
		nsA, nsB := freshNamespace(), freshNamespace()
		rsA, rsB := workload(nsA, "shared"), workload(nsB, "shared")
		pod(nsA, "shared-a", podOpts{app: "shared-app", owner: rsOwner(rsA), ready: true})
		pb := pod(nsB, "shared-b", podOpts{app: "shared-app", owner: rsOwner(rsB), ready: true})
		for _, ns := range []string{nsA, nsB} {
			Eventually(warnings(ns, "Deployment", "shared", "K8sAppNameConflict"), timeout, poll).Should(ContainElement(
				SatisfyAll(ContainSubstring(nsA), ContainSubstring(nsB), ContainSubstring("distinct name"))))
			gone(ns, "shared-app") // the side that came first had its app until the conflict
			absent(ns, "shared-app")
		}
		Expect(k8s.Delete(ctx, pb)).To(Succeed())
		synced(nsA, "shared-app")
		absent(nsB, "shared-app")
	})

	It("lets a meta-Secret app win over annotated Pods of the same name", func() {
		ns := freshNamespace()
		rs := workload(ns, "vault")
		pod(ns, "vault-0", podOpts{app: "vault", owner: rsOwner(rs), ready: true})
		synced(ns, "vault")
		Expect(k8s.Create(ctx, metaSecret(ns, "vault", metaDoc("vault", "helm", "production", "install", "success")))).To(Succeed())
		a := app(ns, "vault", func(g Gomega, a *v1.K8sApp) {
			g.Expect(a.Spec.DiscoverySource).To(Equal("secret"))
			g.Expect(a.Status.Phase).To(Equal("Synced"))
			g.Expect(a.Status.ConfigHash).NotTo(BeEmpty())
		})
		Expect(a.Spec.Kind).To(Equal("helm"))
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.Kind).To(Equal("helm"))
			g.Expect(r.Source).To(HaveValue(Equal("secret")))
		})
	})

	It("never rediscovers the operator's own app (the agent owns that record)", func() {
		ns := freshNamespace()
		rs := workload(ns, "op")
		pod(ns, "op-0", podOpts{app: "polycrate-operator", owner: rsOwner(rs), ready: true})
		absent(ns, "polycrate-operator")
	})
})

var _ = Describe("K8sApps claimed by Ingresses and HTTPRoutes", func() {
	It("creates an external app from an Ingress claim with byoa, and adopts a meta-Secret app of the same name without byoa", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, ingress(ns, "acme-shop", map[string]string{"polycrate_k8sapp_name": "acme-shop", "polycrate_k8sapp_byoa": "true"}))).To(Succeed())
		a, remote := synced(ns, "acme-shop")
		Expect(a.Spec.DiscoverySource).To(Equal("ingress"))
		Expect(a.Spec.Kind).To(Equal("external"))
		Expect(a.Spec.BYOA).To(BeTrue())
		Expect(remote.BYOA).To(BeTrue())
		Expect(*remote.Source).To(Equal("ingress"))

		// A meta-Secret of the same name takes the app over: byoa is only for ingress/httproute apps.
		Expect(k8s.Create(ctx, metaSecret(ns, "acme-shop", metaDoc("acme-shop", "polycrate", "production", "install", "success")))).To(Succeed())
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.BYOA).To(BeFalse())
			g.Expect(r.Kind).To(Equal("polycrate"))
		})
		rows, err := apiClient().K8sApps().List(ctx, polycrate.Query("name_exact", "acme-shop"))
		Expect(err).NotTo(HaveOccurred())
		// (The HTTPRoute spec below has an app of this name too, in its own namespace.)
		ours := 0
		for _, r := range rows {
			if r.Labels["polycrate_source_namespace"] == ns {
				ours++
			}
		}
		Expect(ours).To(Equal(1))
	})

	It("follows a claim that moves to another app and removes the app whose last claim went", func() {
		ns := freshNamespace()
		ing := ingress(ns, "portal", map[string]string{"polycrate_k8sapp_name": "portal-v1"})
		Expect(k8s.Create(ctx, ing)).To(Succeed())
		synced(ns, "portal-v1")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator may write the Ingress too
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ing), ing); err != nil {
				return err
			}
			ing.Annotations["polycrate_k8sapp_name"] = "portal-v2"
			return k8s.Update(ctx, ing)
		})).To(Succeed())
		synced(ns, "portal-v2")
		gone(ns, "portal-v1")
	})

	It("creates an external app from an HTTPRoute claim once the Gateway API is served", func() {
		Eventually(oe.Op.HTTPRoutes.Started, timeout, poll).Should(BeTrue())
		ns := freshNamespace()
		r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme-shop",
			Annotations: map[string]string{"polycrate_k8sapp_name": "acme-shop", "polycrate_k8sapp_byoa": "true"}},
			Spec: gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"shop.example.com"}}}
		Expect(k8s.Create(ctx, r)).To(Succeed())
		a, remote := synced(ns, "acme-shop")
		Expect(a.Spec.DiscoverySource).To(Equal("httproute"))
		Expect(remote.BYOA).To(BeTrue())
		Expect(*remote.Source).To(Equal("httproute"))
		Expect(k8s.Delete(ctx, r)).To(Succeed())
		gone(ns, "acme-shop")
	})
})

var _ = Describe("K8sApp sync across a restart", func() {
	It("writes nothing to the API after a restart when nothing changed", func() {
		ns := freshNamespace()
		rs := workload(ns, "steady")
		pod(ns, "steady-0", podOpts{app: "steady", owner: rsOwner(rs), ready: true, restarts: 3})
		Expect(k8s.Create(ctx, metaSecret(ns, "keycloak", metaDoc("keycloak", "helm", "production", "install", "success")))).To(Succeed())
		Expect(k8s.Create(ctx, ingress(ns, "steady", map[string]string{"polycrate_k8sapp_name": "claimed"}))).To(Succeed())
		for _, n := range []string{"steady", "keycloak", "claimed"} {
			synced(ns, n)
		}
		// Settle: no write for a while.
		specs.Quiet(appWrites, 1500*time.Millisecond)
		writes := appWrites()
		rvs := map[string]string{}
		before := map[string]v1.K8sApp{}
		list := &v1.K8sAppList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for _, a := range list.Items {
			rvs[a.Name] = a.ResourceVersion
			before[a.Name] = a
		}

		Expect(oe.StopOperator()).To(Succeed())
		Expect(oe.StartOperator()).To(Succeed())
		Eventually(func() (string, error) { return oe.Op.Config.Get().LocalCluster() }, timeout, poll).ShouldNot(BeEmpty())
		Consistently(appWrites, 4*time.Second, 200*time.Millisecond).Should(Equal(writes))
		// Nor a Kubernetes write: the CRs are untouched.
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for _, a := range list.Items {
			Expect(a.ResourceVersion).To(Equal(rvs[a.Name]), "K8sApp %s was written after the restart:\nbefore %+v\nafter  %+v", a.Name, before[a.Name], a)
		}
		Expect(api.Collisions()).To(BeEmpty())
	})
})

var _ = Describe("the restarts of the last hour", func() {
	It("counts rising restart counts on the CR and in the API, keeps them across an operator restart, and lets them age out", func() {
		ns := freshNamespace()
		rs := workload(ns, "crashy")
		crash := pod(ns, "crashy-0", podOpts{owner: rsOwner(rs), ready: false, restarts: 0})
		old := pod(ns, "crashy-1", podOpts{owner: rsOwner(rs), ready: true, restarts: 4})
		// The Pods join the app with their history: restarts from before it.
		for _, p := range []*corev1.Pod{crash, old} {
			Expect(k8s.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"polycrate_k8sapp_name":"crashy"}}}`)))).To(Succeed())
		}
		a, _ := synced(ns, "crashy")
		a = app(ns, "crashy", func(g Gomega, a *v1.K8sApp) { g.Expect(a.Status.PodsTotal).To(BeEquivalentTo(2)) })
		Expect(a.Status.PodsRestarts).To(BeEquivalentTo(4))
		Expect(a.Status.PodsRestartsLastHour).To(BeZero())

		lastHour := func(want int32) {
			GinkgoHelper()
			app(ns, "crashy", func(g Gomega, a *v1.K8sApp) {
				g.Expect(a.Status.PodsRestartsLastHour).To(Equal(want))
				var sum int32
				for _, b := range a.Status.PodsRestartWindow {
					sum += b.Restarts
				}
				g.Expect(sum).To(Equal(want), "the window %v", a.Status.PodsRestartWindow)
			})
			apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
				g.Expect(r.PodsRestartCountLastHr).To(BeEquivalentTo(want))
			})
		}
		// A crash-looping Pod: each restart counts.
		setPodStatus(crash, false, 1)
		lastHour(1)
		setPodStatus(crash, false, 3)
		lastHour(3)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		Expect(a.Status.PodsRestarts).To(BeEquivalentTo(7))

		// Across a restart of the operator: the window is in the status, and the
		// restarts while no operator watched are counted.
		Expect(oe.StopOperator()).To(Succeed())
		setPodStatus(crash, false, 5)
		Expect(oe.StartOperator()).To(Succeed())
		lastHour(5)

		// The window ages out on its own (a short one here: buckets of 1 s, an
		// horizon of 5 s): a new restart, then nothing but time passing.
		k8sapps.SetRestartWindow(time.Second, 5*time.Second)
		DeferCleanup(k8sapps.SetRestartWindow, k8sapps.RestartBucket, k8sapps.RestartHorizon)
		time.Sleep(5 * time.Second) // the earlier buckets are older than the short horizon
		setPodStatus(crash, false, 6)
		lastHour(1)
		lastHour(0)
		Expect(api.Collisions()).To(BeEmpty())
	})
})

var _ = Describe("K8sApp discovery across configuration changes and downtime", func() {
	updateOC := func(change func(*v1.OperatorConfig)) { specs.UpdateOperatorConfig(k8s, change) }

	It("removes Pod-sourced apps when label discovery is turned off and brings them back when it is on again", func() {
		ns := freshNamespace()
		rs := workload(ns, "toggled")
		pod(ns, "toggled-0", podOpts{app: "toggled", owner: rsOwner(rs), ready: true})
		Expect(k8s.Create(ctx, metaSecret(ns, "kept", metaDoc("kept", "helm", "production", "install", "success")))).To(Succeed())
		synced(ns, "toggled")
		synced(ns, "kept")
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.AppDiscovery.LabelDiscoveryEnabled = ptr.To(false) })
		gone(ns, "toggled")
		absent(ns, "toggled")
		app(ns, "kept", nil) // meta-Secret apps stay
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.AppDiscovery.LabelDiscoveryEnabled = ptr.To(true) })
		synced(ns, "toggled")
	})

	It("deletes the app of a meta-Secret deleted while the operator was stopped", func() {
		ns := freshNamespace()
		sec := metaSecret(ns, "ephemeral", metaDoc("ephemeral", "helm", "production", "install", "success"))
		Expect(k8s.Create(ctx, sec)).To(Succeed())
		a, _ := synced(ns, "ephemeral")
		Expect(oe.StopOperator()).To(Succeed())
		Expect(k8s.Delete(ctx, sec)).To(Succeed())
		Expect(oe.StartOperator()).To(Succeed())
		gone(ns, "ephemeral")
		apiApp(a.Status.APIID, func(g Gomega, r *polycrate.K8sApp) {
			g.Expect(r.Active).To(BeFalse())
			g.Expect(r.Uninstalled).To(BeTrue())
		})
	})
})
