package preflight_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	rbacfiles "github.com/polycrate/polycrate-operator/config/rbac"
	"github.com/polycrate/polycrate-operator/internal/cli"
	"github.com/polycrate/polycrate-operator/internal/preflight"
)

// deployerRules are exactly the rights of the default profiles: the operator's
// own roles (both, cluster-wide for the test) and the seed's deploy rights.
func deployerRules() []rbacv1.PolicyRule {
	GinkgoHelper()
	var out []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(rbacfiles.Role), "\n---") {
		var role struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		Expect(yaml.Unmarshal([]byte(doc), &role)).To(Succeed())
		out = append(out, role.Rules...)
	}
	return append(out,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews"}, Verbs: []string{"create"}},
		// What the checks read.
		rbacv1.PolicyRule{APIGroups: []string{"", "storage.k8s.io", "networking.k8s.io", "discovery.k8s.io", "apps", "velero.io",
			"gateway.networking.k8s.io", "apiextensions.k8s.io", "polycrate.io"},
			Resources: []string{"nodes", "services", "serviceaccounts", "secrets", "storageclasses", "ingressclasses", "endpointslices", "daemonsets",
				"backupstoragelocations", "gatewayclasses", "customresourcedefinitions", "s3buckets"}, Verbs: []string{"get", "list"}})
}

// user is an envtest user bound to a ClusterRole with these rules.
func user(name string, rules []rbacv1.PolicyRule) *rest.Config {
	GinkgoHelper()
	u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:authenticated"}}, adminCfg)
	Expect(err).NotTo(HaveOccurred())
	if rules != nil {
		Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}})).To(Succeed())
	}
	return u.Config()
}

func create(objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
}

func readyNode(name string, heartbeat time.Time) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat)}}
	return n
}

func setStatus(obj client.Object, mutate func()) {
	GinkgoHelper()
	mutate()
	Expect(k8s.Status().Update(ctx, obj)).To(Succeed())
}

func bsl(phase, s3URL string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
		"metadata": map[string]any{"namespace": "velero", "name": "default"},
		"spec":     map[string]any{"provider": "aws", "objectStorage": map[string]any{"bucket": "backups"}, "config": map[string]any{"s3Url": s3URL}},
		"status":   map[string]any{"phase": phase}}}
	return u
}

