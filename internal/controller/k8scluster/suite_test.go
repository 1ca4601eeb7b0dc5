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
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
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

var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{}, func(e *testutil.OperatorEnv) {
	oe, env, cfg, k8s = e, e.Env, e.Config, e.K8s
})
