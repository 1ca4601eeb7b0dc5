package cloud_test

import (
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/cloud"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

var nodeSeq atomic.Int64

// createNode creates a Node (tainted as a kubelet with --cloud-provider=external
// registers it, or not) with an InternalIP and the Ready condition, and deletes
// it after the spec.
func createNode(prefix string, tainted bool, providerID string) *corev1.Node {
	GinkgoHelper()
	n := nodeSeq.Add(1)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, n)}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if tainted {
		node.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	// As a kubelet registers it: with its addresses and conditions.
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.1.%d.%d", n/250, n%250+1)},
		{Type: corev1.NodeHostName, Address: node.Name}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	status := node.Status
	Expect(k8s.Create(ctx, node)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, node))).To(Succeed()) })
	if len(node.Status.Addresses) > 0 {
		return node
	}
	node.Status = status
	Expect(k8s.Status().Update(ctx, node)).To(Succeed())
	return node
}

func getNode(name string) *corev1.Node {
	GinkgoHelper()
	n := &corev1.Node{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

func tainted(name string) bool { return cloud.Tainted(getNode(name)) }

// hostCondition is the Host's NodeInitialized condition ("" when absent).
func hostCondition(name string) func(Gomega) string {
	return func(g Gomega) string {
		h := &v1.Host{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, h)).To(Succeed())
		c := meta.FindStatusCondition(h.Status.Conditions, v1.ConditionNodeInitialized)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}
}

func clusterID() string {
	id, err := oe.Op.Config.Get().LocalCluster()
	Expect(err).NotTo(HaveOccurred())
	return id
}

// setPopName renames the workspace's PoP in the API (a platform token's write)
// and waits until a health report brought the new pop_name to the OperatorConfig.
func setPopName(name string) {
	GinkgoHelper()
	sys, err := polycrate.New(polycrate.Options{BaseURL: oe.APIURL, Token: polycrate.StaticToken(emulator.DevSystemToken)})
	Expect(err).NotTo(HaveOccurred())
	pops, err := sys.Pops().List(ctx, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(pops).To(HaveLen(1))
	_, err = sys.Pops().Patch(ctx, pops[0].ID, map[string]any{"name": name})
	Expect(err).NotTo(HaveOccurred())
	oe.Op.Reporter.ReportNow()
	Eventually(func(g Gomega) string {
		oc := &v1.OperatorConfig{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "polycrate", Name: "default"}, oc)).To(Succeed())
		g.Expect(oc.Status.Agent).NotTo(BeNil())
		return oc.Status.Agent.PopName
	}, timeout, poll).Should(Equal(name))
}

var _ = Describe("Node initialization", func() {
	It("initializes a tainted Node only after its Host synced to the API: providerID, region from pop_name, taint removed", func() {
		// The API refuses Hosts for now: the Host cannot sync.
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/hosts/", Method: "POST", Status: 503})).To(Succeed())
		DeferCleanup(func() { Expect(api.SetFaults()).To(Succeed()) })
		node := createNode("init", true, "")

		specs.ExpectEvent(k8s, "default", node.Name, corev1.EventTypeWarning, v1.ReasonWaitingForHostSync)
		Eventually(hostCondition(node.Name), timeout, poll).Should(Equal("False/" + v1.ReasonWaitingForHostSync))
		Consistently(func() bool { return tainted(node.Name) }, 2*time.Second, poll).Should(BeTrue())
		Expect(getNode(node.Name).Spec.ProviderID).To(BeEmpty())

		Expect(api.SetFaults()).To(Succeed())
		want := cloud.ProviderID(clusterID(), node.Name)
		Eventually(func(g Gomega) {
			n := getNode(node.Name)
			g.Expect(cloud.Tainted(n)).To(BeFalse())
			g.Expect(n.Spec.ProviderID).To(Equal(want))
			g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "fra1"))
		}, timeout, poll).Should(Succeed())
		// The Host says so, and the API learns the providerID through the Host.
		Eventually(hostCondition(node.Name), timeout, poll).Should(Equal("True/" + v1.ReasonNodeInitialized))
		Eventually(func(g Gomega) string {
			h := &v1.Host{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node.Name}, h)).To(Succeed())
			return h.Spec.ProviderID
		}, timeout, poll).Should(Equal(want))
		// Addresses stay the kubelet's.
		Expect(getNode(node.Name).Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: node.Status.Addresses[0].Address}))
	})

	It("keeps the taint while the agent has no pop_name, and initializes the Node once it has one", func() {
		setPopName("")
		DeferCleanup(func() { setPopName("fra1") })
		node := createNode("nopop", true, "")
		Eventually(func(g Gomega) string {
			h := &v1.Host{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node.Name}, h)).To(Succeed())
			return h.Status.APIID
		}, timeout, poll).ShouldNot(BeEmpty(), "the Host syncs")
		Eventually(hostCondition(node.Name), timeout, poll).Should(Equal("False/" + v1.ReasonWaitingForPop))
		specs.ExpectEvent(k8s, "default", node.Name, corev1.EventTypeWarning, v1.ReasonWaitingForPop)
		Consistently(func() bool { return tainted(node.Name) }, 2*time.Second, poll).Should(BeTrue())

		setPopName("fra1")
		Eventually(func(g Gomega) {
			n := getNode(node.Name)
			g.Expect(cloud.Tainted(n)).To(BeFalse())
			g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "fra1"))
		}, timeout, poll).Should(Succeed())
	})

	It("leaves a Node alone whose providerID another provider set: condition on the Host, event on the Node", func() {
		node := createNode("foreign", true, "hcloud://4711")
		Eventually(hostCondition(node.Name), timeout, poll).Should(Equal("False/" + v1.ReasonForeignProviderID))
		specs.ExpectEvent(k8s, "default", node.Name, corev1.EventTypeWarning, v1.ReasonForeignProviderID)
		Consistently(func(g Gomega) {
			n := getNode(node.Name)
			g.Expect(cloud.Tainted(n)).To(BeTrue())
			g.Expect(n.Spec.ProviderID).To(Equal("hcloud://4711"))
			g.Expect(n.Labels).NotTo(HaveKey(corev1.LabelTopologyRegion))
		}, 2*time.Second, poll).Should(Succeed())
	})
})
