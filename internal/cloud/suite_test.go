package cloud_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	api *emulator.Server
	ctx = context.Background()
)

func TestCloud(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cloud controller: node initialization and load balancers (envtest + emulator + k8s.io/cloud-provider's controllers)")
}

// The cloud controller on, with load balancers in the default scope (all);
// health reports every 2 s.
var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.APISync.HealthReportIntervalSeconds = 2
	oc.Spec.CloudController.Enabled = true
}}, func(e *testutil.OperatorEnv) {
	oe, k8s, api = e, e.K8s, e.API
})
