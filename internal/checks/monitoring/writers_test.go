package monitoring_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/monitoring"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

// Two writers share an Endpoint's status.conditions: the sync (the reconcile
// kit's status patcher: Ready) and the checks (the monitoring status writer:
// Available, status.monitoring). A merge patch replaces the list whole, so a
// writer that computed its change from a stale copy must not send the list as
// it saw it.
var _ = Describe("Two status writers on one Endpoint", func() {
	It("keep each other's condition when each writes from a stale copy, in either order", func() {
		ns := specs.Namespace(k8s, "writers")
		ep := webEndpoint(ns, "/writers")
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		synced(ep)
		Eventually(monitored(ep), timeout, poll).Should(state("up"))
		// Only the two writers of this spec from here on.
		Expect(oe.StopOperator()).To(Succeed())
		DeferCleanup(func() {
			Expect(oe.StartOperator()).To(Succeed())
			op = oe.Op
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, ep))).To(Succeed())
		})
		deps := controller.Deps{Client: k8s, APIReader: k8s, Recorder: events.NewFakeRecorder(16)}

		// sync sets Ready on its copy through the kit's status patcher.
		sync := func(copy *v1.Endpoint, status metav1.ConditionStatus, reason string) {
			p := deps.StatusPatcher(copy)
			controller.SetCondition(&copy.Status.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: status,
				Reason: reason, Message: "set by the sync writer of the spec", ObservedGeneration: copy.Generation})
			wrote, err := p.Patch(ctx, copy)
			Expect(err).NotTo(HaveOccurred())
			Expect(wrote).To(BeTrue())
		}
		// check writes a check state from its copy, and after a conflict
		// again from a fresh read (as the status writer does after its
		// back-off).
		check := func(copy *v1.Endpoint, state, errorName string) {
			now := metav1.Now()
			mon := v1.EndpointMonitoringStatus{State: state, LastCheckAt: &now, ErrorName: errorName, Message: "set by the check writer of the spec"}
			if monitoring.WriteCheckState(ctx, deps, copy, mon) {
				fresh := &v1.Endpoint{}
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), fresh)).To(Succeed())
				Expect(monitoring.WriteCheckState(ctx, deps, fresh, mon)).To(BeFalse(), "a second conflict with no other writer")
			}
		}
		both := func(ready metav1.ConditionStatus, readyReason string, available metav1.ConditionStatus, availableReason string) {
			GinkgoHelper()
			got := &v1.Endpoint{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), got)).To(Succeed())
			r := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady)
			a := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionAvailable)
			Expect(r).NotTo(BeNil(), "the sync writer's Ready was erased: %+v", got.Status.Conditions)
			Expect(a).NotTo(BeNil(), "the check writer's Available was erased: %+v", got.Status.Conditions)
			Expect([]string{string(r.Status), r.Reason, string(a.Status), a.Reason}).To(Equal(
				[]string{string(ready), readyReason, string(available), availableReason}))
			Expect(got.Status.Monitoring).NotTo(BeNil())
			Expect(got.Status.Monitoring.State).To(Equal(map[metav1.ConditionStatus]string{metav1.ConditionTrue: "up", metav1.ConditionFalse: "down"}[available]))
		}

		By("the sync first, then the checks from the copy read before it")
		stale := &v1.Endpoint{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), stale)).To(Succeed())
		sync(stale.DeepCopy(), metav1.ConditionFalse, "APIUnavailable")
		check(stale.DeepCopy(), "down", "connection_refused")
		both(metav1.ConditionFalse, "APIUnavailable", metav1.ConditionFalse, "ConnectionRefused")

		By("the checks first, then the sync from the copy read before them")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), stale)).To(Succeed())
		check(stale.DeepCopy(), "up", "")
		sync(stale.DeepCopy(), metav1.ConditionTrue, v1.ReasonSynced)
		both(metav1.ConditionTrue, v1.ReasonSynced, metav1.ConditionTrue, v1.ReasonCheckSucceeded)

		By("a sync that removes its condition from a stale copy leaves the other's")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), stale)).To(Succeed())
		check(stale.DeepCopy(), "down", "timeout")
		copy := stale.DeepCopy()
		p := deps.StatusPatcher(copy)
		meta.RemoveStatusCondition(&copy.Status.Conditions, v1.ConditionReady)
		_, err := p.Patch(ctx, copy)
		Expect(err).NotTo(HaveOccurred())
		got := &v1.Endpoint{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), got)).To(Succeed())
		Expect(meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady)).To(BeNil())
		Expect(meta.FindStatusCondition(got.Status.Conditions, v1.ConditionAvailable)).To(
			HaveField("Reason", "Timeout"))
	})
})
