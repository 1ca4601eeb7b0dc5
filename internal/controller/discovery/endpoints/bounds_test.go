package endpoints_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/endpoints"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

var _ = Describe("Endpoint discovery under hostile sources", func() {
	It("refuses a second host whose Endpoint name collides, with a Warning event, and never loops", func() {
		// Two hosts whose CR names collide (as a birthday search found against the
		// old 24-bit hash; with 80 bits none can be found, so the test forces one).
		restore := endpoints.SetEndpointName(func(h string) string {
			if strings.HasPrefix(h, "collide-") {
				return "collided-name"
			}
			return names.Endpoint(h)
		})
		DeferCleanup(restore)
		ns := freshNamespace()
		on := map[string]string{annotations.Monitor: "true"}
		Expect(k8s.Create(ctx, ingress(ns, "both", "nginx", on, "collide-a.example.com", "collide-b.example.com", "plain.example.com"))).To(Succeed())
		Eventually(func(g Gomega) {
			ep := &v1.Endpoint{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "collided-name"}, ep)).To(Succeed())
			g.Expect(ep.Spec.RemoteAddress).To(Equal("collide-a.example.com")) // the first in the spec keeps it
			g.Expect(ep.Status.Phase).To(Equal("synced"))
			g.Expect(getEndpointOrEmpty(ns, "plain-example-com").Status.Phase).To(Equal("synced"))
		}, timeout, poll).Should(Succeed())
		Eventually(func() bool {
			return warned(ns, v1.ReasonNameCollision, "collide-a.example.com and collide-b.example.com map to the same Endpoint name collided-name")
		}, timeout, poll).Should(BeTrue())

		// No loop: the CR and the API stay still (the loop made 1,600 PUTs a minute).
		writes := func() int { return oe.API.Counters()["endpoints"].Writes }
		specs.Quiet(writes, time.Second)
		before, gen := writes(), getEndpoint(ns, "collided-name").Generation
		Consistently(func() int64 { return getEndpoint(ns, "collided-name").Generation }, 3*time.Second, 200*time.Millisecond).Should(Equal(gen))
		Expect(writes()).To(Equal(before))

		// Another source's host colliding with it: refused too, nothing taken over.
		Expect(k8s.Create(ctx, ingress(ns, "later", "nginx", on, "collide-c.example.com"))).To(Succeed())
		Eventually(func() bool {
			return warned(ns, v1.ReasonNameCollision, "of host collide-c.example.com is taken by another host, of Ingress both")
		}, timeout, poll).Should(BeTrue())
		Consistently(func() string { return getEndpoint(ns, "collided-name").Spec.RemoteAddress }, 2*time.Second, 200*time.Millisecond).Should(Equal("collide-a.example.com"))
		Expect(getEndpoint(ns, "collided-name").Labels[v1.LabelEndpointSourceIngress]).To(Equal("both"))

		// A hand-written Endpoint for another host is never overwritten either.
		hand := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "collided-by-hand"},
			Spec: v1.EndpointSpec{RemoteAddress: "by-hand.example.com"}}
		Expect(k8s.Create(ctx, hand)).To(Succeed())
		restoreHand := endpoints.SetEndpointName(func(h string) string {
			switch {
			case h == "collide-d.example.com":
				return "collided-by-hand"
			case strings.HasPrefix(h, "collide-"):
				return "collided-name"
			}
			return names.Endpoint(h)
		})
		DeferCleanup(restoreHand)
		Expect(k8s.Create(ctx, ingress(ns, "over-hand", "nginx", on, "collide-d.example.com"))).To(Succeed())
		Eventually(func() bool {
			return warned(ns, v1.ReasonNameCollision, "taken by another host, of the hand-written Endpoint collided-by-hand")
		}, timeout, poll).Should(BeTrue())
		Consistently(func() string { return getEndpoint(ns, "collided-by-hand").Spec.RemoteAddress }, 2*time.Second, 200*time.Millisecond).Should(Equal("by-hand.example.com"))
	})

	It("caps the hosts of one source with a Warning event, keeps the first ones, and keeps its annotations bounded", func() {
		ns := freshNamespace()
		extra := 25
		var hosts []string
		for i := range endpoints.MaxHostsPerSource + extra {
			// Long hosts: the source annotation is at its largest.
			hosts = append(hosts, fmt.Sprintf("h%03d.%s.example.com", i, strings.Repeat("x", 200)))
		}
		ing := ingress(ns, "huge", "nginx", map[string]string{annotations.Monitor: "true"}, hosts...)
		Expect(k8s.Create(ctx, ing)).To(Succeed())
		Eventually(func() bool {
			return warned(ns, v1.ReasonTooManyHosts, fmt.Sprintf("names %d hosts; the first %d", len(hosts), endpoints.MaxHostsPerSource))
		}, timeout, poll).Should(BeTrue())
		Eventually(func(g Gomega) {
			got := &networkingv1.Ingress{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ing), got)).To(Succeed())
			ids := got.Annotations[endpoints.AnnotationAPIIDs]
			g.Expect(strings.Count(ids, "=")).To(Equal(endpoints.MaxHostsPerSource))
			g.Expect(len(ids)).To(BeNumerically("<", 64<<10))
		}, 2*timeout, poll).Should(Succeed())
		monitored := map[string]bool{}
		for _, ep := range endpointsIn(ns) {
			monitored[ep.Spec.RemoteAddress] = true
		}
		Expect(monitored).To(HaveLen(endpoints.MaxHostsPerSource))
		Expect(monitored).To(HaveKey(hosts[0]))
		Expect(monitored).To(HaveKey(hosts[endpoints.MaxHostsPerSource-1]))
		Expect(monitored).NotTo(HaveKey(hosts[endpoints.MaxHostsPerSource]))
		// Settled: no retry loop.
		specs.Quiet(func() int { return oe.API.Counters()["endpoints"].Writes }, time.Second)
		Expect(k8s.Delete(ctx, ing)).To(Succeed())
		Eventually(func() int { return len(endpointsIn(ns)) }, 2*timeout, poll).Should(BeZero())
	})

	It("refuses an oversized path and expected body with a Warning event and uses the defaults", func() {
		ns := freshNamespace()
		ann := map[string]string{annotations.Monitor: "true", annotations.Path: "/" + strings.Repeat("p", annotations.MaxPathBytes),
			annotations.ExpectedBody: strings.Repeat("b", 120<<10)}
		Expect(k8s.Create(ctx, ingress(ns, "big-values", "nginx", ann, "big.example.com"))).To(Succeed())
		Eventually(func(g Gomega) {
			ep := getEndpointOrEmpty(ns, "big-example-com")
			g.Expect(ep.Status.Phase).To(Equal("synced"))
			g.Expect(ep.Spec.Path).To(Equal("/"))
			g.Expect(ep.Spec.ExpectedBody).To(BeEmpty())
		}, timeout, poll).Should(Succeed())
		Eventually(func() bool { return warned(ns, v1.ReasonInvalidAnnotation, annotations.Path) }, timeout, poll).Should(BeTrue())
		Eventually(func() bool { return warned(ns, v1.ReasonInvalidAnnotation, annotations.ExpectedBody) }, timeout, poll).Should(BeTrue())
	})
})
