// Package chart_test renders the Helm chart with Helm's Go library and has the
// envtest API server check every rendered object in server-side dry-run.
package chart_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/polycrate/polycrate-operator/internal/cloud"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/helmchart"
)

var (
	env  *envtest.Environment
	cfg  *rest.Config
	k8s  client.Client
	ctx  = context.Background()
	pchr *chart.Chart
)

func TestChart(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Helm chart (rendered with Helm's library, checked by envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, cfg, err = testutil.Start(testutil.Options{OwnCRDs: true, ThirdPartyCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(testutil.RepoRoot(), "test", "crds", "monitoring")}})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "polycrate"}})).To(Succeed())
	pchr, err = helmchart.Load()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// render renders the chart with values (validated against values.schema.json).
func render(values map[string]any) ([]*unstructured.Unstructured, error) {
	return helmchart.Objects(pchr, values)
}

func mustRender(values map[string]any) []*unstructured.Unstructured {
	GinkgoHelper()
	objs, err := render(values)
	Expect(err).NotTo(HaveOccurred())
	return objs
}

// dryRun has the API server check every object (server-side apply, strict fields, dry run).
func dryRun(objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, o := range objs {
		err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("chart-test"), client.ForceOwnership,
			client.DryRunAll)
		Expect(err).NotTo(HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// rules are the rules of a rendered Role or ClusterRole.
func rules(o *unstructured.Unstructured) []rbacv1.PolicyRule {
	GinkgoHelper()
	Expect(o).NotTo(BeNil())
	var r struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r)).To(Succeed())
	return r.Rules
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func rulesOf(o *unstructured.Unstructured) []rbacv1.PolicyRule {
	GinkgoHelper()
	Expect(o).NotTo(BeNil())
	b, err := yaml.Marshal(o.Object["rules"])
	Expect(err).NotTo(HaveOccurred())
	var rules []rbacv1.PolicyRule
	Expect(yaml.Unmarshal(b, &rules)).To(Succeed())
	return rules
}

// markerRBAC reads config/rbac/role.yaml (generated from the markers).
func markerRBAC() (cluster, namespaced []rbacv1.PolicyRule) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var r struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		Expect(yaml.Unmarshal([]byte(doc), &r)).To(Succeed())
		switch r.Kind {
		case "ClusterRole":
			cluster = r.Rules
		case "Role":
			namespaced = r.Rules
		}
	}
	return cluster, namespaced
}

// flatten turns rules into sorted "group/resource:verb" strings (rule order and
// grouping do not matter).
func flatten(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v+"@"+strings.Join(r.ResourceNames, ","))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

var allFeatures = map[string]any{
	"replicas":          2,
	"image":             map[string]any{"repository": "registry.example.com/polycrate-operator", "tag": "0.1.0-test", "pullSecrets": []any{map[string]any{"name": "regcred"}}},
	"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
	"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}},
	"priorityClassName": "system-cluster-critical",
	"apiSync":           map[string]any{"token": "polycrate-dev-agent-token"},
	"cloudController":   map[string]any{"enabled": true, "loadBalancer": map[string]any{"serviceScope": "opt-in"}},
	"operatorConfig": map[string]any{"create": true, "spec": map[string]any{
		"api_sync":           map[string]any{"api_url": "https://api.polycrate.io"},
		"local_cluster":      map[string]any{"cluster_name": "production"},
		"endpoint_discovery": map[string]any{"mode": "annotation"}}},
	"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"prometheusRule":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "Polycrate"}}},
	"podDisruptionBudget": map[string]any{"enabled": true},
	"networkPolicy":       map[string]any{"enabled": true},
	"dns01Webhook":        map[string]any{"enabled": true},
	"cleanupHook":         map[string]any{"retireAPI": true},
}

var _ = Describe("the Helm chart", func() {
	It("renders with default values, and the API server accepts every object", func() {
		objs := mustRender(nil)
		Expect(kinds(objs)).To(ContainElements("ServiceAccount/polycrate-operator", "ClusterRole/polycrate-operator-manager",
			"Deployment/polycrate-operator", "Service/polycrate-operator-metrics", "Job/polycrate-operator-cleanup"))
		Expect(find(objs, "Secret", "polycrate-api-creds")).To(BeNil(), "no token given: no Secret")
		Expect(find(objs, "APIService", "v1alpha1.webhook.dns.polycrate.io")).To(BeNil(), "the DNS01 webhook is off by default")
		Expect(find(objs, "PrometheusRule", "polycrate-operator")).To(BeNil(), "alerts are off by default")
		Expect(find(objs, "ConfigMap", "polycrate-operator-dashboard")).To(BeNil(), "the dashboard is off by default")
		dryRun(objs)

		d := find(objs, "Deployment", "polycrate-operator")
		c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		ctr := c[0].(map[string]any)
		Expect(ctr["image"]).To(Equal("ghcr.io/polycrate/polycrate-operator:0.1.0")) // the chart's appVersion
		sc := ctr["securityContext"].(map[string]any)
		Expect(sc["allowPrivilegeEscalation"]).To(BeFalse())
		Expect(sc["readOnlyRootFilesystem"]).To(BeTrue())
		Expect(sc["capabilities"]).To(Equal(map[string]any{"drop": []any{"ALL"}}))
		psc, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "securityContext")
		Expect(psc["runAsNonRoot"]).To(BeTrue())
		Expect(psc["seccompProfile"]).To(Equal(map[string]any{"type": "RuntimeDefault"}))
		Expect(ctr["args"]).To(ContainElement("--leader-elect"))
		Expect(ctr["args"]).NotTo(ContainElement("--install-crds=false"))
	})

	It("admits only external-dns's Pods to the external-dns webhook by default, keeps the other ports' rules, and widens as documented", func() {
		ingress := func(objs []*unstructured.Unstructured) []networkingv1.NetworkPolicyIngressRule {
			np := find(objs, "NetworkPolicy", "polycrate-operator")
			Expect(np).NotTo(BeNil(), "no NetworkPolicy")
			var spec networkingv1.NetworkPolicySpec
			m, _, _ := unstructured.NestedMap(np.Object, "spec")
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec)).To(Succeed())
			Expect(spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
			return spec.Ingress
		}
		rule := func(rules []networkingv1.NetworkPolicyIngressRule, port int) *networkingv1.NetworkPolicyIngressRule {
			for i := range rules {
				for _, p := range rules[i].Ports {
					if p.Port != nil && p.Port.IntValue() == port {
						return &rules[i]
					}
				}
			}
			return nil
		}
		// Defaults: the webhook is on, so is its policy.
		objs := mustRender(nil)
		dryRun(objs)
		rules := ingress(objs)
		webhook := rule(rules, 8888)
		Expect(webhook).NotTo(BeNil())
		Expect(webhook.From).To(HaveLen(2))
		for _, peer := range webhook.From {
			Expect(peer.NamespaceSelector).To(Equal(&metav1.LabelSelector{}), "external-dns may run in any namespace")
			Expect(peer.PodSelector).NotTo(BeNil(), "a peer without a pod selector admits every Pod")
		}
		Expect([]map[string]string{webhook.From[0].PodSelector.MatchLabels, webhook.From[1].PodSelector.MatchLabels}).To(ConsistOf(
			map[string]string{"app.kubernetes.io/name": "external-dns"}, map[string]string{"app": "external-dns"}))
		for _, port := range []int{8080, 8081} {
			Expect(rule(rules, port)).NotTo(BeNil(), "port %d", port)
			Expect(rule(rules, port).From).To(BeEmpty(), "port %d keeps its own rule: open to every source", port)
		}
		// Widened as documented: the whole cluster.
		wide := mustRender(map[string]any{"externalDNSWebhook": map[string]any{"networkPolicy": map[string]any{
			"from": []any{map[string]any{"namespaceSelector": map[string]any{}}}}}})
		dryRun(wide)
		Expect(rule(ingress(wide), 8888).From).To(Equal([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}))
		// Switched off, with networkPolicy.enabled false: no policy at all.
		off := mustRender(map[string]any{"externalDNSWebhook": map[string]any{"networkPolicy": map[string]any{"enabled": false}}})
		Expect(find(off, "NetworkPolicy", "polycrate-operator")).To(BeNil())
		// The webhook off: nothing to guard, no policy by default.
		Expect(find(mustRender(map[string]any{"externalDNSWebhook": map[string]any{"enabled": false}}), "NetworkPolicy", "polycrate-operator")).To(BeNil())
	})

	It("serves /metrics over HTTPS to the metrics-reader ClusterRole by default, and the ServiceMonitor scrapes it so", func() {
		argsOf := func(objs []*unstructured.Unstructured) []any {
			d := find(objs, "Deployment", "polycrate-operator")
			c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			return c[0].(map[string]any)["args"].([]any)
		}
		endpointOf := func(objs []*unstructured.Unstructured) map[string]any {
			sm := find(objs, "ServiceMonitor", "polycrate-operator")
			Expect(sm).NotTo(BeNil())
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			Expect(eps).To(HaveLen(1))
			return eps[0].(map[string]any)
		}
		objs := mustRender(map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true},
			"readers": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
				map[string]any{"kind": "Group", "name": "metrics-readers"}}}})
		dryRun(objs)
		Expect(argsOf(objs)).To(ContainElements("--metrics-bind-address=:8080", "--metrics-secure=true"))
		Expect(argsOf(objs)).NotTo(ContainElement(HavePrefix("--metrics-cert-dir")))
		ep := endpointOf(objs)
		Expect(ep["scheme"]).To(Equal("https"))
		Expect(ep["bearerTokenFile"]).To(Equal("/var/run/secrets/kubernetes.io/serviceaccount/token"))
		Expect(ep["tlsConfig"]).To(Equal(map[string]any{"insecureSkipVerify": true}), "the self-signed certificate")

		// The operator may review tokens and access; readers may GET /metrics.
		Expect(flatten(rulesOf(find(objs, "ClusterRole", "polycrate-operator-metrics-auth")))).To(ConsistOf(
			HavePrefix("authentication.k8s.io/tokenreviews:create"), HavePrefix("authorization.k8s.io/subjectaccessreviews:create")))
		reader := find(objs, "ClusterRole", "polycrate-operator-metrics-reader")
		Expect(rulesOf(reader)).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
		var auth, readers rbacv1.ClusterRoleBinding
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRoleBinding", "polycrate-operator-metrics-auth").Object, &auth)).To(Succeed())
		Expect(auth.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "polycrate-operator", Namespace: "polycrate"}}))
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRoleBinding", "polycrate-operator-metrics-reader").Object, &readers)).To(Succeed())
		Expect(readers.RoleRef.Name).To(Equal("polycrate-operator-metrics-reader"))
		Expect(readers.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"},
			{Kind: "Group", Name: "metrics-readers", APIGroup: rbacv1.GroupName}}))
		// The kustomize manifests (config/rbac) grant the same.
		for _, f := range []string{"metrics_auth_role.yaml", "metrics_reader_role.yaml"} {
			b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "rbac", f))
			Expect(err).NotTo(HaveOccurred())
			var cr rbacv1.ClusterRole
			Expect(yaml.Unmarshal(b, &cr)).To(Succeed())
			Expect(cr.Rules).To(Equal(rulesOf(find(objs, "ClusterRole", cr.Name))), f)
		}

		// A certificate of one's own: mounted, and the scrape verifies it as configured.
		own := mustRender(map[string]any{"metrics": map[string]any{"certSecret": "operator-metrics-tls", "serviceMonitor": map[string]any{"enabled": true,
			"tlsConfig": map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "operator-metrics-tls", "key": "ca.crt"}},
				"serverName": "polycrate-operator-metrics.polycrate.svc"}}}})
		dryRun(own)
		Expect(argsOf(own)).To(ContainElement("--metrics-cert-dir=/metrics-tls"))
		d := find(own, "Deployment", "polycrate-operator")
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		Expect(vols).To(ContainElement(And(HaveKeyWithValue("name", "metrics-tls"),
			HaveKeyWithValue("secret", HaveKeyWithValue("secretName", "operator-metrics-tls")))))
		Expect(endpointOf(own)["tlsConfig"]).To(HaveKeyWithValue("serverName", "polycrate-operator-metrics.polycrate.svc"))
		Expect(endpointOf(own)["tlsConfig"]).NotTo(HaveKey("insecureSkipVerify"))

		// Plain HTTP by value: no reviews to grant, nothing for TLS.
		plain := mustRender(map[string]any{"metrics": map[string]any{"secure": false, "serviceMonitor": map[string]any{"enabled": true}}})
		dryRun(plain)
		Expect(argsOf(plain)).To(ContainElement("--metrics-secure=false"))
		Expect(endpointOf(plain)).NotTo(HaveKey("scheme"))
		Expect(find(plain, "ClusterRole", "polycrate-operator-metrics-auth")).To(BeNil())
		Expect(find(plain, "ClusterRole", "polycrate-operator-metrics-reader")).To(BeNil())
	})

	It("renders with every feature on, and the API server accepts every object", func() {
		objs := mustRender(allFeatures)
		Expect(kinds(objs)).To(ContainElements("Secret/polycrate-api-creds", "OperatorConfig/default", "ServiceMonitor/polycrate-operator",
			"PodDisruptionBudget/polycrate-operator", "NetworkPolicy/polycrate-operator", "APIService/v1alpha1.webhook.dns.polycrate.io",
			"Certificate/polycrate-operator-dns01-tls", "ClusterRoleBinding/polycrate-operator-dns01:domain-solver",
			"PrometheusRule/polycrate-operator", "ConfigMap/polycrate-operator-dashboard"))
		dryRun(objs)
		oc := find(objs, "OperatorConfig", "default")
		ref, _, _ := unstructured.NestedMap(oc.Object, "spec", "api_sync", "credentials_ref")
		Expect(ref).To(Equal(map[string]any{"secret_name": "polycrate-api-creds", "token_key": "token"}))
		np := find(objs, "NetworkPolicy", "polycrate-operator")
		b, _ := yaml.Marshal(np.Object["spec"])
		Expect(string(b)).To(ContainSubstring("port: 8888"))
		Expect(string(b)).To(ContainSubstring("port: 10250"))
		job := find(objs, "Job", "polycrate-operator-cleanup")
		c, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
		Expect(c[0].(map[string]any)["args"]).To(ContainElements("cleanup", "--retire-api", "--scale-down=polycrate-operator"))
		Expect(c[0].(map[string]any)["terminationMessagePolicy"]).To(Equal("FallbackToLogsOnError"))
		// The hook runs with its own ServiceAccount: it needs the pull secrets, node
		// selector and tolerations of the operator's Pod itself.
		pod, _, _ := unstructured.NestedMap(job.Object, "spec", "template", "spec")
		Expect(pod["imagePullSecrets"]).To(Equal([]any{map[string]any{"name": "regcred"}}))
		Expect(pod["nodeSelector"]).To(Equal(map[string]any{"kubernetes.io/os": "linux"}))
		Expect(pod["tolerations"]).To(HaveLen(1))
	})

	It("takes the values platform teams expect: digest, pod labels and annotations, spread, log level, extra args and env, global", func() {
		digest := "sha256:" + strings.Repeat("ab", 32)
		objs := mustRender(map[string]any{
			"image":                     map[string]any{"digest": digest},
			"podAnnotations":            map[string]any{"prometheus.io/scrape": "true"},
			"podLabels":                 map[string]any{"team": "platform"},
			"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "polycrate-operator"}}}},
			"logLevel":                  "debug",
			"extraArgs":                 []any{"--max-concurrent-reconciles=8"},
			"extraEnv":                  []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy.internal:3128"}, map[string]any{"name": "NO_PROXY", "value": ".svc,.cluster.local"}},
			"global":                    map[string]any{"imageRegistry": "registry.example.com"},
		})
		dryRun(objs)
		d := find(objs, "Deployment", "polycrate-operator")
		tmpl, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
		meta := tmpl["metadata"].(map[string]any)
		Expect(meta["annotations"]).To(Equal(map[string]any{"prometheus.io/scrape": "true"}))
		Expect(meta["labels"]).To(HaveKeyWithValue("team", "platform"))
		Expect(meta["labels"]).To(HaveKeyWithValue("app.kubernetes.io/name", "polycrate-operator"), "the selector's labels stay")
		spec := tmpl["spec"].(map[string]any)
		Expect(spec["topologySpreadConstraints"]).To(HaveLen(1))
		ctr := spec["containers"].([]any)[0].(map[string]any)
		Expect(ctr["image"]).To(Equal("ghcr.io/polycrate/polycrate-operator@" + digest))
		Expect(ctr["args"]).To(ContainElements("--zap-log-level=debug", "--max-concurrent-reconciles=8"))
		Expect(ctr["env"]).To(ContainElement(map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy.internal:3128"}))
		Expect(ctr["env"]).To(ContainElement(HaveKeyWithValue("name", "POD_NAMESPACE")))
		job := find(objs, "Job", "polycrate-operator-cleanup")
		jc, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
		Expect(jc[0].(map[string]any)["image"]).To(Equal(ctr["image"]), "the hook runs the same image")
	})

	It("ships the Grafana dashboard and the alerts behind values, on the operator's own series", func() {
		objs := mustRender(map[string]any{"fullnameOverride": "pco", "metrics": map[string]any{
			"prometheusRule":   map[string]any{"enabled": true, "certificateExpiryDays": 21},
			"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring"}}})
		cm := find(objs, "ConfigMap", "pco-dashboard")
		Expect(cm).NotTo(BeNil())
		Expect(cm.GetNamespace()).To(Equal("monitoring"))
		Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		file, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "helm", "polycrate-operator", "files", "grafana-dashboard.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(data["polycrate-operator.json"]).To(Equal(string(file)), "the ConfigMap carries the dashboard file unchanged")
		dash := map[string]any{}
		Expect(json.Unmarshal(file, &dash)).To(Succeed())
		Expect(dash["uid"]).To(Equal("polycrate-operator"))

		rule := find(objs, "PrometheusRule", "pco")
		Expect(rule).NotTo(BeNil())
		b, err := yaml.Marshal(rule.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		// The selector follows the Service's name (the job a ServiceMonitor yields).
		Expect(string(b)).To(ContainSubstring(`job="pco-metrics", namespace="polycrate"`))
		Expect(string(b)).To(ContainSubstring("< 21 * 86400"))
		Expect(string(b)).NotTo(ContainSubstring("polycrate-operator-metrics"))
		// A custom selector replaces it everywhere.
		objs = mustRender(map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true, "selector": `cluster="eu-1"`}}})
		b, err = yaml.Marshal(find(objs, "PrometheusRule", "polycrate-operator").Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(`polycrate_operator_info{cluster="eu-1"}`))
		Expect(string(b)).NotTo(ContainSubstring("job="))
		dryRun(objs)
	})

	It("renders the DNS webhooks' Services, APIService and ports only for enabled servers, on the OperatorConfig's ports", func() {
		// Defaults: the external-dns provider is on (the seed), at the seed's URL
		// http://polycrate-operator.polycrate.svc:8888; the DNS01 webhook is off.
		objs := mustRender(map[string]any{"operatorConfig": map[string]any{"create": true}})
		svc := find(objs, "Service", "polycrate-operator")
		Expect(svc).NotTo(BeNil())
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		Expect(ports).To(ConsistOf(
			And(HaveKeyWithValue("name", "health"), HaveKeyWithValue("port", BeNumerically("==", 8081)), HaveKeyWithValue("targetPort", "health")),
			And(HaveKeyWithValue("name", "external-dns"), HaveKeyWithValue("port", BeNumerically("==", 8888)), HaveKeyWithValue("targetPort", "external-dns"))))
		Expect(find(objs, "APIService", "v1alpha1.webhook.dns.polycrate.io")).To(BeNil())
		oc := find(objs, "OperatorConfig", "default")
		edns, _, _ := unstructured.NestedMap(oc.Object, "spec", "external_dns_webhook")
		Expect(edns).To(And(HaveLen(2), HaveKeyWithValue("enabled", true), HaveKeyWithValue("port", BeNumerically("==", 8888))))
		dns01, _, _ := unstructured.NestedMap(oc.Object, "spec", "dns01_webhook")
		Expect(dns01).To(HaveKeyWithValue("enabled", false))
		dryRun(objs)

		// The external-dns provider off: no port for it (the Service keeps health);
		// DNS01 on a custom port: the APIService's Service targets the port the
		// OperatorConfig serves on.
		objs = mustRender(map[string]any{"operatorConfig": map[string]any{"create": true},
			"externalDNSWebhook": map[string]any{"enabled": false}, "dns01Webhook": map[string]any{"enabled": true, "port": 9443}})
		ports, _, _ = unstructured.NestedSlice(find(objs, "Service", "polycrate-operator").Object, "spec", "ports")
		Expect(ports).To(ConsistOf(HaveKeyWithValue("name", "health")))
		d := find(objs, "Deployment", "polycrate-operator")
		ctrs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		Expect(ctrs[0].(map[string]any)["ports"]).To(ContainElement(And(HaveKeyWithValue("name", "dns01-webhook"),
			HaveKeyWithValue("containerPort", BeNumerically("==", 9443)))))
		Expect(ctrs[0].(map[string]any)["ports"]).NotTo(ContainElement(HaveKeyWithValue("name", "external-dns")))
		oc = find(objs, "OperatorConfig", "default")
		dns01, _, _ = unstructured.NestedMap(oc.Object, "spec", "dns01_webhook")
		Expect(dns01).To(And(HaveLen(4), HaveKeyWithValue("enabled", true), HaveKeyWithValue("port", BeNumerically("==", 9443)),
			HaveKeyWithValue("group_name", "webhook.dns.polycrate.io"), HaveKeyWithValue("solver_name", "polycrate")))
		Expect(find(objs, "APIService", "v1alpha1.webhook.dns.polycrate.io")).NotTo(BeNil())
		dryRun(objs)
	})

	It("grants the cloud controller's RBAC only while it is enabled, and writes its switches into the OperatorConfig", func() {
		off := mustRender(map[string]any{"operatorConfig": map[string]any{"create": true}})
		Expect(find(off, "ClusterRole", "polycrate-operator-cloud-controller")).To(BeNil())
		Expect(find(off, "ClusterRoleBinding", "polycrate-operator-cloud-controller")).To(BeNil())
		for _, o := range off {
			if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
				rules := flatten(rulesOf(o))
				Expect(rules).NotTo(ContainElement(HavePrefix("/nodes:update")), o.GetName())
				Expect(rules).NotTo(ContainElement(HavePrefix("/services/status:patch")), o.GetName())
			}
		}
		cc, _, _ := unstructured.NestedMap(find(off, "OperatorConfig", "default").Object, "spec", "cloud_controller")
		Expect(cc).To(Equal(map[string]any{"enabled": false, "load_balancer": map[string]any{"enabled": true, "service_scope": "all"}}))

		on := mustRender(allFeatures)
		Expect(flatten(rulesOf(find(on, "ClusterRole", "polycrate-operator-cloud-controller")))).To(Equal(flatten(cloud.ClusterRoleRules)))
		b := find(on, "ClusterRoleBinding", "polycrate-operator-cloud-controller")
		Expect(b).NotTo(BeNil())
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		Expect(subjects).To(ConsistOf(map[string]any{"kind": "ServiceAccount", "name": "polycrate-operator", "namespace": "polycrate"}))
		cc, _, _ = unstructured.NestedMap(find(on, "OperatorConfig", "default").Object, "spec", "cloud_controller")
		Expect(cc).To(Equal(map[string]any{"enabled": true, "load_balancer": map[string]any{"enabled": true, "service_scope": "opt-in"}}))
		dryRun(on)
	})

	It("grants icmp checks unprivileged ping sockets by default (a safe sysctl, no capability), and the Pod passes the restricted Pod Security level", func() {
		psc := func(objs []*unstructured.Unstructured) map[string]any {
			m, _, _ := unstructured.NestedMap(find(objs, "Deployment", "polycrate-operator").Object, "spec", "template", "spec", "securityContext")
			return m
		}
		objs := mustRender(nil)
		Expect(psc(objs)["sysctls"]).To(Equal([]any{map[string]any{"name": "net.ipv4.ping_group_range", "value": "0 2147483647"}}))
		Expect(psc(objs)["runAsNonRoot"]).To(BeTrue())
		dryRun(objs)
		Expect(psc(mustRender(map[string]any{"monitoring": map[string]any{"icmp": map[string]any{"pingGroupRange": false}}}))).NotTo(HaveKey("sysctls"))

		// The kube-apiserver's own PodSecurity admission judges the Pod the
		// Deployment makes, in a namespace that enforces the restricted level.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psa-restricted", Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, ns))).To(Succeed())
		podOf := func(objs []*unstructured.Unstructured) *corev1.Pod {
			tmpl, _, _ := unstructured.NestedMap(find(objs, "Deployment", "polycrate-operator").Object, "spec", "template")
			pod := &corev1.Pod{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod)).To(Succeed())
			pod.Namespace, pod.Name = ns.Name, "polycrate-operator-psa"
			return pod
		}
		for name, values := range map[string]map[string]any{"defaults": nil, "every feature": allFeatures} {
			Expect(k8s.Create(ctx, podOf(mustRender(values)), client.DryRunAll)).To(Succeed(), name)
		}
		// The admission is really on: an unsafe sysctl and a raw-socket capability are refused.
		unsafe := podOf(objs)
		unsafe.Spec.SecurityContext.Sysctls = append(unsafe.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "net.core.somaxconn", Value: "1024"})
		Expect(k8s.Create(ctx, unsafe, client.DryRunAll)).To(MatchError(ContainSubstring("violates PodSecurity \"restricted:latest\"")))
		raw := podOf(objs)
		raw.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_RAW"}
		Expect(k8s.Create(ctx, raw, client.DryRunAll)).To(MatchError(ContainSubstring("unrestricted capabilities")))
	})

	It("ships a helm test that runs the health command against the Service", func() {
		objs := mustRender(allFeatures)
		dryRun(objs)
		pod := find(objs, "Pod", "polycrate-operator-test-health")
		Expect(pod).NotTo(BeNil())
		Expect(pod.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "test"))
		c, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
		Expect(c[0].(map[string]any)["args"]).To(Equal([]any{"health", "--url=http://polycrate-operator.polycrate.svc:8081"}))
		spec, _, _ := unstructured.NestedMap(pod.Object, "spec")
		Expect(spec["imagePullSecrets"]).To(Equal([]any{map[string]any{"name": "regcred"}}))
	})

	It("serves the seed's URLs with the defaults: health at polycrate-operator.polycrate:8081, external-dns at polycrate-operator.polycrate.svc:8888", func() {
		// Seed 002: `polycrate operator health --url http://polycrate-operator.polycrate:8081`
		// and external-dns's --webhook-provider-url=http://polycrate-operator.polycrate.svc:8888.
		for _, values := range []map[string]any{nil, {"metrics": map[string]any{"service": map[string]any{"enabled": false}}}} {
			objs := mustRender(values)
			dryRun(objs)
			svc := find(objs, "Service", "polycrate-operator")
			Expect(svc).NotTo(BeNil(), "no Service polycrate-operator (values %v)", values)
			Expect(svc.GetNamespace()).To(Equal("polycrate"))
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			Expect(ports).To(ContainElements(
				And(HaveKeyWithValue("port", BeNumerically("==", 8081)), HaveKeyWithValue("targetPort", "health")),
				And(HaveKeyWithValue("port", BeNumerically("==", 8888)), HaveKeyWithValue("targetPort", "external-dns"))))
			// The Service's target ports are the container's named ports, and the
			// container listens where they say.
			d := find(objs, "Deployment", "polycrate-operator")
			ctrs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			ctr := ctrs[0].(map[string]any)
			Expect(ctr["ports"]).To(ContainElements(
				And(HaveKeyWithValue("name", "health"), HaveKeyWithValue("containerPort", BeNumerically("==", 8081))),
				And(HaveKeyWithValue("name", "external-dns"), HaveKeyWithValue("containerPort", BeNumerically("==", 8888)))))
			Expect(ctr["args"]).To(ContainElement("--health-probe-bind-address=:8081"))
			sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
			labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			for k, v := range sel {
				Expect(labels).To(HaveKeyWithValue(k, v))
			}
		}
	})

	It("prints NOTES that say what to check, and what is still missing", func() {
		notes := func(values map[string]any) string {
			files, err := helmchart.Files(pchr, values)
			Expect(err).NotTo(HaveOccurred())
			return files["polycrate-operator/templates/NOTES.txt"]
		}
		bare := notes(nil)
		Expect(bare).To(ContainSubstring("kubectl -n polycrate get operatorconfig default"))
		Expect(bare).To(ContainSubstring("This release created no OperatorConfig"))
		Expect(bare).To(ContainSubstring("No agent token was given"))
		Expect(bare).To(ContainSubstring("kubectl get pep"))
		Expect(bare).To(ContainSubstring("--webhook-provider-url=http://polycrate-operator.polycrate.svc:8888"))
		Expect(bare).To(ContainSubstring("external_dns_webhook: {port: 8888}"))
		full := notes(allFeatures)
		Expect(full).NotTo(ContainSubstring("This release created no OperatorConfig"))
		Expect(full).NotTo(ContainSubstring("No agent token was given"))
		Expect(full).NotTo(ContainSubstring("must serve what this release exposes"), "the chart wrote the OperatorConfig itself")
		own := notes(map[string]any{"dns01Webhook": map[string]any{"enabled": true}})
		Expect(own).To(ContainSubstring("dns01_webhook: {enabled: true, port: 10250, group_name: webhook.dns.polycrate.io, solver_name: polycrate}"))
	})

	It("grants CRD writes and the cleanup hook's Secret and Deployment access by name only", func() {
		objs := mustRender(allFeatures)
		// The manager may read every CRD, but create and patch only its own, by name.
		for _, r := range rules(find(objs, "ClusterRole", "polycrate-operator-manager")) {
			if slices.Contains(r.Resources, "customresourcedefinitions") && (slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "patch")) {
				Expect(r.ResourceNames).To(HaveLen(10), "CRD writes without resourceNames")
				Expect(r.ResourceNames).To(ContainElements("operatorconfigs.polycrate.io", "s3buckets.polycrate.io"))
			}
		}
		// The cleanup hook: cluster-wide only what it strips finalizers from;
		// the token Secret and the operator's Deployment in a Role, by name.
		for _, r := range rules(find(objs, "ClusterRole", "polycrate-operator-cleanup")) {
			Expect(r.Resources).NotTo(ContainElement("secrets"), "the hook's ClusterRole reaches Secrets")
			Expect(r.Resources).NotTo(ContainElement("deployments"), "the hook's ClusterRole reaches Deployments")
		}
		role := find(objs, "Role", "polycrate-operator-cleanup")
		Expect(role).NotTo(BeNil())
		Expect(role.GetNamespace()).To(Equal("polycrate"))
		Expect(rules(role)).To(ConsistOf(
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"polycrate-operator"}, Verbs: []string{"get", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"polycrate-api-creds"}, Verbs: []string{"get"}}))
		Expect(find(objs, "RoleBinding", "polycrate-operator-cleanup")).NotTo(BeNil())
		// Without retireAPI the hook reads no Secret at all.
		Expect(rules(find(mustRender(nil), "Role", "polycrate-operator-cleanup"))).To(HaveLen(1))
	})

	It("grants Secrets cluster-wide by default, and only by Roles in rbac.secretNamespaces when set — and tells the operator", func() {
		grantsSecrets := func(rs []rbacv1.PolicyRule) bool {
			return slices.ContainsFunc(rs, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") })
		}
		args := func(objs []*unstructured.Unstructured) []any {
			c, _, _ := unstructured.NestedSlice(find(objs, "Deployment", "polycrate-operator").Object, "spec", "template", "spec", "containers")
			return c[0].(map[string]any)["args"].([]any)
		}
		def := mustRender(nil)
		Expect(grantsSecrets(rules(find(def, "ClusterRole", "polycrate-operator-manager")))).To(BeTrue())
		Expect(find(def, "Role", "polycrate-operator-secrets")).To(BeNil())
		Expect(args(def)).NotTo(ContainElement(HavePrefix("--secret-namespaces")))

		objs := mustRender(map[string]any{"rbac": map[string]any{"secretNamespaces": []any{"default", "kube-public"}}})
		dryRun(objs)
		Expect(grantsSecrets(rules(find(objs, "ClusterRole", "polycrate-operator-manager")))).To(BeFalse(), "the ClusterRole still grants Secrets")
		var roles []string
		for _, o := range objs {
			if o.GetKind() == "Role" && o.GetName() == "polycrate-operator-secrets" {
				roles = append(roles, o.GetNamespace())
				Expect(rules(o)).To(ConsistOf(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
					Verbs: []string{"create", "delete", "get", "list", "update", "watch"}}))
			}
			if o.GetKind() == "RoleBinding" && o.GetName() == "polycrate-operator-secrets" {
				subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				Expect(subjects).To(ConsistOf(HaveKeyWithValue("namespace", "polycrate")))
			}
		}
		Expect(roles).To(ConsistOf("default", "kube-public"))
		Expect(args(objs)).To(ContainElement("--secret-namespaces=default,kube-public"))
		_, err := render(map[string]any{"rbac": map[string]any{"secretNamespaces": []any{"Not A Namespace"}}})
		Expect(err).To(MatchError(ContainSubstring("secretNamespaces")), "the schema refuses an invalid namespace")
	})

	It("renames every object with fullnameOverride, and keeps the label the operator finds its Pods by", func() {
		objs := mustRender(map[string]any{"fullnameOverride": "pco-staging", "cleanupHook": map[string]any{"retireAPI": true}})
		dryRun(objs)
		d := find(objs, "Deployment", "pco-staging")
		Expect(d).NotTo(BeNil())
		labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		Expect(labels).To(HaveKeyWithValue("app.kubernetes.io/name", "polycrate-operator"))
		Expect(find(objs, "ClusterRole", "pco-staging-manager")).NotTo(BeNil())
		job := find(objs, "Job", "pco-staging-cleanup")
		c, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
		Expect(c[0].(map[string]any)["args"]).To(ContainElement("--scale-down=pco-staging"))
		test := find(objs, "Pod", "pco-staging-test-health")
		tc, _, _ := unstructured.NestedSlice(test.Object, "spec", "containers")
		Expect(tc[0].(map[string]any)["args"]).To(ContainElement("--url=http://pco-staging.polycrate.svc:8081"))
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "OperatorConfig" && o.GetKind() != "Secret" {
				Expect(o.GetName()).NotTo(HavePrefix("polycrate-operator"), "%s %s kept the default name", o.GetKind(), o.GetName())
			}
		}
		Expect(find(mustRender(map[string]any{"nameOverride": "pco"}), "Deployment", "pco")).NotTo(BeNil())
	})

	It("aggregates read access into view and write access to the declared kinds into edit", func() {
		objs := mustRender(nil)
		view, edit := find(objs, "ClusterRole", "polycrate-operator-view"), find(objs, "ClusterRole", "polycrate-operator-edit")
		Expect(view).NotTo(BeNil())
		Expect(edit).NotTo(BeNil())
		Expect(view.GetLabels()).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-view", "true"))
		Expect(edit.GetLabels()).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"))
		Expect(edit.GetLabels()).NotTo(HaveKey("rbac.authorization.k8s.io/aggregate-to-view"), "view never writes")
		Expect(flatten(rulesOf(view))).To(ContainElement("polycrate.io/s3buckets:list@"))
		Expect(flatten(rulesOf(edit))).To(ContainElement("polycrate.io/s3buckets:create@"))
		Expect(flatten(rulesOf(edit))).NotTo(ContainElement("polycrate.io/hosts:create@"))
		dryRun([]*unstructured.Unstructured{view, edit})

		off := mustRender(map[string]any{"rbac": map[string]any{"aggregateToDefaultRoles": false}})
		Expect(find(off, "ClusterRole", "polycrate-operator-view")).To(BeNil())
	})

	It("grants exactly the RBAC the markers generate; CRD writes only with crds.install", func() {
		cluster, namespaced := markerRBAC()
		objs := mustRender(allFeatures)
		Expect(flatten(rulesOf(find(objs, "ClusterRole", "polycrate-operator-manager")))).To(Equal(flatten(cluster)))
		Expect(flatten(rulesOf(find(objs, "Role", "polycrate-operator-manager")))).To(ContainElements(flatten(namespaced)))

		off := mustRender(map[string]any{"crds": map[string]any{"install": false}})
		rules := flatten(rulesOf(find(off, "ClusterRole", "polycrate-operator-manager")))
		Expect(rules).NotTo(ContainElement(HavePrefix("apiextensions.k8s.io/customresourcedefinitions:create")))
		Expect(rules).NotTo(ContainElement(HavePrefix("apiextensions.k8s.io/customresourcedefinitions:patch")))
		Expect(rules).To(ContainElement(HavePrefix("apiextensions.k8s.io/customresourcedefinitions:watch")))
		d := find(off, "Deployment", "polycrate-operator")
		c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		Expect(c[0].(map[string]any)["args"]).To(ContainElement("--install-crds=false"))
		for _, o := range append(objs, off...) {
			if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
				for _, r := range rulesOf(o) {
					if o.GetName() == "polycrate-operator-dns01:domain-solver" {
						continue // cert-manager's solver permission on the webhook's own group
					}
					Expect(r.Verbs).NotTo(ContainElement("*"), o.GetName())
					Expect(r.Resources).NotTo(ContainElement("*"), o.GetName())
				}
			}
		}
	})

	It("would catch a schema error: the API server refuses an unknown field in dry-run", func() {
		objs := mustRender(nil)
		d := find(objs, "Deployment", "polycrate-operator").DeepCopy()
		Expect(unstructured.SetNestedField(d.Object, "yes", "spec", "template", "spec", "hostNetwrk")).To(Succeed())
		err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(d), client.FieldOwner("chart-test"), client.ForceOwnership, client.DryRunAll)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("hostNetwrk"))
	})

	It("rejects bad values with a message (values.schema.json)", func() {
		for _, bad := range []map[string]any{
			{"replicas": "two"},
			{"replica": 2},
			{"image": map[string]any{"pullPolicy": "Sometimes"}},
			{"metrics": map[string]any{"service": map[string]any{"port": 70000}}},
			{"dns01Webhook": map[string]any{"groupName": "Not A Group"}},
			{"crds": map[string]any{"install": "yes"}},
			{"image": map[string]any{"digest": "latest"}},
			{"extraArgs": "--foo"},
			{"fullnameOverride": "Not_A_Name"},
		} {
			_, err := render(bad)
			Expect(err).To(HaveOccurred(), "%v", bad)
			Expect(err.Error()).To(ContainSubstring("values don't meet the specifications of the schema"), "%v", bad)
		}
	})

	It("ships the generated CRDs unchanged", func() {
		bases, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "config", "crd", "bases", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(pchr.CRDObjects()).To(HaveLen(len(bases)))
		for _, f := range bases {
			want, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			found := false
			for _, crd := range pchr.CRDObjects() {
				if filepath.Base(crd.Filename) == filepath.Base(f) {
					found = true
					Expect(string(crd.File.Data)).To(Equal(string(want)), crd.Filename)
				}
			}
			Expect(found).To(BeTrue(), f)
		}
	})
})