var _ = Describe("the checklist", Ordered, func() {
	var deployer *rest.Config
	node := readyNode("worker-1", time.Now())

	BeforeAll(func() {
		// A cluster that has every row.
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}})
		create(node)
		setStatus(node, func() { node.Status.Conditions = readyNode("worker-1", time.Now()).Status.Conditions })
		create(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cilium"}, Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "cilium"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "cilium"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "quay.io/cilium/cilium:v1.16"}}}}}})
		create(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ceph-block", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: "rbd.csi.ceph.com"},
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ceph-fs"}, Provisioner: "cephfs.csi.ceph.com"})
		create(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}})
		create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}})
		create(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-1",
			Labels: map[string]string{"kubernetes.io/service-name": "kube-dns"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}})
		create(bsl("Available", "https://s3.fsn1.example.com"))
		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.acme.corp":{"auth":"eDp5"}}}`)}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "default"},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}})
		deployer = user("deployer", deployerRules())
	})

	It("passes a cluster that has every row, with the rights the packages need and no more", func() {
		rep := check(deployer, preflight.Options{PullSecrets: []string{"regcred"}})
		for _, r := range rep.Rows {
			if r.Topic == "Jump host" {
				Expect(r.Verdict).To(Equal(preflight.Unknown), "the jump host is not visible from the cluster")
				continue
			}
			Expect(r.Verdict).To(Equal(preflight.OK), "%s: %s", r.Topic, r.Found)
			Expect(r.Consequence).To(BeEmpty())
		}
		Expect(rep.Failed()).To(BeFalse())
		Expect(rep.Summary).To(Equal("preflight: 8 ok, 0 warning, 0 missing, 1 unknown — every hard requirement holds"))
		Expect(rowOf(rep, "Kubernetes API").Found).To(HavePrefix("reachable, version v1.37"))
		Expect(rowOf(rep, "CNI").Found).To(ContainSubstring("NetworkPolicies enforced by Cilium"))
		Expect(rowOf(rep, "CSI / StorageClass").Found).To(And(ContainSubstring("default ceph-block"), ContainSubstring("RWX: ceph-fs")))
		Expect(rowOf(rep, "DNS and NTP").Found).To(ContainSubstring("1 node clocks within"))
	})

	It("warns about a silent cluster-admin", func() {
		r := rowOf(check(nil, preflight.Options{}), "Rights")
		Expect(r.Verdict).To(Equal(preflight.Warning))
		Expect(r.Found).To(ContainSubstring("as cluster-admin"))
		Expect(r.Consequence).To(ContainSubstring("kein stilles Cluster-Admin"))
	})

	It("misses the rights of an identity without them, naming what is denied, and fails", func() {
		rep := check(user("nobody", []rbacv1.PolicyRule{{APIGroups: []string{"authorization.k8s.io"},
			Resources: []string{"selfsubjectaccessreviews"}, Verbs: []string{"create"}}}), preflight.Options{Profiles: []string{"deploy"}})
		r := rowOf(rep, "Rights")
		Expect(r.Verdict).To(Equal(preflight.Missing))
		Expect(r.Found).To(And(ContainSubstring("3 of 3 rights denied"), ContainSubstring("deploy: create deployments.apps")))
		Expect(r.Consequence).To(ContainSubstring("Overlay explodiert"))
		Expect(rep.Failed()).To(BeTrue())
	})

	It("misses a default StorageClass, and fails", func() {
		sc := &storagev1.StorageClass{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "ceph-block"}, sc)).To(Succeed())
		sc.Annotations = nil
		Expect(k8s.Update(ctx, sc)).To(Succeed())
		DeferCleanup(func() {
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "ceph-block"}, sc)).To(Succeed())
			sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
			Expect(k8s.Update(ctx, sc)).To(Succeed())
		})
		rep := check(deployer, preflight.Options{})
		r := rowOf(rep, "CSI / StorageClass")
		Expect(r.Verdict).To(Equal(preflight.Missing))
		Expect(r.Found).To(ContainSubstring("no default StorageClass; classes: ceph-block (rbd.csi.ceph.com), ceph-fs (cephfs.csi.ceph.com)"))
		Expect(r.Consequence).To(ContainSubstring("Stateful Workloads nicht starten"))
		Expect(rep.Failed()).To(BeTrue())
		Expect(rep.Summary).To(HaveSuffix("hard requirements missing: CSI / StorageClass"))
	})

	It("misses an IngressClass (a warning for whoever may install a controller)", func() {
		ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}}
		Expect(k8s.Delete(ctx, ic)).To(Succeed())
		DeferCleanup(func() {
			create(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}})
		})
		Expect(rowOf(check(deployer, preflight.Options{}), "Ingress or Gateway").Verdict).To(Equal(preflight.Missing))
		r := rowOf(check(nil, preflight.Options{}), "Ingress or Gateway")
		Expect(r.Verdict).To(Equal(preflight.Warning))
		Expect(r.Found).To(ContainSubstring("the right to install an Ingress controller"))
	})

	It("misses a BackupStorageLocation that is Unavailable, and warns about backups inside the cluster", func() {
		loc := bsl("", "")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "velero", Name: "default"}, loc)).To(Succeed())
		Expect(unstructured.SetNestedField(loc.Object, "Unavailable", "status", "phase")).To(Succeed())
		Expect(k8s.Update(ctx, loc)).To(Succeed())
		r := rowOf(check(deployer, preflight.Options{}), "Object storage")
		Expect(r.Verdict).To(Equal(preflight.Missing))
		Expect(r.Found).To(ContainSubstring(`velero/default (phase "Unavailable")`))

		Expect(unstructured.SetNestedField(loc.Object, "Available", "status", "phase")).To(Succeed())
		Expect(unstructured.SetNestedField(loc.Object, "http://minio.velero.svc:9000", "spec", "config", "s3Url")).To(Succeed())
		Expect(k8s.Update(ctx, loc)).To(Succeed())
		r = rowOf(check(deployer, preflight.Options{}), "Object storage")
		Expect(r.Verdict).To(Equal(preflight.Warning))
		Expect(r.Found).To(ContainSubstring("inside the cluster they protect"))
		Expect(r.Consequence).To(ContainSubstring("kein DR"))
		Expect(unstructured.SetNestedField(loc.Object, "https://s3.fsn1.example.com", "spec", "config", "s3Url")).To(Succeed())
		Expect(k8s.Update(ctx, loc)).To(Succeed())
	})

	It("misses a pull secret the ServiceAccount does not carry; says unknown when none is named", func() {
		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}})
		r := rowOf(check(deployer, preflight.Options{PullSecrets: []string{"regcred", "other", "absent"}}), "Registry pull")
		Expect(r.Verdict).To(Equal(preflight.Missing))
		Expect(r.Found).To(And(ContainSubstring("other not on ServiceAccount shop/default"), ContainSubstring("Secret shop/absent missing")))
		Expect(rowOf(check(deployer, preflight.Options{}), "Registry pull").Verdict).To(Equal(preflight.Unknown))
	})

	It("warns about a node clock ahead of the API server's, and misses a node without pod network", func() {
		setStatus(node, func() {
			node.Status.Conditions = readyNode("worker-1", time.Now().Add(3*time.Minute)).Status.Conditions
		})
		r := rowOf(check(deployer, preflight.Options{}), "DNS and NTP")
		Expect(r.Verdict).To(Equal(preflight.Warning))
		Expect(r.Found).To(ContainSubstring("worker-1 ahead"))

		setStatus(node, func() {
			node.Status.Conditions = append(readyNode("worker-1", time.Now()).Status.Conditions,
				corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: "NoRouteCreated"})
		})
		r = rowOf(check(deployer, preflight.Options{}), "CNI")
		Expect(r.Verdict).To(Equal(preflight.Missing))
		Expect(r.Found).To(ContainSubstring("worker-1"))
		setStatus(node, func() { node.Status.Conditions = readyNode("worker-1", time.Now()).Status.Conditions })
	})

	It("misses an old Kubernetes version (faked by a server in front of the API), and fails", func() {
		target, err := url.Parse(adminCfg.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy := httputil.NewSingleHostReverseProxy(target)
		tr, err := rest.TransportFor(adminCfg)
		Expect(err).NotTo(HaveOccurred())
		proxy.Transport = tr
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/version" {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]string{"gitVersion": "v1.25.16", "major": "1", "minor": "25"})
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer fake.Close()
		cfg := &rest.Config{Host: fake.URL} // the proxy carries the admin's credentials
		rep := check(cfg, preflight.Options{})
		r := rowOf(rep, "Kubernetes API")
		Expect(r.Verdict).To(Equal(preflight.Missing))
		Expect(r.Found).To(Equal("reachable, version v1.25.16: older than 1.27"))
		Expect(r.Consequence).To(ContainSubstring("kein Deploy"))
		Expect(rep.Failed()).To(BeTrue())
	})

	It("the CLI prints the summary first and a row per topic, exits 1 on a hard miss, and speaks json", func() {
		dir := GinkgoT().TempDir()
		kubeconfig := filepath.Join(dir, "kubeconfig")
		kc := clientcmdapi.NewConfig()
		kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: deployer.Host, CertificateAuthorityData: deployer.CAData}
		kc.AuthInfos["deployer"] = &clientcmdapi.AuthInfo{ClientCertificateData: deployer.CertData, ClientKeyData: deployer.KeyData}
		kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "deployer"}
		kc.CurrentContext = "envtest"
		Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())

		run := func(args ...string) (string, error) {
			root := cli.NewRootCommand()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(io.Discard)
			root.SetArgs(append([]string{"preflight", "--kubeconfig", kubeconfig, "-n", "shop"}, args...))
			err := root.Execute()
			return out.String(), err
		}
		out, err := run("--pull-secret", "regcred")
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(out, "\n")
		Expect(lines[0]).To(Equal("preflight: 8 ok, 0 warning, 0 missing, 1 unknown — every hard requirement holds"))
		Expect(out).To(ContainSubstring("TOPIC"))
		Expect(out).To(MatchRegexp(`CSI / StorageClass\s+OK \(hard\)`))
		Expect(out).To(MatchRegexp(`Jump host\s+UNKNOWN`))
		_ = os.WriteFile(filepath.Join(dir, "preflight.txt"), []byte(out), 0o644)
		AddReportEntry("preflight output", out)

		out, err = run("--min-version", "1.99", "--profile", "deploy,cloud-controller")
		Expect(err).To(MatchError(cli.ErrPreflightFailed))
		Expect(strings.Split(out, "\n")[0]).To(HaveSuffix("hard requirements missing: Kubernetes API, Rights"))
		AddReportEntry("preflight output, failing", out)

		out, err = run("--min-version", "1.99", "-o", "json")
		Expect(err).To(MatchError(cli.ErrPreflightFailed))
		var rep preflight.Report
		Expect(json.Unmarshal([]byte(out), &rep)).To(Succeed())
		Expect(rep.Rows[0].Verdict).To(Equal(preflight.Missing))
		Expect(rep.Summary).To(HaveSuffix("hard requirements missing: Kubernetes API"))
	})
})
