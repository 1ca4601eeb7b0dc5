package operator_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	ns           = "polycrate"
	otherToken   = "globex-agent-token"
	testVersion  = "0.0.7-test"
	secretName   = "polycrate-api-creds"
	wrongToken   = "not-a-valid-token-31337"
	apiTimeout   = 30 * time.Second
	pollInterval = 100 * time.Millisecond
)

var (
	env    *envtest.Environment
	cfg    *rest.Config
	k8s    client.Client
	api    *emulator.Server
	apiURL string
	op     *operator.Operator
	cancel context.CancelFunc
	ctx    = context.Background()
	// logLevels receives every log level the cluster record asks for.
	logLevels = make(chan int, 10)
)

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "OperatorConfig, agent identity and local cluster (envtest + emulator)")
}

var _ = BeforeSuite(func() {
	var err error
	env, cfg, err = testutil.Start(testutil.Options{OwnCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}})).To(Succeed())

	seed, err := emulator.ParseSeed(emulator.DefaultSeedYAML)
	Expect(err).NotTo(HaveOccurred())
	seed.Pops = append(seed.Pops, emulator.SeedPop{Name: "nbg1"})
	seed.Organizations = append(seed.Organizations, emulator.SeedOrganization{Name: "globex",
		Workspaces: []emulator.SeedWorkspace{{Name: "globex-prod", Pop: "nbg1", Tokens: []string{otherToken}}}})
	api, err = emulator.New(emulator.Config{Seed: seed, AgentSilenceThreshold: 2 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(api.Handler())
	apiURL = ts.URL
	var apiCtx context.Context
	apiCtx, cancel = context.WithCancel(ctx)
	go api.Run(apiCtx)
	DeferCleanup(ts.Close)

	mgr, err := manager.New(cfg, manager.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0", OperatorNamespace: ns,
		Logger: GinkgoLogr})
	Expect(err).NotTo(HaveOccurred())
	op, err = operator.Setup(mgr, operator.Options{Namespace: ns, Version: testVersion, UserAgent: "polycrate-operator/" + testVersion,
		ErrorReportInterval: time.Second, SetLogLevel: func(l int) { logLevels <- l }, PreflightDelay: time.Hour})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(apiCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func operatorConfig(namespace string) *v1.OperatorConfig {
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "default"}}
	oc.Spec.APISync.APIURL = apiURL
	oc.Spec.APISync.HealthReportIntervalSeconds = 1
	return oc
}

func getOC() *v1.OperatorConfig {
	oc := &v1.OperatorConfig{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, oc)).To(Succeed())
	return oc
}

// condition waits for a condition's status and reason on the singleton.
func condition(typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	var c *metav1.Condition
	EventuallyWithOffset(1, func(g Gomega) {
		oc := &v1.OperatorConfig{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, oc)).To(Succeed())
		c = meta.FindStatusCondition(oc.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "no %s condition yet", typ)
		g.Expect(c.Status).To(Equal(status), "%s: %s", typ, c.Message)
		g.Expect(c.Reason).To(Equal(reason), "%s: %s", typ, c.Message)
	}, apiTimeout, pollInterval).Should(Succeed())
	return c
}

// updateOC changes the singleton's spec, retrying on conflicts with the
// controller's status writes.
func updateOC(change func(*v1.OperatorConfig)) { specs.UpdateOperatorConfig(k8s, change) }

func setToken(data map[string][]byte) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}}
	_, err := ctrl.CreateOrUpdate(ctx, k8s, s, func() error { s.Data = data; return nil })
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

func warningEvent(namespace, reason string) {
	expectEvent(namespace, "default", corev1.EventTypeWarning, reason)
}

// expectEvent waits for an event of a type and reason about the named object.
func expectEvent(namespace, name, typ, reason string) {
	GinkgoHelper()
	specs.ExpectEvent(k8s, namespace, name, typ, reason)
}

