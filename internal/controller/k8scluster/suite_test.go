package k8scluster_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// ns is the operator's namespace: K8sClusters and their Secrets live there.
const ns = testutil.OperatorNamespace

var (
	oe  *testutil.OperatorEnv
	env *envtest.Environment
	cfg *rest.Config
	k8s client.Client
	ctx = context.Background()
)

func TestK8sCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8sCluster: external clusters (envtest + the operator)")
}

var _ = BeforeSuite(func() {
	var err error
	oe, err = testutil.StartOperatorEnv(testutil.OperatorEnvOptions{Log: GinkgoLogr})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, k8s = oe.Env, oe.Config, oe.K8s
})

var _ = AfterSuite(func() {
	if oe != nil {
		Expect(oe.Stop()).To(Succeed())
	}
})
