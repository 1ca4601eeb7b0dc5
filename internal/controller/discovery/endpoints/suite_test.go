package endpoints_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	ctx = context.Background()
)

func TestDiscovery(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Endpoint discovery from Ingresses (envtest + emulator)")
}

var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.EndpointDiscovery.IgnoreNamespaces = []string{"kube-system", "ignored"}
}}, func(e *testutil.OperatorEnv) {
	oe, k8s = e, e.K8s
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ignored"}})).To(Succeed())
})

func freshNamespace() string { return specs.Namespace(k8s, "disc") }

func updateOC(change func(*v1.OperatorConfig)) { specs.UpdateOperatorConfig(k8s, change) }