func eventReasons(namespace string) []string {
	list := &eventsv1.EventList{}
	ExpectWithOffset(1, k8s.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

func apiClient(token string) *polycrate.Client {
	c, err := polycrate.New(polycrate.Options{BaseURL: apiURL, Token: polycrate.StaticToken(token)})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return c
}

// Ordered: there is one OperatorConfig singleton and one API, and the story builds on itself.
var _ = Describe("the operator as an agent of the Polycrate API", Ordered, func() {
	It("runs without an OperatorConfig and discovers nothing", func() {
		Consistently(op.Config.Get, time.Second, pollInterval).Should(BeNil())
		Expect(op.Conn.Client()).To(BeNil())
	})

	It("ignores an OperatorConfig outside its namespace, with a condition and a Warning event", func() {
		Expect(k8s.Create(ctx, operatorConfig("elsewhere"))).To(Succeed())
		Eventually(func(g Gomega) {
			oc := &v1.OperatorConfig{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "default"}, oc)).To(Succeed())
			c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1.ReasonNotSingleton))
			g.Expect(c.Message).To(ContainSubstring(`"polycrate"`))
		}, apiTimeout, pollInterval).Should(Succeed())
		warningEvent("elsewhere", v1.ReasonNotSingleton)
		Expect(op.Config.Get()).To(BeNil())
	})

	It("says exactly what is wrong with the token: no Secret, no key, an empty token, a rejected token", func() {
		Expect(k8s.Create(ctx, operatorConfig(ns))).To(Succeed())
		Eventually(op.Config.Get, apiTimeout).ShouldNot(BeNil())

		c := condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonSecretNotFound)
		Expect(c.Message).To(ContainSubstring("Secret polycrate/polycrate-api-creds"))
		warningEvent(ns, v1.ReasonSecretNotFound)

		setToken(map[string][]byte{"api-key": []byte(emulator.DevAgentToken)})
		c = condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonSecretKeyMissing)
		Expect(c.Message).To(ContainSubstring(`no key "token"`))
		Expect(c.Message).To(ContainSubstring("its keys: api-key"))
		// Every transition of the condition is a Warning event, not only the first.
		warningEvent(ns, v1.ReasonSecretKeyMissing)

		setToken(map[string][]byte{"token": []byte("  \n")})
		condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonTokenEmpty)
		warningEvent(ns, v1.ReasonTokenEmpty)

		setToken(map[string][]byte{"token": []byte(wrongToken)})
		c = condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonUnauthorized)
		Expect(c.Message).To(ContainSubstring("401"))
		condition(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonUnauthorized)
		warningEvent(ns, v1.ReasonUnauthorized)

		// A token without a workspace (here: a platform token) is refused with 403.
		setToken(map[string][]byte{"token": []byte(emulator.DevSystemToken)})
		c = condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonForbidden)
		Expect(c.Message).To(ContainSubstring("No workspace found"))
		warningEvent(ns, v1.ReasonForbidden)
	})

	It("with a valid token: connected, the workspace resolved from the token, registered as an operator agent", func() {
		setToken(map[string][]byte{"token": []byte(emulator.DevAgentToken)}) // rotation: no restart
		condition(v1.ConditionAPIConnected, metav1.ConditionTrue, v1.ReasonConnected)
		condition(v1.ConditionWorkspaceResolved, metav1.ConditionTrue, v1.ReasonResolved)
		oc := getOC()
		Expect(oc.Status.APISync).NotTo(BeNil())
		Expect(oc.Status.APISync.WorkspaceName).To(Equal("production"))
		Expect(oc.Status.APISync.OrganizationName).To(Equal("acme-corp"))
		Expect(oc.Status.APISync.WorkspaceID).NotTo(BeEmpty())
		Expect(oc.Status.APISync.ResolvedAt).NotTo(BeNil())

		ks := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks)).To(Succeed())
		Expect(oc.Status.Agent).NotTo(BeNil())
		Expect(oc.Status.Agent.PopName).To(Equal("fra1"))
		Expect(oc.Status.Agent.PopID).NotTo(BeEmpty())
		Expect(oc.Status.Agent.EndpointMonitoringMode).To(Equal("auto"))
		agent, err := apiClient(emulator.DevAgentToken).Agents().Get(ctx, oc.Status.Agent.AgentID)
		Expect(err).NotTo(HaveOccurred())
		Expect(agent.Kind).To(Equal("operator"))
		Expect(*agent.Version).To(Equal(testVersion))
		Expect(*agent.ReportedAgentID).To(Equal("polycrate-operator-" + string(ks.UID)))

		// No cluster in the workspace and no cluster_name: none is created.
		c := condition(v1.ConditionLocalClusterRegistered, metav1.ConditionFalse, v1.ReasonLocalClusterNotCreated)
		_, gateErr := op.Config.Get().LocalCluster()
		Expect(gateErr).To(MatchError(liveconfig.ErrNoLocalCluster))
		Expect(c.Message).To(ContainSubstring("cluster_name is not set"))
		Expect(apiClient(emulator.DevAgentToken).K8sClusters().List(ctx, nil)).To(BeEmpty())
		condition(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonConnected)

		// The status is stable: later reports write nothing.
		rv := getOC().ResourceVersion
		Consistently(func() string { return getOC().ResourceVersion }, 3*time.Second, 500*time.Millisecond).Should(Equal(rv))
	})

	It("creates the local cluster when cluster_name is set, and reports its own version as the K8s app polycrate-operator", func() {
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.LocalCluster.ClusterName = "my-workspace" })
		condition(v1.ConditionLocalClusterRegistered, metav1.ConditionTrue, v1.ReasonLocalClusterRegistered)
		oc := getOC()
		Expect(oc.Status.LocalCluster.ClusterName).To(Equal("my-workspace"))
		Expect(oc.Status.LocalCluster.Source).To(Equal("created"))
		// A reconcile that sees no local cluster in status (a cache older than its own
		// last write, or a status lost to a restore) never calls the cluster this
		// process created "adopted".
		Eventually(func() error {
			cur := getOC()
			cur.Status.LocalCluster = nil
			return k8s.Status().Update(ctx, cur)
		}, apiTimeout, pollInterval).Should(Succeed())
		Eventually(func() string {
			if st := getOC().Status.LocalCluster; st != nil {
				return st.Source + "/" + st.ClusterID
			}
			return ""
		}, apiTimeout, pollInterval).Should(Equal("created/" + oc.Status.LocalCluster.ClusterID))
		Expect(eventReasons(ns)).NotTo(ContainElement(v1.ReasonLocalClusterAdopted))

		c := apiClient(emulator.DevAgentToken)
		clusters, err := c.K8sClusters().List(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(clusters).To(HaveLen(1))
		Expect(clusters[0].ID).To(Equal(oc.Status.LocalCluster.ClusterID))
		// Syncs that need k8s_cluster may now proceed.
		Eventually(func() (string, error) { return op.Config.Get().LocalCluster() }, apiTimeout).Should(Equal(clusters[0].ID))
		cluster, err := c.K8sClusters().Get(ctx, clusters[0].ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(cluster.Kind).To(Equal("generic"))
		Expect(*cluster.KubernetesVersion).To(HavePrefix("v1.37"))

		app, err := c.FindK8sApp(ctx, "polycrate-operator", cluster.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(app).NotTo(BeNil())
		detail, err := c.K8sApps().Get(ctx, app.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(*detail.InstalledVersion).To(Equal(testVersion))
		Expect(detail.PodsTotal).To(Equal(0)) // no operator Pods in envtest (yet)

		// Its own Pods are counted (refreshed on every reconcile, at least every 5 minutes).
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "polycrate-operator-abc",
			Labels: map[string]string{"app.kubernetes.io/name": "polycrate-operator"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "polycrate-operator:test"}}}}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "operator", RestartCount: 2, Image: "polycrate-operator:test", ImageID: "x"}}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		updateOC(func(oc *v1.OperatorConfig) { oc.Annotations = map[string]string{"pods": "1"} })
		Eventually(func(g Gomega) {
			d, err := c.K8sApps().Get(ctx, app.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.PodsTotal).To(Equal(1))
			g.Expect(d.PodsReady).To(Equal(1))
			g.Expect(d.PodsRestartCountTotal).To(Equal(2))
		}, apiTimeout, pollInterval).Should(Succeed())
		// A restart alone (total and ready unchanged) reaches the API too.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Status.ContainerStatuses[0].RestartCount = 5
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		updateOC(func(oc *v1.OperatorConfig) { oc.Annotations = map[string]string{"pods": "restarted"} })
		Eventually(func(g Gomega) {
			d, err := c.K8sApps().Get(ctx, app.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.PodsRestartCountTotal).To(Equal(5))
			g.Expect(d.PodsTotal).To(Equal(1))
		}, apiTimeout, pollInterval).Should(Succeed())

		// The rollout extension wants the seed's OPERATOR_BLOCK_VERSION here.
		Eventually(func() *v1.OperatorVersionStatus { return getOC().Status.OperatorVersion }, apiTimeout).Should(
			Equal(&v1.OperatorVersionStatus{Installed: testVersion, Desired: "0.1.0"}))
		Expect(api.Collisions()).To(BeEmpty())
	})

	It("runs the provided-cluster checklist: condition, status, and the summary on the API's cluster record", func() {
		op.Preflight.RunNow()
		// envtest has no StorageClass: a hard requirement is missing.
		condition(v1.ConditionPreflightPassed, metav1.ConditionFalse, v1.ReasonPreflightMissing)
		oc := getOC()
		Expect(oc.Status.Preflight).NotTo(BeNil())
		Expect(oc.Status.Preflight.Failed).To(BeTrue())
		Expect(oc.Status.Preflight.Summary).To(HaveSuffix("hard requirements missing: CSI / StorageClass"))
		Expect(oc.Status.Preflight.Problems).To(ContainElement(And(HaveField("Topic", "CSI / StorageClass"), HaveField("Verdict", "missing"))))
		c := apiClient(emulator.DevAgentToken)
		annotation := func() string {
			cl, err := c.K8sClusters().Get(ctx, oc.Status.LocalCluster.ClusterID)
			if err != nil {
				return err.Error()
			}
			v, _ := cl.Annotations[v1.AnnotationPreflight].(string)
			return v
		}
		Eventually(annotation, apiTimeout, pollInterval).Should(Equal(oc.Status.Preflight.Summary))

		// A default StorageClass arrives; the next run passes.
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "rancher.io/local-path"}
		Expect(k8s.Create(ctx, sc)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, sc)).To(Succeed()) })
		op.Preflight.RunNow()
		condition(v1.ConditionPreflightPassed, metav1.ConditionTrue, v1.ReasonPreflightPassed)
		Expect(getOC().Status.Preflight.Summary).To(HaveSuffix("every hard requirement holds"))
		Eventually(annotation, apiTimeout, pollInterval).Should(HaveSuffix("every hard requirement holds"))
	})

	It("follows a rotated token to another workspace and adopts that workspace's cluster instead of creating one", func() {
		existing, err := apiClient(otherToken).K8sClusters().Create(ctx, polycrate.K8sClusterRequest{Kind: "generic", Name: "globex-cluster"})
		Expect(err).NotTo(HaveOccurred())
		setToken(map[string][]byte{"token": []byte(otherToken)})
		Eventually(func() string {
			if st := getOC().Status.APISync; st != nil {
				return st.WorkspaceName
			}
			return ""
		}, apiTimeout, pollInterval).Should(Equal("globex-prod"))
		Eventually(func(g Gomega) {
			st := getOC().Status.LocalCluster
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.ClusterID).To(Equal(existing.ID))
			g.Expect(st.Source).To(Equal("adopted"))
			g.Expect(st.ClusterName).To(Equal("globex-cluster")) // the API's cluster wins over cluster_name
		}, apiTimeout, pollInterval).Should(Succeed())
		clusters, err := apiClient(otherToken).K8sClusters().List(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(clusters).To(HaveLen(1))
		setToken(map[string][]byte{"token": []byte(emulator.DevAgentToken)})
		Eventually(func() string { return getOC().Status.APISync.WorkspaceName }, apiTimeout).Should(Equal("production"))
		condition(v1.ConditionLocalClusterRegistered, metav1.ConditionTrue, v1.ReasonLocalClusterRegistered)
	})

	It("accepts workspace_id and organization_id of a version before 0.29 strictly, ignores them, and says so", func() {
		condition(v1.ConditionSpecCurrent, metav1.ConditionTrue, v1.ReasonSpecCurrent)
		wsID := getOC().Status.APISync.WorkspaceID
		// The old manifest's fields, patched as `kubectl apply` sends them: strict
		// field validation.
		patch := []byte(`{"spec":{"api_sync":{"workspace_id":"550e8400-e29b-41d4-a716-446655440000","organization_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}}}`)
		Expect(k8s.Patch(ctx, getOC(), client.RawPatch(types.MergePatchType, patch), client.FieldValidation("Strict"))).To(Succeed())

		c := condition(v1.ConditionSpecCurrent, metav1.ConditionFalse, v1.ReasonDeprecatedFieldIgnored)
		Expect(c.Message).To(ContainSubstring("api_sync.workspace_id (550e8400-e29b-41d4-a716-446655440000) is ignored since 0.29; the workspace comes from the token (production, " + wsID + ")"))
		Expect(c.Message).To(ContainSubstring("api_sync.organization_id (6ba7b810-9dad-11d1-80b4-00c04fd430c8) is ignored since 0.29"))
		warningEvent(ns, v1.ReasonDeprecatedFieldIgnored)
		// Ignored: the workspace is still the token's, everything else stays as it was.
		Consistently(func(g Gomega) {
			oc := getOC()
			g.Expect(oc.Status.APISync.WorkspaceID).To(Equal(wsID))
			g.Expect(oc.Status.APISync.WorkspaceName).To(Equal("production"))
			g.Expect(meta.IsStatusConditionTrue(oc.Status.Conditions, v1.ConditionReady)).To(BeTrue())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		// Removed, as the seed says they can be: the condition turns True again.
		patch = []byte(`{"spec":{"api_sync":{"workspace_id":null,"organization_id":null}}}`)
		Expect(k8s.Patch(ctx, getOC(), client.RawPatch(types.MergePatchType, patch), client.FieldValidation("Strict"))).To(Succeed())
		condition(v1.ConditionSpecCurrent, metav1.ConditionTrue, v1.ReasonSpecCurrent)
	})

	It("rides out an API outage: conditions say so, the agent turns CRITICAL with a downtime, and all recovers", func() {
		agentID := getOC().Status.Agent.AgentID
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/agent/health/", Status: 503})).To(Succeed())
		c := condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonAPIUnavailable)
		Expect(c.Message).To(ContainSubstring("503"))
		warningEvent(ns, v1.ReasonAPIUnavailable)
		// The workspace stays known while the API is down.
		condition(v1.ConditionWorkspaceResolved, metav1.ConditionTrue, v1.ReasonResolved)

		sys := apiClient(emulator.DevSystemToken)
		Eventually(func(g Gomega) {
			a, err := sys.Agents().Get(ctx, agentID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.State).To(Equal("CRITICAL"))
		}, apiTimeout, pollInterval).Should(Succeed())
		downtimes, err := sys.Downtimes().List(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(downtimes).To(ContainElement(HaveField("IsActive", BeTrue())))

		errorReportsBefore := api.Counters()["agent/errors"].Writes
		Expect(api.SetFaults()).To(Succeed())
		condition(v1.ConditionAPIConnected, metav1.ConditionTrue, v1.ReasonConnected)
		expectEvent(ns, "default", corev1.EventTypeNormal, v1.ReasonConnected) // the recovery, as an event
		// Once the API is back, the outage is reported to it (rate-limited, batched).
		Eventually(func() int { return api.Counters()["agent/errors"].Writes }, apiTimeout, pollInterval).Should(BeNumerically(">", errorReportsBefore))
		Eventually(op.Errors.Pending, apiTimeout, pollInterval).Should(BeZero())
		condition(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonConnected)
		Eventually(func(g Gomega) {
			a, err := sys.Agents().Get(ctx, agentID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.State).To(Equal("OK"))
			ds, err := sys.Downtimes().List(ctx, nil)
			g.Expect(err).NotTo(HaveOccurred())
			ours := 0
			for _, d := range ds {
				affected, _ := json.Marshal(d.AffectedObjects)
				if strings.Contains(string(affected), agentID) { // (the globex agent left behind above is rightly still down)
					ours++
					g.Expect(d.IsActive).To(BeFalse(), "the downtime of our agent is still open")
				}
			}
			g.Expect(ours).To(BeNumerically(">=", 1))
		}, apiTimeout, pollInterval).Should(Succeed())
	})

	It("names a redirecting api_url, an unreachable one and an untrusted certificate, and trusts ca_certificate", func() {
		// http:// in front of an https API: a redirect is never followed (a write
		// would turn into a GET and be lost); the condition names the target.
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, apiURL+r.URL.Path, http.StatusMovedPermanently)
		}))
		DeferCleanup(front.Close)
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.APISync.APIURL = front.URL })
		c := condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonAPIRedirect)
		Expect(c.Message).To(ContainSubstring("api_url redirects to " + apiURL + "/api/v1/agent/health/"))
		warningEvent(ns, v1.ReasonAPIRedirect)

		tlsAPI := httptest.NewTLSServer(api.Handler())
		DeferCleanup(tlsAPI.Close)
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.APISync.APIURL = tlsAPI.URL })
		c = condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonInvalidCACertificate)
		Expect(c.Message).To(ContainSubstring("ca_certificate"))
		warningEvent(ns, v1.ReasonInvalidCACertificate)

		caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsAPI.Certificate().Raw}))
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.APISync.CACertificate = caPEM })
		condition(v1.ConditionAPIConnected, metav1.ConditionTrue, v1.ReasonConnected)

		updateOC(func(oc *v1.OperatorConfig) {
			oc.Spec.APISync.CACertificate = "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n"
		})
		c = condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonInvalidCACertificate)
		Expect(c.Message).To(ContainSubstring("api_sync.ca_certificate is invalid"))

		updateOC(func(oc *v1.OperatorConfig) {
			oc.Spec.APISync.APIURL, oc.Spec.APISync.CACertificate = "http://127.0.0.1:1", ""
		})
		c = condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonUnreachable)
		Expect(c.Message).To(ContainSubstring("cannot be reached"))
		warningEvent(ns, v1.ReasonUnreachable)

		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.APISync.APIURL = apiURL })
		condition(v1.ConditionAPIConnected, metav1.ConditionTrue, v1.ReasonConnected)
		condition(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonConnected)
	})

	It("says APIConnected again within seconds of a recovery, not after the health report's backoff", func() {
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/agent/health/", Status: 503})).To(Succeed())
		condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonAPIUnavailable)
		// Let the report's backoff grow well past the wait below (1 s interval: 1, 2, 4, 8, 16 s …).
		Eventually(func() int { return op.Health.Last().Failures }, apiTimeout, pollInterval).Should(BeNumerically(">=", 5))
		Expect(api.SetFaults()).To(Succeed())
		// Any other answer of the API (here: reads as the syncs make them) asks for an
		// early report, at most one per 5 s.
		Eventually(func(g Gomega) {
			_, _ = op.Conn.Client().K8sClusters().List(ctx, nil)
			c := meta.FindStatusCondition(getOC().Status.Conditions, v1.ConditionAPIConnected)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, 8*time.Second, pollInterval).Should(Succeed())
	})

	It("holds every request back while the API fails: the circuit opens, says so on the OperatorConfig, probes at most once per 5 s, and closes with the first answer", func() {
		total := func() int {
			n := 0
			for _, c := range api.Counters() {
				n += c.Reads + c.Writes
			}
			return n
		}
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/*", Status: 503})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		c := condition(v1.ConditionAPICircuitClosed, metav1.ConditionFalse, v1.ReasonCircuitOpen)
		Expect(c.Message).To(ContainSubstring("answered 503"))
		Expect(c.Message).To(ContainSubstring("held back"))
		// The health report, which failed with the rest, says why it is not sent.
		condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonCircuitOpen)
		Expect(op.Conn.Breaker().State().Open).To(BeTrue())

		// Open: the health report (every second here), the controllers and the
		// probe together send at most one request per 5 s.
		before, start := total(), time.Now()
		time.Sleep(16 * time.Second) // a measurement window, not a wait for a state
		sent := total() - before
		Expect(sent).To(BeNumerically("<=", int(time.Since(start)/(5*time.Second))+1), "requests while the circuit was open")
		Expect(sent).To(BeNumerically(">=", 1), "no probe while open")
		Expect(op.Conn.Breaker().State().HeldBack).To(BeNumerically(">", 0))

		// The API answers again: the next probe closes the circuit (at most 9.6 s),
		// and the health report follows at once.
		Expect(api.SetFaults()).To(Succeed())
		recovered := time.Now()
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getOC().Status.Conditions, v1.ConditionAPICircuitClosed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, 20*time.Second, pollInterval).Should(Succeed())
		condition(v1.ConditionAPIConnected, metav1.ConditionTrue, v1.ReasonConnected)
		Expect(time.Since(recovered)).To(BeNumerically("<", 15*time.Second))
	})

	It("notices the API's return within seconds when nothing else asks it (as after a cold start while it was down): the report is the breaker's probe", func() {
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/*", Status: 503})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		condition(v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonCircuitOpen)
		// Long enough for the old backoff (1, 2, 4, … 120 s) to pass 30 s.
		Eventually(func() int { return op.Health.Last().Failures }, 2*apiTimeout, pollInterval).Should(BeNumerically(">=", 7))
		Expect(api.SetFaults()).To(Succeed())
		recovered := time.Now()
		// No other request helps here: the report alone finds the API back.
		Eventually(func(g Gomega) {
			oc := getOC()
			for _, typ := range []string{v1.ConditionAPIConnected, v1.ConditionReady} {
				c := meta.FindStatusCondition(oc.Status.Conditions, typ)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue), typ)
			}
		}, 12*time.Second, pollInterval).Should(Succeed())
		GinkgoWriter.Printf("APIConnected and Ready %s after the API answered again\n", time.Since(recovered).Round(100*time.Millisecond))
	})

	It("applies configuration changes live, and merges the cluster record's ignored namespaces", func() {
		updateOC(func(oc *v1.OperatorConfig) {
			oc.Spec.EndpointDiscovery.Mode = "auto"
			oc.Spec.EndpointDiscovery.WatchNamespaces = []string{"shop", "legacy"}
		})
		Eventually(func() string { return op.Config.Get().Spec.EndpointDiscovery.Mode }, apiTimeout).Should(Equal("auto"))
		Expect(op.Config.Get().EndpointNamespaces().Allows("shop")).To(BeTrue())

		clusterID := getOC().Status.LocalCluster.ClusterID
		_, err := apiClient(emulator.DevAgentToken).K8sClusters().Patch(ctx, clusterID, map[string]any{
			"operator_ignore_namespaces": []string{"legacy"}, "operator_loglevel": 2})
		Expect(err).NotTo(HaveOccurred())
		// Any change re-reads the cluster record (else it is re-read every 5 minutes).
		updateOC(func(oc *v1.OperatorConfig) { oc.Annotations = map[string]string{"touched": "1"} })
		Eventually(func() bool { return op.Config.Get().EndpointNamespaces().Allows("legacy") }, apiTimeout).Should(BeFalse())
		Expect(op.Config.Get().EndpointNamespaces().Allows("shop")).To(BeTrue())
		Eventually(logLevels, apiTimeout).Should(Receive(Equal(2)))

		// null: back to the flag's level.
		_, err = apiClient(emulator.DevAgentToken).K8sClusters().Patch(ctx, clusterID, map[string]any{"operator_loglevel": nil})
		Expect(err).NotTo(HaveOccurred())
		updateOC(func(oc *v1.OperatorConfig) { oc.Annotations = map[string]string{"touched": "2"} })
		Eventually(logLevels, apiTimeout).Should(Receive(Equal(0)))
	})

	It("counts health reports in its metrics", func() {
		families, err := ctrlmetrics.Registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		found := map[string]bool{}
		for _, f := range families {
			found[f.GetName()] = true
		}
		Expect(found).To(HaveKey("polycrate_operator_health_reports_total"))
		Expect(found).To(HaveKey("polycrate_operator_health_report_last_success_timestamp_seconds"))
		Expect(found).To(HaveKey("polycrate_api_requests_total"))
	})

	It("never writes a token into status or events", func() {
		oc := getOC()
		status, _ := json.Marshal(oc.Status)
		events := &eventsv1.EventList{}
		Expect(k8s.List(ctx, events)).To(Succeed())
		all, _ := json.Marshal(events)
		for _, secret := range []string{emulator.DevAgentToken, otherToken, wrongToken, emulator.DevSystemToken} {
			Expect(string(status)).NotTo(ContainSubstring(secret))
			Expect(string(all)).NotTo(ContainSubstring(secret))
		}
	})

	It("withdraws the configuration when the OperatorConfig is deleted", func() {
		Expect(k8s.Delete(ctx, getOC())).To(Succeed())
		Eventually(op.Config.Get, apiTimeout).Should(BeNil())
		Eventually(op.Conn.Client, apiTimeout).Should(BeNil())
		Expect(strings.TrimSpace(testVersion)).NotTo(BeEmpty())
	})
})
