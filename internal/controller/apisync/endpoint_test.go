package apisync_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

func endpoint(ns, host string) *v1.Endpoint {
	return &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.Endpoint(host),
		Labels: map[string]string{v1.LabelDiscovered: "true"}},
		Spec: v1.EndpointSpec{DisplayName: host, RemoteAddress: host, RemotePort: 443, Kind: "http", TLS: ptr.To(true),
			Path: "/api/health", Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}}}
}

func hasEvent(ns, reason string) bool {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, e := range list.Items {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

var _ = Describe("Endpoint sync", func() {
	It("creates the API endpoint with the contract's mapping", func() {
		ns := freshNamespace()
		ep := endpoint(ns, "app.example.com")
		ep.Spec.ExpectedStatusCodes = []int32{200, 204}
		ep.Spec.ExpectedBody = `"database":"connected"`
		ep.Spec.K8sAppName = "shop"
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		got := synced(ns, "app-example-com")
		Expect(got.Finalizers).To(ContainElement(v1.FinalizerEndpointCleanup))
		Expect(got.Status.ConfigHash).NotTo(BeEmpty())
		Expect(got.Status.LastSyncedAt).NotTo(BeNil())
		Expect(got.Status.K8sAppName).To(Equal("shop"))

		a, err := apiClient().Endpoints().Get(ctx, got.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Name).To(Equal(names.EndpointAPI(ns, "app.example.com")))
		Expect(*a.DisplayName).To(Equal("app.example.com"))
		Expect(a.RemoteAddress).To(Equal("app.example.com"))
		Expect(*a.RemotePort).To(Equal(443))
		Expect(a.Kind).To(Equal("http"))
		Expect(a.Spec.HTTP.Path).To(Equal("/api/health"))
		Expect(a.Spec.HTTP.TLS).To(BeTrue())
		Expect(a.Spec.HTTP.Timeout).To(Equal(5))
		Expect(a.Spec.HTTP.Interval).To(Equal(60))
		Expect(a.Spec.HTTP.ExpectedStatusCode).To(Equal(200))
		Expect(a.Spec.HTTP.AcceptedStatusCodes).To(Equal([]int{200, 204}))
		cluster, _ := op.Config.Get().LocalCluster()
		Expect(a.K8sCluster.ID).To(Equal(cluster))
		Expect(*a.CreatedByComponent).To(Equal("operator"))
		Expect(a.Annotations).To(HaveKeyWithValue("polycrate.io/expected-body", `"database":"connected"`))
		Expect(a.Annotations).To(HaveKeyWithValue("polycrate.io/k8sapp-name", "shop"))
		Expect(a.Labels).To(HaveKeyWithValue(v1.LabelDiscovered, "true"))
	})

	It("updates the API on a change, and writes nothing when nothing changed", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "shop.example.com"))).To(Succeed())
		first := synced(ns, "shop-example-com")

		ep := &v1.Endpoint{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(first), ep)).To(Succeed())
		ep.Spec.Path = "/api/v2/health"
		Expect(k8s.Update(ctx, ep)).To(Succeed())
		Eventually(func() string {
			a, err := apiClient().Endpoints().Get(ctx, first.Status.APIID)
			Expect(err).NotTo(HaveOccurred())
			return a.Spec.HTTP.Path
		}, timeout, poll).Should(Equal("/api/v2/health"))
		second := synced(ns, "shop-example-com")
		Expect(second.Status.APIID).To(Equal(first.Status.APIID))
		Expect(second.Status.ConfigHash).NotTo(Equal(first.Status.ConfigHash))

		// A label change re-reconciles; the payload is the same: no API write.
		writes := endpointWrites()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(first), ep)).To(Succeed())
		ep.Labels["touched"] = "yes"
		Expect(k8s.Update(ctx, ep)).To(Succeed())
		Consistently(endpointWrites, 2*time.Second, 200*time.Millisecond).Should(Equal(writes))
	})

	It("adopts an API endpoint that already exists (a crash between create and status write) instead of duplicating it", func() {
		ns := freshNamespace()
		pre, err := apiClient().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: names.EndpointAPI(ns, "crash.example.com"),
			RemoteAddress: "crash.example.com"})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, endpoint(ns, "crash.example.com"))).To(Succeed())
		got := synced(ns, "crash-example-com")
		Expect(got.Status.APIID).To(Equal(pre.ID))
		Eventually(func() bool { return hasEvent(ns, v1.ReasonAdopted) }, timeout, poll).Should(BeTrue())
		Expect(api.Collisions()).To(BeEmpty())
		a, err := apiClient().Endpoints().Get(ctx, pre.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Spec.HTTP.Path).To(Equal("/api/health")) // brought in line with the CR
	})

	It("repairs an endpoint deleted in the API, found with one list request", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "repair.example.com"))).To(Succeed())
		old := synced(ns, "repair-example-com")
		Expect(apiClient().Endpoints().Delete(ctx, old.Status.APIID)).To(Succeed())
		// Synced a minute before the pass's listing (a pass leaves what was
		// written since its listing began to the next pass).
		old.Status.LastSyncedAt = &metav1.Time{Time: time.Now().Add(-time.Minute)}
		Expect(k8s.Status().Update(ctx, old)).To(Succeed())
		// The pass reads the CRs from the operator's cache: it must hold the update.
		Eventually(func(g Gomega) {
			cached := &v1.Endpoint{}
			g.Expect(op.Servers.Reader.Get(ctx, client.ObjectKeyFromObject(old), cached)).To(Succeed())
			g.Expect(cached.Status.LastSyncedAt).NotTo(BeNil())
			g.Expect(cached.Status.LastSyncedAt.Equal(old.Status.LastSyncedAt)).To(BeTrue())
		}, timeout, poll).Should(Succeed())

		reads := api.Counters()["endpoints"].ByMethod["GET"]
		op.Syncs["Endpoint"].Repair(ctx)
		Eventually(func() string {
			ep := &v1.Endpoint{}
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(old), ep)
			return ep.Status.APIID
		}, timeout, poll).ShouldNot(Equal(old.Status.APIID))
		got := synced(ns, "repair-example-com")
		// The pass's one list, one GET confirming the loss, one lookup by name before
		// creating — not a GET per endpoint.
		Expect(api.Counters()["endpoints"].ByMethod["GET"] - reads).To(BeNumerically("<=", 3))
		_, err := apiClient().Endpoints().Get(ctx, got.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { return hasEvent(ns, v1.ReasonRecreated) }, timeout, poll).Should(BeTrue())
	})

	It("deletes the API endpoint when the CR is deleted", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "gone.example.com"))).To(Succeed())
		got := synced(ns, "gone-example-com")
		Expect(k8s.Delete(ctx, got)).To(Succeed())
		Eventually(func() bool {
			return k8s.Get(ctx, client.ObjectKeyFromObject(got), &v1.Endpoint{}) != nil
		}, timeout, poll).Should(BeTrue())
		_, err := apiClient().Endpoints().Get(ctx, got.Status.APIID)
		Expect(polycrate.IsNotFound(err)).To(BeTrue(), "API endpoint still there: %v", err)
	})

	It("refuses bad input with a condition and one Warning event, without a retry storm", func() {
		ns := freshNamespace()
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Method: "POST", Status: 400})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		posts := api.Counters()["endpoints"].ByMethod["POST"]
		bad := endpoint(ns, "bad.example.com")
		Expect(k8s.Create(ctx, bad)).To(Succeed())
		// Leave a settled world for the restart test (its pending retry would be a write).
		DeferCleanup(func() { Expect(k8s.Delete(ctx, bad)).To(Succeed()); gone(bad) })
		Eventually(func(g Gomega) {
			ep := &v1.Endpoint{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bad-example-com"}, ep)).To(Succeed())
			g.Expect(ep.Status.Phase).To(Equal("error"))
			c := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1.ReasonAPIError))
		}, timeout, poll).Should(Succeed())
		Eventually(func() bool { return hasEvent(ns, v1.ReasonAPIError) }, timeout, poll).Should(BeTrue())
		Consistently(func() int { return api.Counters()["endpoints"].ByMethod["POST"] - posts }, 3*time.Second, 300*time.Millisecond).Should(BeNumerically("<=", 1))
	})

	It("retries a transient failure with backoff and then syncs", func() {
		ns := freshNamespace()
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Method: "POST", Status: 503, Times: 1})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		Expect(k8s.Create(ctx, endpoint(ns, "flaky.example.com"))).To(Succeed())
		synced(ns, "flaky-example-com")
	})

	It("writes nothing to the API after a restart when nothing changed", func() {
		ns := freshNamespace()
		for _, h := range []string{"r1.example.com", "r2.example.com", "r3.example.com"} {
			Expect(k8s.Create(ctx, endpoint(ns, h))).To(Succeed())
		}
		for _, n := range []string{"r1-example-com", "r2-example-com", "r3-example-com"} {
			synced(ns, n)
		}
		specs.Quiet(endpointWrites, time.Second) // what earlier specs left in flight has landed
		writes := endpointWrites()
		rvs := func() map[string]string {
			list := &v1.EndpointList{}
			Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			out := map[string]string{}
			for _, ep := range list.Items {
				out[ep.Name] = ep.ResourceVersion
			}
			return out
		}
		before := rvs()
		ocRV := func() string {
			oc := &v1.OperatorConfig{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc)).To(Succeed())
			return oc.ResourceVersion
		}
		Eventually(func() metav1.ConditionStatus { // the first run's conditions are settled
			oc := &v1.OperatorConfig{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc)).To(Succeed())
			if c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionReady); c != nil {
				return c.Status
			}
			return ""
		}, timeout, poll).Should(Equal(metav1.ConditionTrue))
		specs.Quiet(func() int { n, _ := strconv.Atoi(ocRV()); return n }, time.Second)
		beforeOC := ocRV()
		restartOperator()
		Eventually(func() (string, error) { return op.Config.Get().LocalCluster() }, timeout, poll).ShouldNot(BeEmpty())
		Consistently(endpointWrites, 3*time.Second, 300*time.Millisecond).Should(Equal(writes))
		Expect(rvs()).To(Equal(before), "an Endpoint CR was written after the restart (status flapping while the configuration loads?)")
		// The OperatorConfig's conditions do not go Unknown and back on a restart.
		Expect(ocRV()).To(Equal(beforeOC), "the OperatorConfig's status was written on a restart")
		Expect(api.Collisions()).To(BeEmpty())
	})

	It("links the endpoint to its K8sApp in the API once the app has an API id", func() {
		ns := freshNamespace()
		ep := endpoint(ns, "linked.example.com")
		ep.Spec.K8sAppName = "shop"
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		first := synced(ns, "linked-example-com")
		a, err := apiClient().Endpoints().Get(ctx, first.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.K8sApp).To(BeNil()) // unclaimed until the app is synced

		cluster, _ := op.Config.Get().LocalCluster()
		app, err := apiClient().K8sApps().Create(ctx, polycrate.K8sAppRequest{Name: "shop", Kind: "external", K8sCluster: &cluster})
		Expect(err).NotTo(HaveOccurred())
		// The app's CR (written by hand here) is synced by the K8sApp sync, which
		// adopts the API app of the same name in this cluster.
		cr := &v1.K8sApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: v1.K8sAppSpec{Kind: "external"}}
		Expect(k8s.Create(ctx, cr)).To(Succeed())
		Eventually(func() string {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(cr), cr)
			return cr.Status.APIID
		}, timeout, poll).Should(Equal(app.ID))
		Eventually(func() string {
			a, err := apiClient().Endpoints().Get(ctx, first.Status.APIID)
			if err != nil || a.K8sApp == nil {
				return ""
			}
			return a.K8sApp.ID
		}, timeout, poll).Should(Equal(app.ID))
	})
})
