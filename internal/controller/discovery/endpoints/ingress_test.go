package endpoints_test

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/endpoints"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

func ingress(ns, name, class string, ann map[string]string, hosts ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	if class != "" {
		ing.Spec.IngressClassName = ptr.To(class)
	}
	pt := networkingv1.PathTypePrefix
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "svc", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}})
	}
	return ing
}

func endpointsIn(ns string) []v1.Endpoint {
	list := &v1.EndpointList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

func endpointNames(ns string) []string {
	var names []string
	for _, e := range endpointsIn(ns) {
		names = append(names, e.Name)
	}
	return names
}

func getEndpoint(ns, name string) *v1.Endpoint {
	ep := &v1.Endpoint{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)).To(Succeed())
	return ep
}

func warned(ns, reason, contains string) bool {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, e := range list.Items {
		if e.Reason == reason && strings.Contains(e.Note, contains) {
			return true
		}
	}
	return false
}

var _ = Describe("Ingress discovery", func() {
	It("Beispiel 9: one Endpoint CR per host with the seed's per-host table, synced to the API, the source annotated", func() {
		ns := freshNamespace()
		ann := map[string]string{annotations.Monitor: "true", annotations.Path: "/health", annotations.ExpectedStatus: "200",
			annotations.HostConfig: `{"api.example.com": {"path": "/api/health", "expected_status": [200]},
			  "events.example.com": {"path": "/health", "expected_status": [202]},
			  "data.example.com": {"path": "/readyz", "expected_status": [200], "timeout": 10}}`}
		ing := ingress(ns, "multi-service-platform", "nginx", ann, "api.example.com", "events.example.com", "data.example.com", "booking.example.com")
		Expect(k8s.Create(ctx, ing)).To(Succeed())

		want := map[string]struct {
			path    string
			status  int32
			timeout int32
		}{"api-example-com": {"/api/health", 200, 5}, "events-example-com": {"/health", 202, 5},
			"data-example-com": {"/readyz", 200, 10}, "booking-example-com": {"/health", 200, 5}}
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(HaveLen(4))
		for name, w := range want {
			ep := getEndpoint(ns, name)
			Expect(ep.Spec.Path).To(Equal(w.path), name)
			Expect(ep.Spec.ExpectedStatusCodes).To(Equal([]int32{w.status}), name)
			Expect(ep.Spec.Timeout).To(Equal(w.timeout), name)
			Expect(ep.Spec.Interval).To(BeEquivalentTo(60))
			Expect(*ep.Spec.TLS).To(BeTrue())
			Expect(ep.Spec.RemotePort).To(BeEquivalentTo(443))
			Expect(ep.Labels).To(HaveKeyWithValue(v1.LabelDiscovered, "true"))
			Expect(ep.Labels).To(HaveKeyWithValue(v1.LabelEndpointSourceIngress, "multi-service-platform"))
			Expect(ep.OwnerReferences).To(ContainElement(HaveField("Name", "multi-service-platform")))
		}
		// Synced to the API: four endpoints, and the Ingress carries their ids and the sync time.
		Eventually(func(g Gomega) {
			got := &networkingv1.Ingress{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ing), got)).To(Succeed())
			g.Expect(got.Finalizers).To(ContainElement(v1.FinalizerIngressDiscovery))
			g.Expect(strings.Split(got.Annotations[endpoints.AnnotationAPIIDs], ",")).To(HaveLen(4))
			g.Expect(got.Annotations[endpoints.AnnotationSyncedAt]).NotTo(BeEmpty())
		}, timeout, poll).Should(Succeed())
		rows, err := oe.Client().Endpoints().List(ctx, polycrate.Query("name_exact", names.EndpointAPI(ns, "data.example.com")))
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(1))
		detail, err := oe.Client().Endpoints().Get(ctx, rows[0].ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(detail.Spec.HTTP.Path).To(Equal("/readyz"))
		Expect(detail.Spec.HTTP.Timeout).To(Equal(10))
	})

	It("propagates an annotation change to the API", func() {
		ns := freshNamespace()
		ing := ingress(ns, "webapp", "nginx", map[string]string{annotations.Monitor: "true"}, "app.example.com")
		Expect(k8s.Create(ctx, ing)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "app-example-com").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
		Eventually(func() error {
			got := &networkingv1.Ingress{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ing), got); err != nil {
				return err
			}
			got.Annotations[annotations.Path] = "/api/v2/health"
			return k8s.Update(ctx, got)
		}, timeout, poll).Should(Succeed())
		id := getEndpoint(ns, "app-example-com").Status.APIID
		Eventually(func() string {
			d, err := oe.Client().Endpoints().Get(ctx, id)
			if err != nil {
				return ""
			}
			return d.Spec.HTTP.Path
		}, timeout, poll).Should(Equal("/api/v2/health"))
	})

	It("leaves the spec's defaults out of its apply, declares what differs, and takes a changed default back", func() {
		ns := freshNamespace()
		ing := ingress(ns, "defaults", "nginx", map[string]string{annotations.Monitor: "true"}, "defaults.example.com")
		Expect(k8s.Create(ctx, ing)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "defaults-example-com").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
		ep := getEndpoint(ns, "defaults-example-com")
		// The API server filled in the defaults; the apply declared only the rest.
		Expect(ep.Spec.Path).To(Equal("/"))
		Expect(ep.Spec.TLS).To(Equal(ptr.To(true)))
		Expect(ep.Spec.RemotePort).To(BeEquivalentTo(443))
		Expect(ep.Spec.Interval).To(BeEquivalentTo(60))
		Expect(ep.Spec.ExpectedStatusCodes).To(Equal([]int32{200}))
		Expect(appliedSpecFields(ep)).To(ConsistOf("displayName", "remoteAddress"))

		setAnnotation(ing, annotations.Path, "/healthz")
		Eventually(func() string { return getEndpointOrEmpty(ns, "defaults-example-com").Spec.Path }, timeout, poll).Should(Equal("/healthz"))
		Expect(appliedSpecFields(getEndpoint(ns, "defaults-example-com"))).To(ConsistOf("displayName", "remoteAddress", "path"))

		// Back to the default: declared once more, as the cached value differs
		// (the cache holds no managedFields to tell the operator's own value from
		// another manager's, which only a declared field takes back).
		setAnnotation(ing, annotations.Path, "")
		Eventually(func() string { return getEndpointOrEmpty(ns, "defaults-example-com").Spec.Path }, timeout, poll).Should(Equal("/"))

		// Someone else changes a default: the forced apply declares it and takes it back.
		other := getEndpoint(ns, "defaults-example-com")
		Expect(k8s.Patch(ctx, other, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"interval":15}}`)), client.FieldOwner("someone"))).To(Succeed())
		Eventually(func() int32 { return getEndpointOrEmpty(ns, "defaults-example-com").Spec.Interval }, timeout, poll).Should(BeEquivalentTo(60))
		Expect(appliedSpecFields(getEndpoint(ns, "defaults-example-com"))).To(ContainElement("interval"))
	})

	It("annotation mode needs the opt-in; 'false' excludes; auto mode takes the rest — switched live", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, ingress(ns, "plain", "nginx", nil, "plain.example.com"))).To(Succeed()) // Beispiel 1 without the annotation
		Expect(k8s.Create(ctx, ingress(ns, "internal-admin", "nginx", map[string]string{annotations.Monitor: "false"}, "admin.internal.local"))).To(Succeed())
		Consistently(func() []string { return endpointNames(ns) }, 2*time.Second, 200*time.Millisecond).Should(BeEmpty())

		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.Mode = annotations.ModeAuto })
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(ConsistOf("plain-example-com"))
		Consistently(func() []string { return endpointNames(ns) }, time.Second, 200*time.Millisecond).Should(ConsistOf("plain-example-com"))

		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.Mode = annotations.ModeAnnotation })
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(BeEmpty())
		ingressFinalizerGone(client.ObjectKey{Namespace: ns, Name: "plain"})
	})

	It("turning endpoint discovery off removes the Endpoints, their API objects and the finalizer; on again brings them back", func() {
		ns := freshNamespace()
		ing, id := syncedIngress(ns, "switched", "switched.example.com", "switched-example-com")

		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.Enabled = ptr.To(false) })
		DeferCleanup(func() { updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.Enabled = nil }) })
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(BeEmpty())
		ingressFinalizerGone(client.ObjectKeyFromObject(ing))
		apiEndpointGone(id)

		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.Enabled = ptr.To(true) })
		Eventually(func() string { return getEndpointOrEmpty(ns, "switched-example-com").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
	})

	It("filters by ingress class (spec.ingressClassName or the legacy annotation) and by namespace", func() {
		ns := freshNamespace()
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.IngressClasses = []string{"nginx"} })
		DeferCleanup(func() { updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.IngressClasses = nil }) })
		on := map[string]string{annotations.Monitor: "true"}
		Expect(k8s.Create(ctx, ingress(ns, "traefik", "traefik", on, "t.example.com"))).To(Succeed())
		legacy := ingress(ns, "legacy-class", "", map[string]string{annotations.Monitor: "true", "kubernetes.io/ingress.class": "nginx"}, "l.example.com")
		Expect(k8s.Create(ctx, legacy)).To(Succeed())
		Expect(k8s.Create(ctx, ingress("ignored", "in-ignored-ns", "nginx", on, "i.example.com"))).To(Succeed())
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(ConsistOf("l-example-com"))
		Consistently(func() []string { return endpointNames("ignored") }, time.Second, 200*time.Millisecond).Should(BeEmpty())
	})

	It("reports an invalid annotation on the Ingress and uses the default", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, ingress(ns, "typo", "nginx", map[string]string{annotations.Monitor: "true", annotations.Timeout: "30s"}, "typo.example.com"))).To(Succeed())
		Eventually(func() int32 { return getEndpointOrEmpty(ns, "typo-example-com").Spec.Timeout }, timeout, poll).Should(BeEquivalentTo(5))
		Eventually(func() bool { return warned(ns, v1.ReasonInvalidAnnotation, `polycrate_endpoint_timeout="30s"`) }, timeout, poll).Should(BeTrue())
	})

	It("gives a host to the oldest Ingress and warns the other", func() {
		ns := freshNamespace()
		on := map[string]string{annotations.Monitor: "true"}
		Expect(k8s.Create(ctx, ingress(ns, "first", "nginx", on, "shared.example.com"))).To(Succeed())
		Eventually(func() string {
			return getEndpointOrEmpty(ns, "shared-example-com").Labels[v1.LabelEndpointSourceIngress]
		}, timeout, poll).Should(Equal("first"))
		// Same second or not: "first" is older (creation time, then name).
		Expect(k8s.Create(ctx, ingress(ns, "second", "nginx", map[string]string{annotations.Monitor: "true", annotations.Path: "/other"}, "shared.example.com"))).To(Succeed())
		Eventually(func() bool { return warned(ns, v1.ReasonHostClaimed, "Ingress first") }, timeout, poll).Should(BeTrue())
		Expect(getEndpoint(ns, "shared-example-com").Labels[v1.LabelEndpointSourceIngress]).To(Equal("first"))
		Expect(getEndpoint(ns, "shared-example-com").Spec.Path).To(Equal("/"))
	})

	It("deletes the Endpoints and their API objects before the Ingress goes", func() {
		ns := freshNamespace()
		ing, id := syncedIngress(ns, "doomed", "doomed.example.com", "doomed-example-com")
		Expect(k8s.Delete(ctx, ing)).To(Succeed())
		Eventually(func() bool {
			return k8s.Get(ctx, client.ObjectKeyFromObject(ing), &networkingv1.Ingress{}) != nil
		}, timeout, poll).Should(BeTrue(), "the Ingress is stuck")
		Expect(endpointNames(ns)).To(BeEmpty())
		_, err := oe.Client().Endpoints().Get(ctx, id)
		Expect(polycrate.IsNotFound(err)).To(BeTrue(), "API endpoint left behind: %v", err)
	})

	It("finishes a deletion made while the operator was stopped when it returns", func() {
		ns := freshNamespace()
		ing, id := syncedIngress(ns, "offline", "offline.example.com", "offline-example-com")

		Expect(oe.StopOperator()).To(Succeed())
		Expect(k8s.Delete(ctx, ing)).To(Succeed())
		Consistently(func(g Gomega) {
			got := &networkingv1.Ingress{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ing), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp).NotTo(BeNil())
			g.Expect(got.Finalizers).To(ContainElement(v1.FinalizerIngressDiscovery))
		}, time.Second, 200*time.Millisecond).Should(Succeed(), "the finalizer must hold the Ingress while nobody runs it")
		_, err := oe.Client().Endpoints().Get(ctx, id)
		Expect(err).NotTo(HaveOccurred(), "the API endpoint must outlive the stopped operator")

		Expect(oe.StartOperator()).To(Succeed())
		Eventually(func() bool {
			return k8s.Get(ctx, client.ObjectKeyFromObject(ing), &networkingv1.Ingress{}) != nil
		}, timeout, poll).Should(BeTrue(), "the returning operator did not finish the deletion")
		Expect(endpointNames(ns)).To(BeEmpty())
		apiEndpointGone(id)
	})

	It("deletes the Endpoints of an Ingress removed outright while the operator was stopped when it returns", func() {
		ns := freshNamespace()
		ing, id := syncedIngress(ns, "vanished", "vanished.example.com", "vanished-example-com")
		kept, keptID := syncedIngress(ns, "kept", "kept.example.com", "kept-example-com")

		Expect(oe.StopOperator()).To(Succeed())
		// Gone without the operator's finalizer (removed by hand): nothing is
		// left in the cache to queue its pass but its Endpoint's event of the
		// returning operator's initial list — the sweep runs minutes later.
		got := &networkingv1.Ingress{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ing), got)).To(Succeed())
		got.Finalizers = nil
		Expect(k8s.Update(ctx, got)).To(Succeed())
		Expect(k8s.Delete(ctx, got)).To(Succeed())
		Eventually(func() bool { return k8s.Get(ctx, client.ObjectKeyFromObject(ing), &networkingv1.Ingress{}) != nil }, timeout, poll).Should(BeTrue())

		Expect(oe.StartOperator()).To(Succeed())
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(ConsistOf("kept-example-com"),
			"the orphan of the vanished Ingress was not deleted at the restart")
		apiEndpointGone(id)
		_, err := oe.Client().Endpoints().Get(ctx, keptID)
		Expect(err).NotTo(HaveOccurred(), "the Endpoint of the Ingress that stayed must stay in the API")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(kept), &networkingv1.Ingress{})).To(Succeed())
	})

	It("honours the deprecated K8sApp label, moves it to the annotation and removes it", func() {
		ns := freshNamespace()
		ing := ingress(ns, "old-style", "nginx", map[string]string{annotations.Monitor: "true"}, "old.example.com")
		ing.Labels = map[string]string{v1.LabelK8sAppNameDeprecated: "my-app"}
		Expect(k8s.Create(ctx, ing)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "old-example-com").Spec.K8sAppName }, timeout, poll).Should(Equal("my-app"))
		Eventually(func(g Gomega) {
			got := &networkingv1.Ingress{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ing), got)).To(Succeed())
			g.Expect(got.Labels).NotTo(HaveKey(v1.LabelK8sAppNameDeprecated))
			g.Expect(got.Annotations).To(HaveKeyWithValue(annotations.K8sAppName, "my-app"))
		}, timeout, poll).Should(Succeed())
	})

	It("deletes a discovered Endpoint whose source is gone at once (the sweep is the safety net), and never touches others", func() {
		ns := freshNamespace()
		// E.g. created by a replica that resumed after a pause, for a source
		// deleted meanwhile: its event maps to the gone source, whose reconcile
		// deletes it — not the sweep, minutes later.
		stale := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost-example-com",
			Labels: map[string]string{v1.LabelDiscovered: "true", v1.LabelEndpointSourceIngress: "ghost"}},
			Spec: v1.EndpointSpec{RemoteAddress: "ghost.example.com"}}
		manual := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manual"}, Spec: v1.EndpointSpec{RemoteAddress: "manual.example.com"}}
		Expect(k8s.Create(ctx, stale)).To(Succeed())
		Expect(k8s.Create(ctx, manual)).To(Succeed())
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(ConsistOf("manual"))
		// The sweep finds nothing more to do, and leaves the manual one alone.
		_, err := oe.Op.Sweep.Once(ctx)
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() []string { return endpointNames(ns) }, time.Second, poll).Should(ConsistOf("manual"))
	})
})

// syncedIngress creates a monitored Ingress with one host and waits until its
// Endpoint CR is in the API; it returns the Ingress and the API id.
func syncedIngress(ns, name, host, endpoint string) (*networkingv1.Ingress, string) {
	ing := ingress(ns, name, "nginx", map[string]string{annotations.Monitor: "true"}, host)
	ExpectWithOffset(1, k8s.Create(ctx, ing)).To(Succeed())
	EventuallyWithOffset(1, func() string { return getEndpointOrEmpty(ns, endpoint).Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
	return ing, getEndpointOrEmpty(ns, endpoint).Status.APIID
}

func ingressFinalizerGone(key client.ObjectKey) {
	EventuallyWithOffset(1, func() []string {
		got := &networkingv1.Ingress{}
		_ = k8s.Get(ctx, key, got)
		return got.Finalizers
	}, timeout, poll).ShouldNot(ContainElement(v1.FinalizerIngressDiscovery))
}

func apiEndpointGone(id string) {
	EventuallyWithOffset(1, func() bool {
		_, err := oe.Client().Endpoints().Get(ctx, id)
		return polycrate.IsNotFound(err)
	}, timeout, poll).Should(BeTrue(), "API endpoint %s left behind", id)
}

func getEndpointOrEmpty(ns, name string) *v1.Endpoint {
	ep := &v1.Endpoint{}
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)
	if ep.Labels == nil {
		ep.Labels = map[string]string{}
	}
	return ep
}

// appliedSpecFields are the spec fields discovery's apply declared (its entry in
// the Endpoint's managedFields).
func appliedSpecFields(ep *v1.Endpoint) []string {
	for _, m := range ep.ManagedFields {
		if m.Manager != v1.FieldOwner || m.Operation != metav1.ManagedFieldsOperationApply || m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]any `json:"f:spec"`
		}
		ExpectWithOffset(1, json.Unmarshal(m.FieldsV1.Raw, &fields)).To(Succeed())
		var out []string
		for k := range fields.Spec {
			out = append(out, strings.TrimPrefix(k, "f:"))
		}
		return out
	}
	Fail("no apply of " + v1.FieldOwner + " in the managedFields")
	return nil
}

// setAnnotation sets (or, with "", removes) an annotation of an Ingress.
func setAnnotation(ing *networkingv1.Ingress, key, value string) {
	EventuallyWithOffset(1, func() error {
		got := &networkingv1.Ingress{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ing), got); err != nil {
			return err
		}
		if value == "" {
			delete(got.Annotations, key)
		} else {
			got.Annotations[key] = value
		}
		return k8s.Update(ctx, got)
	}, timeout, poll).Should(Succeed())
}
