package apisync_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

const (
	opNS    = "polycrate"
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	env     *envtest.Environment
	cfg     *rest.Config
	k8s     client.Client
	api     *emulator.Server
	apiURL  string
	op      *operator.Operator
	stopMgr context.CancelFunc
	mgrDone chan struct{}
	ctx     = context.Background()
	nsSeq   int
)

func TestAPISync(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Endpoint sync to the Polycrate API (envtest + emulator)")
}

var _ = BeforeSuite(func() {
	var err error
	env, cfg, err = testutil.Start(testutil.Options{OwnCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	api, err = emulator.New(emulator.Config{})
	Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(api.Handler())
	apiURL = ts.URL
	DeferCleanup(ts.Close)

	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNS}})).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: "polycrate-api-creds"},
		StringData: map[string]string{"token": emulator.DevAgentToken}})).To(Succeed())
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: "default"}}
	oc.Spec.APISync.APIURL = apiURL
	oc.Spec.LocalCluster.ClusterName = "sync-test"
	Expect(k8s.Create(ctx, oc)).To(Succeed())
	startOperator()
	Eventually(func() (string, error) { return op.Config.Get().LocalCluster() }, timeout, poll).ShouldNot(BeEmpty())
})

// startOperator runs a fresh manager with the operator (also to simulate a restart).
func startOperator() {
	mgr, err := manager.New(cfg, manager.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0", OperatorNamespace: opNS, Logger: GinkgoLogr,
		SkipNameValidation: true})
	Expect(err).NotTo(HaveOccurred())
	op, err = operator.Setup(mgr, operator.Options{Namespace: opNS, Version: "0.0.1-test", RepairInterval: time.Hour})
	Expect(err).NotTo(HaveOccurred())
	var mctx context.Context
	mctx, stopMgr = context.WithCancel(ctx)
	mgrDone = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
}

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func freshNamespace() string {
	nsSeq++
	name := fmt.Sprintf("sync-%d", nsSeq)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

func apiClient() *polycrate.Client {
	c, err := polycrate.New(polycrate.Options{BaseURL: apiURL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	Expect(err).NotTo(HaveOccurred())
	return c
}

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
