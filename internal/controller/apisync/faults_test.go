package apisync_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

// eventAbout reports whether an event of that type and reason names the object.
func eventAbout(ns, name, typ, reason string) bool {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Type == typ && e.Reason == reason {
			return true
		}
	}
	return false
}

func readyReason(ns, name string) string {
	ep := &v1.Endpoint{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep); err != nil {
		return ""
	}
	if c := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func gone(obj client.Object) {
	GinkgoHelper()
	Eventually(func() bool {
		return client.IgnoreNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)) == nil &&
			k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj) != nil
	}, timeout, poll).Should(BeTrue(), "%s is still there", obj.GetName())
}

// breakSync injects a fault, changes the Endpoint's path and waits for the
// condition reason and its Warning event.
func breakSync(ns string, ep *v1.Endpoint, fault emulator.FaultRule, reason string) {
	GinkgoHelper()
	Expect(api.SetFaults(fault)).To(Succeed())
	DeferCleanup(func() { _ = api.SetFaults() })
	ep.Spec.Path = "/changed-under-" + reason
	Expect(k8s.Update(ctx, ep)).To(Succeed())
	Eventually(func() string { return readyReason(ns, ep.Name) }, timeout, poll).Should(Equal(reason))
	Eventually(func() bool { return eventAbout(ns, ep.Name, corev1.EventTypeWarning, reason) }, timeout, poll).Should(BeTrue())
}

