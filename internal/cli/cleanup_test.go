package cli_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envtest runs no Deployment controller: the test writes the replicas a running
// (or stopped) operator would report.
var _ = Describe("cleanup --scale-down", func() {
	It("refuses to remove anything while the operator still runs, and goes on once it stopped", func() {
		ctx := context.Background()
		ns := fmt.Sprintf("scale-down-%d", GinkgoRandomSeed()%100000)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		one := int32(1)
		labels := map[string]string{"app": "op"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "polycrate-operator"}, Spec: appsv1.DeploymentSpec{
			Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "op", Image: "op"}}}}}}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		d.Status.Replicas = 1
		Expect(k8s.Status().Update(ctx, d)).To(Succeed())

		out, _, err := execute(ctx, "cleanup", "--kubeconfig", kubeconfig, "--operator-namespace", ns,
			"--scale-down", "polycrate-operator", "--scale-down-timeout", "2s")
		Expect(err).To(MatchError(ContainSubstring("still runs 1 replica(s) after 2s; nothing was removed")))
		Expect(out).NotTo(ContainSubstring("finalizers from"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		Expect(*d.Spec.Replicas).To(BeZero(), "it was scaled down")

		d.Status.Replicas = 0 // the operator stopped
		Expect(k8s.Status().Update(ctx, d)).To(Succeed())
		out, _, err = execute(ctx, "cleanup", "--kubeconfig", kubeconfig, "--operator-namespace", ns,
			"--scale-down", "polycrate-operator", "--scale-down-timeout", "10s")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("cleanup: removed the operator's finalizers from"))
	})
})
