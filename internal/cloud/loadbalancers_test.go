package cloud_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/cloud"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

// lbService is a Service of type LoadBalancer with TCP ports.
func lbService(ns, name string, annotations map[string]string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP})
	}
	return svc
}

func getService(svc *corev1.Service) *corev1.Service {
	GinkgoHelper()
	out := &corev1.Service{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(svc), out)).To(Succeed())
	return out
}

// instances are the live load balancer instances of a Service in the API.
func instances(svc *corev1.Service) func(Gomega) []polycrate.LoadBalancer {
	return func(g Gomega) []polycrate.LoadBalancer {
		c := oe.Client()
		rows, err := c.LoadBalancers().List(ctx, nil)
		g.Expect(err).NotTo(HaveOccurred())
		var out []polycrate.LoadBalancer
		for _, r := range rows {
			if r.IsDeleted || r.Labels[cloud.LabelServiceUID] != string(svc.UID) {
				continue
			}
			lb, err := c.LoadBalancers().Get(ctx, r.ID)
			g.Expect(err).NotTo(HaveOccurred())
			out = append(out, *lb)
		}
		return out
	}
}

// instance is the Service's one instance.
func instance(svc *corev1.Service) func(Gomega) *polycrate.LoadBalancer {
	return func(g Gomega) *polycrate.LoadBalancer {
		all := instances(svc)(g)
		g.Expect(all).To(HaveLen(1))
		return &all[0]
	}
}

// theInstance waits for the Service's one instance.
func theInstance(svc *corev1.Service) *polycrate.LoadBalancer {
	GinkgoHelper()
	var lb *polycrate.LoadBalancer
	Eventually(func(g Gomega) { lb = instance(svc)(g) }, timeout, poll).Should(Succeed())
	return lb
}

func ingressIP(svc *corev1.Service) func() string {
	return func() string {
		s := getService(svc)
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
}

func nodePorts(svc *corev1.Service) []int32 {
	var out []int32
	for _, p := range getService(svc).Spec.Ports {
		out = append(out, p.NodePort)
	}
	return out
}

func lbWrites() int { return api.Counters()["loadbalancers/instances"].Writes }

// leftAlone: no finalizer, no address, no instance, for a while.
func leftAlone(svc *corev1.Service) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		s := getService(svc)
		g.Expect(s.Finalizers).To(BeEmpty())
		g.Expect(s.Status.LoadBalancer.Ingress).To(BeEmpty())
		g.Expect(instances(svc)(g)).To(BeEmpty())
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
}