var _ = Describe("Sync under faults", func() {
	It("fires a Warning event when a synced Endpoint turns to an API error", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "turns.example.com"))).To(Succeed())
		ep := synced(ns, "turns-example-com")
		// Leave a settled world (an object in Error would be retried by the next
		// restart or configuration change: a write the restart spec would count).
		DeferCleanup(func() { Expect(k8s.Delete(ctx, ep)).To(Succeed()); gone(ep) })
		breakSync(ns, ep, emulator.FaultRule{Path: "/api/v1/endpoints/*", Method: "PUT", Status: 400}, v1.ReasonAPIError)
	})

	It("fires a Warning event when an outage begins for an Endpoint and a Normal one when it syncs again, not one per retry", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "outage.example.com"))).To(Succeed())
		ep := synced(ns, "outage-example-com")
		breakSync(ns, ep, emulator.FaultRule{Path: "/api/v1/endpoints/*", Method: "PUT", Status: 503}, v1.ReasonAPIUnavailable)
		Expect(eventAbout(ns, ep.Name, corev1.EventTypeNormal, v1.ReasonSynced)).To(BeFalse(), "a first sync is no recovery")
		Expect(api.SetFaults()).To(Succeed())
		synced(ns, ep.Name) // after the backoff (5 s, 10 s …)
		Eventually(func() bool { return eventAbout(ns, ep.Name, corev1.EventTypeNormal, v1.ReasonSynced) }, timeout, poll).Should(BeTrue())
		// One event per transition: the outage's retries made no more.
		list := &eventsv1.EventList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for _, e := range list.Items {
			if e.Regarding.Name == ep.Name && e.Reason == v1.ReasonAPIUnavailable {
				Expect(e.Series).To(BeNil(), "the retries repeated the event")
			}
		}
	})

	It("calls a change parked behind the open circuit breaker pending, never synced, and observes its generation only once the API confirmed it", func() {
		ns := freshNamespace()
		hosts := []string{"parked-a.example.com", "parked-b.example.com", "parked-c.example.com"}
		var eps []*v1.Endpoint
		for _, h := range hosts {
			Expect(k8s.Create(ctx, endpoint(ns, h))).To(Succeed())
		}
		for _, h := range hosts {
			eps = append(eps, synced(ns, names.Endpoint(h)))
		}
		// The API fails everything: the breaker opens.
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/*", Status: 503})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		Eventually(func() bool {
			_, _ = op.Conn.Client().Endpoints().List(ctx, nil) // failures in a row (the syncs' own are spaced by their backoff)
			return op.Conn.Breaker().State().Open
		}, timeout, poll).Should(BeTrue())
		for _, ep := range eps {
			Eventually(func() error {
				got := &v1.Endpoint{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(ep), got); err != nil {
					return err
				}
				got.Spec.Path = "/changed-while-the-api-is-away"
				return k8s.Update(ctx, got)
			}, timeout, poll).Should(Succeed())
		}
		// Parked: Pending, Ready=False/CircuitOpen, the generation not observed —
		// what kubectl's PHASE column and a generation-based health check read.
		parked := func(g Gomega, ep *v1.Endpoint) {
			got := &v1.Endpoint{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal("pending"))
			g.Expect(got.Status.ObservedGeneration).To(BeNumerically("<", got.Generation))
			c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1.ReasonCircuitOpen))
		}
		for _, ep := range eps {
			Eventually(func(g Gomega) { parked(g, ep) }, timeout, poll).Should(Succeed())
		}
		Consistently(func(g Gomega) {
			for _, ep := range eps {
				parked(g, ep)
			}
		}, 3*time.Second, 300*time.Millisecond).Should(Succeed())
		Expect(specs.MetricValue("polycrate_operator_objects", map[string]string{"kind": "Endpoint", "phase": "Pending"})).
			To(BeNumerically(">=", len(eps)))

		// The API is back: the changes reach it, and only then are they synced and observed.
		Expect(api.SetFaults()).To(Succeed())
		for _, ep := range eps {
			Eventually(func(g Gomega) {
				got := &v1.Endpoint{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), got)).To(Succeed())
				g.Expect(got.Status.Phase).To(Equal("synced"))
				g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
				e, err := apiClient().Endpoints().Get(ctx, got.Status.APIID)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(e.Spec.HTTP.Path).To(Equal("/changed-while-the-api-is-away"))
			}, timeout, poll).Should(Succeed())
		}
	})

	It("syncs an Endpoint whose writes failed as soon as writes are served again, though the answered reads kept the breaker closed (a write-only brownout)", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "brownout.example.com"))).To(Succeed())
		ep := synced(ns, "brownout-example-com")
		puts := func() int { return api.Counters()["endpoints"].ByMethod[http.MethodPut] }
		before := puts()
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/*", Method: "WRITE", Status: 503})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		ep.Spec.Path = "/changed-in-the-brownout"
		Expect(k8s.Update(ctx, ep)).To(Succeed())
		// The update fails, and again after its 5 s backoff: its next try is 10 s
		// away. Each try's GET was answered, so the breaker never opened.
		Eventually(puts, timeout, poll).Should(BeNumerically(">=", before+2))
		Expect(readyReason(ns, ep.Name)).To(Equal(v1.ReasonAPIUnavailable))
		Expect(op.Conn.Breaker().State().Open).To(BeFalse())
		Expect(api.SetFaults()).To(Succeed())
		// Another object's write is the first served one: it ends the streak of
		// failing writes, and the waiting Endpoint is woken instead of waiting out
		// its backoff.
		Expect(k8s.Create(ctx, endpoint(ns, "after-the-brownout.example.com"))).To(Succeed())
		Eventually(func(g Gomega) {
			got := &v1.Endpoint{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Phase).To(Equal("synced"))
		}, 6*time.Second, poll).Should(Succeed(), "the Endpoint waited out its backoff")
		e, err := apiClient().Endpoints().Get(ctx, ep.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Spec.HTTP.Path).To(Equal("/changed-in-the-brownout"))
	})

	It("deletes the API object of a CR whose id never reached its status (a crash after the create), found by its natural key", func() {
		ns := freshNamespace()
		host := "crashed.example.com"
		// What a create whose answer was lost leaves behind: the API object, and a
		// CR (with the finalizer discovery declares) without an id. The operator is
		// down while the CR is deleted.
		Expect(oe.StopOperator()).To(Succeed())
		cluster, _ := op.Config.Get().LocalCluster()
		made, err := apiClient().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: names.EndpointAPI(ns, host), RemoteAddress: host,
			K8sCluster: &cluster, CreatedByComponent: "operator"})
		Expect(err).NotTo(HaveOccurred())
		ep := endpoint(ns, host)
		ep.Finalizers = []string{v1.FinalizerEndpointCleanup}
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		Expect(k8s.Delete(ctx, ep)).To(Succeed())
		Expect(oe.StartOperator()).To(Succeed())
		op = oe.Op
		gone(ep)
		_, err = apiClient().Endpoints().Get(ctx, made.ID)
		Expect(polycrate.IsNotFound(err)).To(BeTrue(), "the API object was leaked: %v", err)
	})

	It("retires (never deletes) the K8s app of a K8sApp CR deleted before its id reached the status, and leaves an app the API made alone", func() {
		ns := freshNamespace()
		Expect(oe.StopOperator()).To(Succeed())
		cluster, _ := op.Config.Get().LocalCluster()
		mine, err := apiClient().K8sApps().Create(ctx, polycrate.K8sAppRequest{Name: "crashed-app", Kind: "external", K8sCluster: &cluster,
			Namespace: &ns, Active: polycrate.Ptr(true), Installed: true})
		Expect(err).NotTo(HaveOccurred())
		theirs, err := apiClient().K8sApps().Create(ctx, polycrate.K8sAppRequest{Name: "api-made-app", Kind: "external", K8sCluster: &cluster,
			Active: polycrate.Ptr(true), Installed: true})
		Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{"crashed-app", "api-made-app"} {
			app := &v1.K8sApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{v1.FinalizerK8sAppCleanup}},
				Spec: v1.K8sAppSpec{Kind: "external"}}
			Expect(k8s.Create(ctx, app)).To(Succeed())
			Expect(k8s.Delete(ctx, app)).To(Succeed())
			DeferCleanup(gone, app)
		}
		Expect(oe.StartOperator()).To(Succeed())
		op = oe.Op
		Eventually(func(g Gomega) {
			a, err := apiClient().K8sApps().Get(ctx, mine.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Active).To(BeFalse(), "%+v", a)
			g.Expect(a.Uninstalled).To(BeTrue())
		}, timeout, poll).Should(Succeed())
		a, err := apiClient().K8sApps().Get(ctx, theirs.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Active).To(BeTrue(), "an app the operator never created or adopted was retired")
	})

	It("adopts, never duplicates, an object whose create answer was lost after the API committed it", func() {
		ns := freshNamespace()
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Method: "POST", Drop: true, AfterCommit: true, Times: 1})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		Expect(k8s.Create(ctx, endpoint(ns, "lost-answer.example.com"))).To(Succeed())
		got := synced(ns, names.Endpoint("lost-answer.example.com"))
		rows, err := apiClient().Endpoints().List(ctx, polycrate.Query("name_exact", names.EndpointAPI(ns, "lost-answer.example.com")))
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(1))
		Expect(rows[0].ID).To(Equal(got.Status.APIID))
		Expect(eventAbout(ns, got.Name, corev1.EventTypeNormal, v1.ReasonAdopted)).To(BeTrue())
		Expect(api.Collisions()).To(BeEmpty())
	})

	It("never syncs two CRs into one API object: the second is refused, and deleting it keeps the first's object", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "twice.example.com"))).To(Succeed())
		first := synced(ns, "twice-example-com")
		writes := endpointWrites()
		// A hand-written CR for the same host in the same namespace: the same API name.
		second := endpoint(ns, "twice.example.com")
		second.Name = "twice-by-hand"
		second.Spec.Path = "/mine"
		Expect(k8s.Create(ctx, second)).To(Succeed())
		Eventually(func() string { return readyReason(ns, second.Name) }, timeout, poll).Should(Equal(v1.ReasonNameCollision))
		Eventually(func() bool { return eventAbout(ns, second.Name, corev1.EventTypeWarning, v1.ReasonNameCollision) }, timeout, poll).Should(BeTrue())
		Consistently(endpointWrites, 2*time.Second, 200*time.Millisecond).Should(Equal(writes))
		a, err := apiClient().Endpoints().Get(ctx, first.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Spec.HTTP.Path).To(Equal("/api/health"), "the second CR overwrote the first's API object")

		Expect(k8s.Delete(ctx, second)).To(Succeed())
		gone(second)
		_, err = apiClient().Endpoints().Get(ctx, first.Status.APIID)
		Expect(err).NotTo(HaveOccurred(), "deleting the second CR deleted the first's API object")
	})

	It("never reports a write through a redirecting api_url as done, and re-sends it once the URL is fixed", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "moved.example.com"))).To(Succeed())
		ep := synced(ns, "moved-example-com")
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, oe.APIURL+r.URL.Path, http.StatusMovedPermanently)
		}))
		DeferCleanup(front.Close)
		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.APISync.APIURL = front.URL })
		DeferCleanup(func() {
			specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.APISync.APIURL = oe.APIURL })
		})

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), ep)).To(Succeed())
		ep.Spec.Path = "/after-the-move"
		Expect(k8s.Update(ctx, ep)).To(Succeed())
		fresh := endpoint(ns, "new-while-moved.example.com")
		Expect(k8s.Create(ctx, fresh)).To(Succeed())
		for _, name := range []string{ep.Name, fresh.Name} {
			Eventually(func() string { return readyReason(ns, name) }, timeout, poll).Should(Equal(v1.ReasonAPIRedirect))
		}
		got := &v1.Endpoint{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fresh), got)).To(Succeed())
		Expect(got.Status.APIID).To(BeEmpty())
		Expect(meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady).Message).To(ContainSubstring("api_url redirects to " + oe.APIURL))
		rows, err := apiClient().Endpoints().List(ctx, polycrate.Query("name_exact", names.EndpointAPI(ns, "new-while-moved.example.com")))
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(BeEmpty())

		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.APISync.APIURL = oe.APIURL })
		synced(ns, fresh.Name)
		synced(ns, ep.Name)
		a, err := apiClient().Endpoints().Get(ctx, ep.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Spec.HTTP.Path).To(Equal("/after-the-move"))
		Expect(api.Collisions()).To(BeEmpty())
	})
})

var _ = Describe("Sync failures in the metrics", func() {
	It("counts a refused sync once by kind and reason, and shows its phase in the objects gauge", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, endpoint(ns, "counted.example.com"))).To(Succeed())
		ep := synced(ns, "counted-example-com")
		DeferCleanup(func() { Expect(k8s.Delete(ctx, ep)).To(Succeed()); gone(ep) })
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_objects", map[string]string{"kind": "Endpoint", "phase": "Synced"})
		},
			timeout, poll).Should(BeNumerically(">=", 1))
		before := specs.MetricValue("polycrate_operator_failures_total", map[string]string{"kind": "Endpoint", "reason": v1.ReasonAPIError})
		// Only this endpoint's writes are refused: no other object can fail meanwhile.
		breakSync(ns, ep, emulator.FaultRule{Path: "/api/v1/endpoints/" + ep.Status.APIID + "/*", Method: "PUT", Status: 400}, v1.ReasonAPIError)
		Expect(specs.MetricValue("polycrate_operator_failures_total", map[string]string{"kind": "Endpoint", "reason": v1.ReasonAPIError})).To(Equal(before + 1))
		Eventually(func() float64 {
			return specs.MetricValue("polycrate_operator_objects", map[string]string{"kind": "Endpoint", "phase": "Error"})
		},
			timeout, poll).Should(BeNumerically(">=", 1))
		// The agent tells the API the truth: degraded, and why.
		Eventually(func(g Gomega) {
			health := api.AgentHealth("operator")
			g.Expect(health).NotTo(BeEmpty())
			g.Expect(health[0]["status"]).To(Equal("degraded"))
			g.Expect(fmt.Sprint(health[0]["warnings"])).To(ContainSubstring("Endpoint object(s) in Error"))
		}, timeout, poll).Should(Succeed())
		// The same refusal again (another change): the object stays in the same
		// failure, so nothing more is counted.
		fresh := &v1.Endpoint{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), fresh)).To(Succeed())
		fresh.Spec.Path = "/changed-again"
		Expect(k8s.Update(ctx, fresh)).To(Succeed())
		Consistently(func() float64 {
			return specs.MetricValue("polycrate_operator_failures_total", map[string]string{"kind": "Endpoint", "reason": v1.ReasonAPIError})
		}, 2*time.Second, poll).Should(Equal(before + 1))
		Expect(api.SetFaults()).To(Succeed())
		// Fixed (a refusal waits for a change of the object): synced again, and the
		// report is healthy again.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), fresh)).To(Succeed())
		fresh.Spec.Path = "/fixed"
		Expect(k8s.Update(ctx, fresh)).To(Succeed())
		synced(ns, ep.Name)
		Eventually(func() any { return api.AgentHealth("operator")[0]["status"] }, timeout, poll).Should(Equal("healthy"))
	})
})
