package apisync_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	opNS    = "polycrate"
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	api *emulator.Server
	op  *operator.Operator
	ctx = context.Background()
)

func TestAPISync(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Endpoint sync to the Polycrate API (envtest + emulator)")
}

// Health reports every 2 s: a spec waits for the report to say "degraded".
var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.APISync.HealthReportIntervalSeconds = 2
}}, func(e *testutil.OperatorEnv) {
	oe, k8s, api, op = e, e.K8s, e.API, e.Op
})

// restartOperator stops the manager and starts a fresh one.
func restartOperator() {
	Expect(oe.StopOperator()).To(Succeed())
	Expect(oe.StartOperator()).To(Succeed())
	op = oe.Op
}

func freshNamespace() string { return specs.Namespace(k8s, "sync") }

func apiClient() *polycrate.Client { return oe.Client() }

// synced waits until the Endpoint is synced and returns it.
func synced(ns, name string) *v1.Endpoint {
	ep := &v1.Endpoint{}
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)).To(Succeed())
		g.Expect(ep.Status.Phase).To(Equal("synced"), ep.Status.Message)
		g.Expect(ep.Status.APIID).NotTo(BeEmpty())
		g.Expect(ep.Status.ObservedGeneration).To(Equal(ep.Generation))
		c := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
	return ep
}

func endpointWrites() int { return api.Counters()["endpoints"].Writes }
