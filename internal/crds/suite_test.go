package crds_test

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

// One control plane for the package: the Gateway API, cert-manager and Velero CRDs
// are preinstalled; the operator's own CRDs are installed by the tests through
// crds.Install, which is what they test first.
var (
	env *envtest.Environment
	cfg *rest.Config
	k8s client.Client
	ctx context.Context
)

func TestCRDsIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CRD install and schema suite (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	ctx = context.Background()
	env, cfg, err = testutil.Start(testutil.Options{ThirdPartyCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