var _ = Describe("LoadBalancer Services", func() {
	It("makes a load balancer instance targeting NodeIP:NodePort, writes its address, follows ports and nodes, and deletes it with the Service", func() {
		ns := specs.Namespace(k8s, "lb")
		a, b := createNode("lb", false, ""), createNode("lb", false, "")
		svc := lbService(ns, "web", nil, 80)
		Expect(k8s.Create(ctx, svc)).To(Succeed())

		lb := theInstance(svc)
		np := nodePorts(svc)[0]
		Expect(lb.Ports).To(Equal([]polycrate.LoadBalancerPort{{Port: 80, Name: "p80", Protocol: "TCP", TargetPort: np}}))
		Expect(*lb.Config).To(ContainSubstring(fmt.Sprintf("server %s %s:%d check", a.Name, a.Status.Addresses[0].Address, np)))
		Expect(*lb.Config).To(ContainSubstring(fmt.Sprintf("server %s %s:%d check", b.Name, b.Status.Addresses[0].Address, np)))
		Expect(lb.Labels).To(HaveKeyWithValue(cloud.LabelService, ns+"/web"))
		Expect(*lb.DisplayName).To(Equal(ns + "/web"))

		// The address comes from the API's pool after its delay and lands in the status.
		Eventually(ingressIP(svc), timeout, poll).Should(HavePrefix("198.51.100."))
		Expect(ingressIP(svc)()).To(Equal(theInstance(svc).Address()))
		Expect(getService(svc).Finalizers).To(ContainElement(servicehelper.LoadBalancerCleanupFinalizer))

		By("a second port")
		Eventually(func() error {
			s := getService(svc)
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "p443", Port: 443, Protocol: corev1.ProtocolTCP})
			return k8s.Update(ctx, s)
		}, timeout, poll).Should(Succeed())
		Eventually(func(g Gomega) []int32 {
			var ports []int32
			for _, p := range instance(svc)(g).Ports {
				ports = append(ports, p.Port)
			}
			return ports
		}, timeout, poll).Should(Equal([]int32{80, 443}))

		By("a new node joins, a node goes")
		c := createNode("lb", false, "")
		Eventually(func(g Gomega) string { return *instance(svc)(g).Config }, timeout, poll).Should(ContainSubstring("server " + c.Name + " "))
		Expect(k8s.Delete(ctx, a)).To(Succeed())
		Eventually(func(g Gomega) string { return *instance(svc)(g).Config }, timeout, poll).ShouldNot(ContainSubstring("server " + a.Name + " "))

		By("deleting the Service deletes the instance, then the finalizer lets the Service go")
		id := theInstance(svc).ID
		Expect(k8s.Delete(ctx, svc)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))
		}, timeout, poll).Should(BeTrue())
		got, err := oe.Client().LoadBalancers().Get(ctx, id)
		Expect(polycrate.IsNotFound(err) || (err == nil && got.IsDeleted)).To(BeTrue(), "the instance is deleted in the API")
	})

	It("leaves alone Services annotated ignore and those of another loadBalancerClass, and lets go of one annotated ignore later", func() {
		ns := specs.Namespace(k8s, "lb")
		ignored := lbService(ns, "ignored", map[string]string{v1.AnnotationLoadBalancer: "ignore"}, 80)
		classed := lbService(ns, "classed", nil, 80)
		classed.Spec.LoadBalancerClass = ptr.To("example.com/other")
		managed := lbService(ns, "managed", nil, 80)
		for _, s := range []*corev1.Service{ignored, classed, managed} {
			Expect(k8s.Create(ctx, s)).To(Succeed())
		}
		Eventually(ingressIP(managed), timeout, poll).ShouldNot(BeEmpty())
		leftAlone(ignored)
		leftAlone(classed)

		By("annotated ignore later: the instance is deleted, the address and the finalizer removed")
		Eventually(func() error {
			s := getService(managed)
			s.Annotations = map[string]string{v1.AnnotationLoadBalancer: "ignore"}
			return k8s.Update(ctx, s)
		}, timeout, poll).Should(Succeed())
		Eventually(instances(managed), timeout, poll).Should(BeEmpty())
		Eventually(func(g Gomega) {
			s := getService(managed)
			g.Expect(s.Finalizers).To(BeEmpty())
			g.Expect(s.Status.LoadBalancer.Ingress).To(BeEmpty())
		}, timeout, poll).Should(Succeed())
		leftAlone(managed)
	})

	It("in the opt-in scope manages only Services annotated managed", func() {
		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.CloudController.LoadBalancer.ServiceScope = "opt-in" })
		DeferCleanup(func() {
			specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.CloudController.LoadBalancer.ServiceScope = "all" })
		})
		ns := specs.Namespace(k8s, "lb")
		plain := lbService(ns, "plain", nil, 80)
		optIn := lbService(ns, "opted", map[string]string{v1.AnnotationLoadBalancer: "managed"}, 80)
		Expect(k8s.Create(ctx, plain)).To(Succeed())
		Expect(k8s.Create(ctx, optIn)).To(Succeed())
		Eventually(ingressIP(optIn), timeout, poll).ShouldNot(BeEmpty())
		leftAlone(plain)
	})

	It("makes no API write after a restart, and adopts the instance whose create answer was lost instead of making a second", func() {
		ns := specs.Namespace(k8s, "lb")
		// The API commits the create and the answer is lost: a crash between
		// create and status write looks the same to the operator.
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/loadbalancers/instances/", Method: "POST", Drop: true, AfterCommit: true, Times: 1})).To(Succeed())
		DeferCleanup(func() { Expect(api.SetFaults()).To(Succeed()) })
		svc := lbService(ns, "adopted", nil, 80)
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		Eventually(ingressIP(svc), timeout, poll).ShouldNot(BeEmpty())
		Expect(instances(svc)(Default)).To(HaveLen(1), "adopted, not created twice")

		By("a restart")
		specs.Quiet(lbWrites, time.Second)
		before := api.Counters()["loadbalancers/instances"]
		Expect(oe.StopOperator()).To(Succeed())
		Expect(oe.StartOperator()).To(Succeed())
		// The restarted operator looked at the Service (it read its instance) …
		Eventually(func() int { return api.Counters()["loadbalancers/instances"].Reads }, timeout, poll).Should(BeNumerically(">", before.Reads))
		// … and wrote nothing.
		Consistently(lbWrites, 3*time.Second, 250*time.Millisecond).Should(Equal(before.Writes))
		Expect(instances(svc)(Default)).To(HaveLen(1))
	})

	It("reports bad input and refusals on the Service without a retry storm: SCTP, an API refusal, an exhausted address pool", func() {
		ns := specs.Namespace(k8s, "lb")

		By("SCTP")
		sctp := lbService(ns, "sctp", nil)
		sctp.Spec.Ports = []corev1.ServicePort{{Name: "s", Port: 9999, Protocol: corev1.ProtocolSCTP}}
		Expect(k8s.Create(ctx, sctp)).To(Succeed())
		expectFailure(ns, "sctp", "TCP only")
		Expect(instances(sctp)(Default)).To(BeEmpty())

		By("the API refuses")
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/loadbalancers/instances/", Method: "POST", Status: 403})).To(Succeed())
		refused := lbService(ns, "refused", nil, 80)
		writes := lbWrites()
		Expect(k8s.Create(ctx, refused)).To(Succeed())
		expectFailure(ns, "refused", "403")
		// Backoff (5 s, 10 s, …): at most three attempts in eight seconds.
		Consistently(func() int { return lbWrites() - writes }, 8*time.Second, 250*time.Millisecond).Should(BeNumerically("<=", 3))
		Expect(api.SetFaults()).To(Succeed())
		Eventually(ingressIP(refused), time.Minute, poll).ShouldNot(BeEmpty())

		By("no free address")
		used := 0
		for _, r := range must(oe.Client().LoadBalancers().List(ctx, nil)) {
			if !r.IsDeleted && r.IPAddressValue != nil {
				used++
			}
		}
		api.SetLBPoolSize(used)
		DeferCleanup(func() { api.SetLBPoolSize(0) })
		full := lbService(ns, "full", nil, 80)
		Expect(k8s.Create(ctx, full)).To(Succeed())
		expectFailure(ns, "full", "no free IP address")
		Expect(instances(full)(Default)).To(HaveLen(1))
		Expect(ingressIP(full)()).To(BeEmpty())
		api.SetLBPoolSize(0)
		Eventually(ingressIP(full), time.Minute, poll).ShouldNot(BeEmpty())
		Expect(instances(full)(Default)).To(HaveLen(1))
	})
})

// expectFailure waits for the service controller's Warning event about the
// Service, whose message says why.
func expectFailure(ns, name, says string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		list := &corev1.EventList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		found := false
		for _, e := range list.Items {
			found = found || (e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == "SyncLoadBalancerFailed" && strings.Contains(e.Message, says))
		}
		g.Expect(found).To(BeTrue(), "no SyncLoadBalancerFailed event about %s/%s saying %q", ns, name, says)
	}, time.Minute, poll).Should(Succeed())
}

func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}
