package cli_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/cli"
)

func countLines(out, re string) int {
	return len(regexp.MustCompile(re).FindAllString(out, -1))
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url) //nolint:noctx // test helper
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Ordered: install-crds changes cluster-wide state that status and run depend on.
var _ = Describe("against a cluster", Ordered, func() {
	ctx := context.Background()

	It("status works before the CRDs exist and says so per kind", func() {
		out, _, err := execute(ctx, "status", "--kubeconfig", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("Polycrate Operator Status\n=========================\nCluster: " + clusterURL + "\nOperatorConfig: CRD not installed\n"))
		Expect(countLines(out, `\(CRD not installed: run 'polycrate-operator install-crds'\)`)).To(Equal(10))
	})

	It("install-crds --dry-run says what it would create and changes nothing", func() {
		out, _, err := execute(ctx, "install-crds", "--kubeconfig", kubeconfig, "--dry-run")
		Expect(err).NotTo(HaveOccurred())
		Expect(countLines(out, `(?m)^customresourcedefinition\.apiextensions\.k8s\.io/\S+\.polycrate\.io created \(server dry run\)$`)).To(Equal(10))
		Expect(out).To(ContainSubstring("10 CRDs: 10 created, 0 updated, 0 unchanged — dry run against " + clusterURL + ", nothing was changed"))
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		for _, crd := range list.Items {
			Expect(crd.Spec.Group).NotTo(Equal("polycrate.io"), "dry run created %s", crd.Name)
		}
	})

	It("install-crds creates all ten, then reports them unchanged", func() {
		out, _, err := execute(ctx, "install-crds", "--kubeconfig", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(countLines(out, `(?m)^customresourcedefinition\.apiextensions\.k8s\.io/\S+\.polycrate\.io created$`)).To(Equal(10))
		Expect(out).To(ContainSubstring("10 CRDs: 10 created, 0 updated, 0 unchanged — all established"))

		out, _, err = execute(ctx, "install-crds", "--kubeconfig", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(countLines(out, `(?m) unchanged$`)).To(Equal(10))
		Expect(out).To(ContainSubstring("10 CRDs: 0 created, 0 updated, 10 unchanged"))

		out, _, err = execute(ctx, "install-crds", "--kubeconfig", kubeconfig, "--dry-run")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("10 CRDs: 0 created, 0 updated, 10 unchanged — dry run"))
	})

	It("install-crds fails clearly without a cluster", func() {
		_, _, err := execute(ctx, "install-crds", "--kubeconfig", "/does/not/exist")
		Expect(err).To(MatchError(ContainSubstring("/does/not/exist")))
	})

	It("status prints the seed's layout: a section per kind with NAME, NAMESPACE, PHASE", func() {
		for _, ns := range []string{"polycrate", "production"} {
			err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		kc := &v1.K8sCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "production-cluster", Namespace: "polycrate"},
			Spec: v1.K8sClusterSpec{APIServer: "https://api.prod.example.com:6443", Authentication: v1.K8sClusterAuthentication{
				ServiceAccountToken: &v1.SecretReference{SecretRef: v1.SecretKeySelector{Name: "prod-cluster-token", Key: "token"}}}},
		}
		Expect(k8s.Create(ctx, kc)).To(Succeed())
		kc.Status.Phase = "Ready"
		Expect(k8s.Status().Update(ctx, kc)).To(Succeed())
		Expect(k8s.Create(ctx, &v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
			Spec: v1.HostSpec{Name: "worker-1", Hostname: "worker-1"}})).To(Succeed())

		out, _, err := execute(ctx, "status", "--kubeconfig", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("Polycrate Operator Status\n=========================\nCluster: " + clusterURL + "\n"))
		Expect(out).To(ContainSubstring("OperatorConfig: none in namespace polycrate — the operator discovers nothing until one exists\n"))
		Expect(out).To(MatchRegexp(`\nK8sClusters\n-----------\n  NAME\s+NAMESPACE\s+PHASE\n  production-cluster\s+polycrate\s+Ready\n`))
		Expect(out).To(MatchRegexp(`\nHosts\n-----\n  NAME\s+NAMESPACE\s+PHASE\n  worker-1\s+-\s+-\n`))
		Expect(out).To(ContainSubstring("\nEndpoints\n---------\n  (none)\n"))
		for _, k := range allKinds {
			Expect(out).To(ContainSubstring("\n" + k + "s\n" + strings.Repeat("-", len(k)+1) + "\n"))
		}

		out, _, err = execute(ctx, "status", "--kubeconfig", kubeconfig, "-n", "production")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("\nK8sClusters\n-----------\n  (none)\n"))
	})

	It("status -o wide names why an object is not synced; -o json and -o yaml print the same", func() {
		h := &v1.Host{ObjectMeta: metav1.ObjectMeta{Name: "refused-1"}, Spec: v1.HostSpec{Name: "refused-1", Hostname: "refused-1"}}
		Expect(k8s.Create(ctx, h)).To(Succeed())
		h.Status.Phase = "Error"
		h.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonAPIError,
			Message: "the API refused the host", LastTransitionTime: metav1.Now()}}
		Expect(k8s.Status().Update(ctx, h)).To(Succeed())

		out, _, err := execute(ctx, "status", "--kubeconfig", kubeconfig, "-o", "wide")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`\n  NAME\s+NAMESPACE\s+PHASE\s+READY\s+REASON\s+MESSAGE\n(.*\n)*  refused-1\s+-\s+Error\s+False\s+APIError\s+the API refused the host\n`))

		out, _, err = execute(ctx, "status", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var report struct {
			Cluster string `json:"cluster"`
			Kinds   []struct {
				Kind      string `json:"kind"`
				Installed bool   `json:"installed"`
				Items     []struct{ Name, Phase, Ready, Reason, Message string }
			} `json:"kinds"`
		}
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), out)
		Expect(report.Cluster).To(Equal(clusterURL))
		Expect(report.Kinds).To(HaveLen(10))
		found := false
		for _, k := range report.Kinds {
			Expect(k.Installed).To(BeTrue())
			for _, it := range k.Items {
				if k.Kind == "Host" && it.Name == "refused-1" {
					found = it.Phase == "Error" && it.Ready == "False" && it.Reason == v1.ReasonAPIError && it.Message == "the API refused the host"
				}
			}
		}
		Expect(found).To(BeTrue(), out)

		out, _, err = execute(ctx, "status", "--kubeconfig", kubeconfig, "-o", "yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("reason: APIError"))
		Expect(out).To(ContainSubstring("cluster: " + clusterURL))

		_, _, err = execute(ctx, "status", "--kubeconfig", kubeconfig, "-o", "xml")
		Expect(err).To(MatchError(`unknown output format "xml": use table, wide, json or yaml`))
	})

	It("status shows each Endpoint's check state and last check, and every kind's phase in one spelling", func() {
		for _, ns := range []string{"polycrate", "production"} {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		endpoint := func(name, phase string, mon *v1.EndpointMonitoringStatus) {
			ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: name},
				Spec: v1.EndpointSpec{RemoteAddress: name + ".example.com", RemotePort: 443}}
			Expect(k8s.Create(ctx, ep)).To(Succeed())
			ep.Status.Phase, ep.Status.Monitoring = phase, mon
			Expect(k8s.Status().Update(ctx, ep)).To(Succeed())
		}
		checked := metav1.NewTime(time.Now().Add(-90 * time.Second).Truncate(time.Second))
		endpoint("shop-down", "synced", &v1.EndpointMonitoringStatus{State: "down", LastCheckAt: &checked, ErrorName: "ConnectionRefused"})
		endpoint("shop-new", "pending", nil)
		app := &v1.K8sApp{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "shop"}}
		Expect(k8s.Create(ctx, app)).To(Succeed())
		app.Status.Phase = "Synced"
		Expect(k8s.Status().Update(ctx, app)).To(Succeed())

		out, _, err := execute(ctx, "status", "--kubeconfig", kubeconfig, "-n", "production")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`\nEndpoints\n---------\n  NAME\s+NAMESPACE\s+PHASE\s+CHECK\s+LAST CHECK\n` +
			`  shop-down\s+production\s+Synced\s+down\s+(89|9\d|1[01]\d)s ago\n  shop-new\s+production\s+Pending\s+unknown\s+-\n`))
		Expect(out).To(MatchRegexp(`\nK8sApps\n-------\n  NAME\s+NAMESPACE\s+PHASE\n  shop\s+production\s+Synced\n`))
		Expect(out).NotTo(ContainSubstring(" synced"))

		out, _, err = execute(ctx, "status", "--kubeconfig", kubeconfig, "-n", "production", "-o", "wide")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`  NAME\s+NAMESPACE\s+PHASE\s+CHECK\s+LAST CHECK\s+READY\s+REASON\s+MESSAGE\n`))

		out, _, err = execute(ctx, "status", "--kubeconfig", kubeconfig, "-n", "production", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var report struct {
			Kinds []struct {
				Kind  string `json:"kind"`
				Items []struct {
					Name      string     `json:"name"`
					Phase     string     `json:"phase"`
					Check     string     `json:"check"`
					LastCheck *time.Time `json:"lastCheck"`
				} `json:"items"`
			} `json:"kinds"`
		}
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), out)
		got := map[string]string{}
		for _, k := range report.Kinds {
			for _, it := range k.Items {
				last := "-"
				if it.LastCheck != nil {
					last = it.LastCheck.UTC().Format(time.RFC3339)
				}
				got[k.Kind+"/"+it.Name] = it.Phase + " " + it.Check + " " + last
			}
		}
		Expect(got).To(HaveKeyWithValue("Endpoint/shop-down", "Synced down "+checked.UTC().Format(time.RFC3339)))
		Expect(got).To(HaveKeyWithValue("Endpoint/shop-new", "Pending unknown -"))
		Expect(got).To(HaveKeyWithValue("K8sApp/shop", "Synced  -"))
	})

	It("run starts the manager as a standby, serves /healthz, /readyz and /metrics (HTTPS, to readers only), takes the Lease over, and stops cleanly", func() {
		// Another replica holds the Lease for a few more seconds: this one starts as
		// a standby, whose Kubernetes writes the fence refuses (the reviews of the
		// metrics server are no writes), and takes over when the Lease runs out.
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "polycrate-operator.polycrate.io"}}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, lease))).To(Succeed())
		lease.ResourceVersion = ""
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-other-replica"), LeaseDurationSeconds: ptr.To[int32](8),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}
		Expect(k8s.Create(ctx, lease)).To(Succeed())

		// The shipped reader role, bound to one ServiceAccount; another has none.
		reader := applyYAMLFile("../../config/rbac/metrics_reader_role.yaml")
		Expect(reader.GetName()).To(Equal("polycrate-operator-metrics-reader"))
		readerToken := serviceAccountToken("prometheus", reader.GetName())
		strangerToken := serviceAccountToken("stranger", "")

		probeAddr, metricsAddr := freeAddr(), freeAddr()
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		logs := &syncBuffer{}
		go func() {
			defer GinkgoRecover()
			cmd := cli.NewRootCommand()
			cmd.SetArgs([]string{"run", "--kubeconfig", kubeconfig, "--leader-elect",
				"--namespace", "polycrate", "--health-probe-bind-address", probeAddr,
				"--metrics-bind-address", metricsAddr, "--graceful-shutdown-timeout", "10s"})
			cmd.SetOut(io.Discard)
			cmd.SetErr(logs)
			done <- cmd.ExecuteContext(runCtx)
		}()

		Eventually(func() error {
			_, _, err := execute(ctx, "health", "--url", "http://"+probeAddr, "--timeout", "1s")
			return err
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed(), logs.String)
		// Log lines are stamped to the millisecond (RFC 3339).
		var first struct{ TS string }
		Expect(json.Unmarshal([]byte(strings.SplitN(logs.String(), "\n", 2)[0]), &first)).To(Succeed(), logs.String)
		Expect(first.TS).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`))

		// /metrics: TLS (self-signed without --metrics-cert-dir), HTTP/1.1 only,
		// for the metrics-reader role only.
		scrape := func(token string) (int, string, error) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the self-signed certificate
			defer tr.CloseIdleConnections()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
			if err != nil {
				return 0, "", err
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
			if err != nil {
				return 0, "", err
			}
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			if resp.ProtoMajor != 1 || resp.TLS == nil {
				return 0, "", fmt.Errorf("served over %s, TLS %v", resp.Proto, resp.TLS != nil)
			}
			return resp.StatusCode, string(b), err
		}
		var body string
		Eventually(func() (int, error) {
			code, b, err := scrape(readerToken)
			body = b
			return code, err
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(http.StatusOK), func() string { return body })
		Expect(body).To(MatchRegexp(`(?m)^polycrate_operator_info\{commit="[^"]*",version="[^"]+"\} 1$`))
		Expect(body).To(MatchRegexp(`(?m)^leader_election_master_status\{name="polycrate-operator.polycrate.io"\} 0$`), "a standby answers its scrapes")

		// No token, or one the API server rejects: 401, as the kube-apiserver
		// answers; a valid token without the role: 403. Plain HTTP: 400.
		for token, want := range map[string]int{"": http.StatusUnauthorized, "not-a-token": http.StatusUnauthorized, strangerToken: http.StatusForbidden} {
			code, body, err := scrape(token)
			Expect(err).NotTo(HaveOccurred())
			Expect(code).To(Equal(want), "token %q: %s", token, body)
			Expect(body).NotTo(ContainSubstring("polycrate_operator"))
		}
		code, body, err := httpGet("http://" + metricsAddr + "/metrics")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusBadRequest))
		Expect(body).NotTo(ContainSubstring("polycrate_operator"))

		// The other replica's Lease runs out: this one leads.
		Eventually(func() string {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(lease), lease)).To(Succeed())
			return ptr.Deref(lease.Spec.HolderIdentity, "")
		}, 30*time.Second, 250*time.Millisecond).ShouldNot(Or(BeEmpty(), Equal("the-other-replica")))
		Eventually(func() string { _, b, _ := scrape(readerToken); return b }, 30*time.Second, 250*time.Millisecond).
			Should(MatchRegexp(`(?m)^leader_election_master_status\{name="polycrate-operator.polycrate.io"\} 1$`))

		// The leader says once that there is no OperatorConfig.
		Eventually(logs.String, 30*time.Second).Should(ContainSubstring("no OperatorConfig: the operator discovers nothing until one exists"))

		// A failure the user must act on (the token's Secret is missing) is one
		// error-level line, without a stack trace; the retries log nothing more.
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "polycrate"}}))).To(Succeed())
		oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: v1.DefaultOperatorConfigName}}
		oc.Spec.APISync.CredentialsRef.SecretName = "no-such-secret"
		Expect(k8s.Create(ctx, oc)).To(Succeed())
		defer func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, oc))).To(Succeed()) }()
		errorLines := func() []string {
			var out []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"level":"error"`) {
					out = append(out, l)
				}
			}
			return out
		}
		Eventually(errorLines, 30*time.Second, 250*time.Millisecond).Should(ContainElement(SatisfyAll(
			ContainSubstring(`"msg":"OperatorConfig reconcile failed"`), ContainSubstring(`"reason":"SecretNotFound"`),
			ContainSubstring(`Secret polycrate/no-such-secret with the agent token does not exist`))))
		failed := func() []string {
			var out []string
			for _, l := range errorLines() {
				if strings.Contains(l, "reconcile failed") || strings.Contains(l, "Reconciler error") {
					out = append(out, l)
				}
			}
			return out
		}
		Consistently(failed, 3*time.Second, 250*time.Millisecond).Should(HaveLen(1))
		Expect(failed()[0]).NotTo(ContainSubstring("stacktrace"))
		cancel()
		Eventually(done, 30*time.Second).Should(Receive(BeNil()))
		Expect(logs.String()).To(ContainSubstring("starting polycrate-operator"))
		Expect(logs.String()).To(ContainSubstring("CRDs in place"))
		Expect(logs.String()).To(ContainSubstring("no OperatorConfig: the operator discovers nothing until one exists"))
		Expect(logs.String()).To(ContainSubstring("polycrate-operator stopped"))

		// Leader election released the Lease on a clean stop.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(lease), lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "").To(BeTrue(), "lease still held after stop")

		// The probe port is closed again.
		_, _, err = execute(ctx, "health", "--url", "http://"+probeAddr, "--timeout", "1s")
		Expect(err).To(HaveOccurred())
	})

	It("run fails clearly with an unusable kubeconfig", func() {
		_, _, err := execute(ctx, "run", "--kubeconfig", "/does/not/exist", "--health-probe-bind-address", "0", "--metrics-bind-address", "0")
		Expect(err).To(MatchError(ContainSubstring("loading kubeconfig /does/not/exist")))
	})
})

// applyYAMLFile creates the object in a manifest file of the repository.
func applyYAMLFile(path string) *unstructured.Unstructured {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(b, &u.Object)).To(Succeed())
	Expect(client.IgnoreAlreadyExists(k8s.Create(context.Background(), u))).To(Succeed())
	return u
}

// serviceAccountToken creates a ServiceAccount in polycrate, binds it to the
// ClusterRole (none when empty) and returns a token of it.
func serviceAccountToken(name, clusterRole string) string {
	GinkgoHelper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: name}}
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, sa))).To(Succeed())
	if clusterRole != "" {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + clusterRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}))).To(Succeed())
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(k8s.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return tr.Status.Token
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
