package preflight_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polycrate/polycrate-operator/internal/preflight"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

var (
	env      *envtest.Environment
	adminCfg *rest.Config
	k8s      client.Client
	ctx      = context.Background()
)

func TestPreflight(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "preflight: seed 004's checklist against clusters that pass and miss each row (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, adminCfg, err = testutil.Start(testutil.Options{OwnCRDs: true, ThirdPartyCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(adminCfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// check runs the checklist as the given identity (nil: admin).
func check(cfg *rest.Config, o preflight.Options) *preflight.Report {
	GinkgoHelper()
	if cfg == nil {
		cfg = adminCfg
	}
	if o.Namespace == "" {
		o.Namespace = "shop"
	}
	o.Now = time.Now
	return (&preflight.Checker{Config: cfg, Opts: o}).Run(ctx)
}

// rowOf is the report's row of a topic.
func rowOf(rep *preflight.Report, topic string) preflight.Row {
	GinkgoHelper()
	for _, r := range rep.Rows {
		if r.Topic == topic {
			return r
		}
	}
	Fail("no row " + topic)
	return preflight.Row{}
}
