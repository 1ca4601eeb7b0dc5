package discovery_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

var (
	oe    *testutil.OperatorEnv
	k8s   client.Client
	ctx   = context.Background()
	nsSeq int
)

func TestDiscovery(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Endpoint discovery from Ingresses (envtest + emulator)")
}

var _ = BeforeSuite(func() {
	var err error
	oe, err = testutil.StartOperatorEnv(testutil.OperatorEnvOptions{Log: GinkgoLogr, Configure: func(oc *v1.OperatorConfig) {
		oc.Spec.EndpointDiscovery.IgnoreNamespaces = []string{"kube-system", "ignored"}
	}})
	Expect(err).NotTo(HaveOccurred())
	k8s = oe.K8s
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ignored"}})).To(Succeed())
})

var _ = AfterSuite(func() {
	if oe != nil {
		Expect(oe.Stop()).To(Succeed())
	}
})

func freshNamespace() string {
	nsSeq++
	name := fmt.Sprintf("disc-%d", nsSeq)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// updateOC edits the singleton's spec, retrying on conflicts.
func updateOC(change func(*v1.OperatorConfig)) {
	EventuallyWithOffset(1, func() error {
		oc := &v1.OperatorConfig{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: testutil.OperatorNamespace, Name: "default"}, oc); err != nil {
			return err
		}
		change(oc)
		return k8s.Update(ctx, oc)
	}).Should(Succeed())
}
