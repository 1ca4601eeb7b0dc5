package crds_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

func yamlOf(obj any) ([]byte, error) { return yaml.Marshal(obj) }

func ensureNamespace(name string) {
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

var nsCounter int

func freshNamespace() string {
	nsCounter++
	name := fmt.Sprintf("schema-%d", nsCounter)
	ensureNamespace(name)
	return name
}

// normalise makes two JSON-able values comparable (numbers become float64).
func normalise(v any) any {
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	var out any
	Expect(json.Unmarshal(b, &out)).To(Succeed())
	return out
}

// subsetOf reports the first path where want is not contained in got.
func subsetOf(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path + ": not an object in the stored resource"
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return path + "." + k + ": missing (pruned by the schema?)"
			}
			if d := subsetOf(wv, gv, path+"."+k); d != "" {
				return d
			}
		}
		return ""
	default:
		if fmt.Sprint(normalise(want)) != fmt.Sprint(normalise(got)) {
			return fmt.Sprintf("%s: sample has %v, stored %v", path, want, got)
		}
		return ""
	}
}

func sampleFiles() []string {
	files, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "config", "samples", "polycrate_*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).NotTo(BeEmpty())
	return files
}

// strictApply applies u as `kubectl apply --server-side` does: an apply patch
// with fieldValidation=Strict. controller-runtime's typed Apply has no field
// validation option, hence the apply patch type of Patch.
func strictApply(u *unstructured.Unstructured, manager string) error {
	//nolint:staticcheck // client.Apply: the only way to send fieldValidation with an apply patch
	return k8s.Patch(ctx, u, client.Apply, client.FieldValidation("Strict"), client.FieldOwner(manager), client.ForceOwnership)
}

func newOperatorConfig(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "polycrate.io/v1alpha1", "kind": "OperatorConfig",
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func object(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "polycrate.io/v1alpha1", "kind": kind, "metadata": md, "spec": spec,
	}}
}

func expectRejected(obj client.Object, messages ...string) {
	err := k8s.Create(ctx, obj)
	Expect(err).To(HaveOccurred(), "the API server accepted an invalid %s", obj.GetObjectKind().GroupVersionKind().Kind)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	for _, m := range messages {
		Expect(err.Error()).To(ContainSubstring(m))
	}
}

func schemaSpecs() {
	It("accepts every sample in config/samples unchanged, without pruning a field", func() {
		for _, ns := range []string{"polycrate", "production", "velero"} {
			ensureNamespace(ns)
		}
		files := sampleFiles()
		kinds := map[string]bool{}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(raw, &u.Object)).To(Succeed(), f)
			want := u.DeepCopy()
			// Server-side apply with strict field validation, as `kubectl apply
			// --server-side` sends it; one manager per file.
			Expect(strictApply(u, "sample-"+filepath.Base(f))).To(Succeed(), "sample %s rejected", filepath.Base(f))

			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(want), got)).To(Succeed())
			Expect(subsetOf(want.Object["spec"], got.Object["spec"], "spec")).To(BeEmpty(), filepath.Base(f))
			Expect(subsetOf(map[string]any{"labels": want.GetLabels()}, map[string]any{"labels": got.GetLabels()}, "metadata")).To(BeEmpty(), filepath.Base(f))
			kinds[want.GetKind()] = true
		}
		Expect(kinds).To(HaveLen(10), "config/samples must hold an example of every kind")

		// The same path refuses what a strict kubectl refuses: an unknown field.
		u := newOperatorConfig("polycrate", "default", map[string]any{"api_sync": map[string]any{"workspace": "x"}})
		err := strictApply(u, "sample-unknown-field")
		Expect(err).To(HaveOccurred(), "an unknown field was accepted: the samples are not applied strictly")
		Expect(err.Error()).To(ContainSubstring(".spec.api_sync.workspace: field not declared in schema"))
	})

	It("accepts an OperatorConfig of a version before 0.29 with its workspace_id and organization_id, by kubectl apply (client-side) too", func() {
		ns := freshNamespace()
		raw, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "samples", "polycrate_v1alpha1_operatorconfig_pre029.yaml"))
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(raw, &u.Object)).To(Succeed())
		u.SetNamespace(ns)
		// kubectl apply's first POST: strict field validation.
		Expect(k8s.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		oc := &v1.OperatorConfig{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, oc)).To(Succeed())
		Expect(oc.Spec.APISync.WorkspaceID).To(Equal("550e8400-e29b-41d4-a716-446655440000"))
		Expect(oc.Spec.APISync.OrganizationID).To(Equal("6ba7b810-9dad-11d1-80b4-00c04fd430c8"))
	})

	It("defaults a bare OperatorConfig to the seed's values", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, newOperatorConfig(ns, "default", nil))).To(Succeed())
		oc := &v1.OperatorConfig{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, oc)).To(Succeed())
		s := oc.Spec
		Expect(s.APISync.Enabled).To(Equal(ptr.To(true)))
		Expect(s.APISync.APIURL).To(Equal("https://api.polycrate.io"))
		Expect(s.APISync.CredentialsRef).To(Equal(v1.CredentialsReference{SecretName: "polycrate-api-creds", TokenKey: "token"}))
		Expect(s.LocalCluster.Enabled).To(Equal(ptr.To(true)))
		Expect(s.EndpointDiscovery.Enabled).To(Equal(ptr.To(true)))
		Expect(s.EndpointDiscovery.Mode).To(Equal("annotation"))
		Expect(s.EndpointDiscovery.IgnoreNamespaces).To(Equal([]string{"kube-system", "kube-public", "polycrate"}))
		Expect(s.EndpointDiscovery.StaleCleanupMinutes).To(BeEquivalentTo(10))
		Expect(s.AppDiscovery.LabelDiscoveryEnabled).To(Equal(ptr.To(true)))
		Expect(s.AppDiscovery.IgnoreNamespaces).To(Equal([]string{"kube-system", "kube-public"}))
		Expect(s.AppDiscovery.StaleCleanupMinutes).To(BeEquivalentTo(10))
		Expect(s.NodeDiscovery.Enabled).To(Equal(ptr.To(true)))
		Expect(s.BackupDiscovery.VeleroNamespace).To(Equal("velero"))
		Expect(s.BackupDiscovery.CNPGEnabled).To(Equal(ptr.To(true)))
		Expect(s.CertificateDiscovery.IgnoreNamespaces).To(Equal([]string{"kube-system", "cert-manager"}))
		Expect(s.S3BucketProvisioning.Enabled).To(Equal(ptr.To(true)))
		Expect(s.CloudController.Enabled).To(BeFalse())
		Expect(s.CloudController.LoadBalancer.Enabled).To(Equal(ptr.To(true)))
		Expect(s.CloudController.LoadBalancer.ServiceScope).To(Equal("all"))
		Expect(s.DNS01Webhook).To(Equal(v1.DNS01WebhookConfig{Enabled: false, GroupName: "webhook.dns.polycrate.io", SolverName: "polycrate", Port: 10250}))
		Expect(s.ExternalDNSWebhook).To(Equal(v1.ExternalDNSWebhookConfig{Enabled: ptr.To(true), Port: 8888}))
	})

	It("keeps an explicit false where the default is true, and explicit empty lists", func() {
		ns := freshNamespace()
		oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
		oc.Spec.EndpointDiscovery.Enabled = ptr.To(false)
		oc.Spec.ExternalDNSWebhook.Enabled = ptr.To(false)
		Expect(k8s.Create(ctx, oc)).To(Succeed())
		got := &v1.OperatorConfig{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(oc), got)).To(Succeed())
		Expect(got.Spec.EndpointDiscovery.Enabled).To(Equal(ptr.To(false)))
		Expect(got.Spec.ExternalDNSWebhook.Enabled).To(Equal(ptr.To(false)))

		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain-http"},
			Spec: v1.EndpointSpec{RemoteAddress: "legacy.example.com", RemotePort: 80, TLS: ptr.To(false)}}
		Expect(k8s.Create(ctx, ep)).To(Succeed())
		gotEP := &v1.Endpoint{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ep), gotEP)).To(Succeed())
		Expect(gotEP.Spec.TLS).To(Equal(ptr.To(false)))
		Expect(gotEP.Spec.Path).To(Equal("/"))
		Expect(gotEP.Spec.Timeout).To(BeEquivalentTo(5))
		Expect(gotEP.Spec.Interval).To(BeEquivalentTo(60))
		Expect(gotEP.Spec.ExpectedStatusCodes).To(Equal([]int32{200}))
		Expect(gotEP.Spec.Kind).To(Equal("http"))
	})

	DescribeTable("rejects invalid objects with the schema's message",
		func(build func(ns string) client.Object, messages ...string) {
			expectRejected(build(freshNamespace()), messages...)
		},
		Entry("an OperatorConfig not named default", func(ns string) client.Object {
			return newOperatorConfig(ns, "custom", nil)
		}, "OperatorConfig is a singleton and must be named 'default'"),
		Entry("an unknown discovery mode", func(ns string) client.Object {
			return newOperatorConfig(ns, "default", map[string]any{"endpoint_discovery": map[string]any{"mode": "manual"}})
		}, "spec.endpoint_discovery.mode", `Unsupported value: "manual"`, `"annotation"`, `"auto"`),
		Entry("an unknown load balancer scope", func(ns string) client.Object {
			return newOperatorConfig(ns, "default", map[string]any{"cloud_controller": map[string]any{"load_balancer": map[string]any{"service_scope": "some"}}})
		}, "spec.cloud_controller.load_balancer.service_scope", `Unsupported value: "some"`),
		Entry("a DNS01 port above 65535", func(ns string) client.Object {
			return newOperatorConfig(ns, "default", map[string]any{"dns01_webhook": map[string]any{"port": 70000}})
		}, "spec.dns01_webhook.port", "less than or equal to 65535"),
		Entry("an external-dns port of 0", func(ns string) client.Object {
			return newOperatorConfig(ns, "default", map[string]any{"external_dns_webhook": map[string]any{"port": 0}})
		}, "spec.external_dns_webhook.port", "greater than or equal to 1"),
		Entry("a stale sweep interval of 0", func(ns string) client.Object {
			return newOperatorConfig(ns, "default", map[string]any{"app_discovery": map[string]any{"stale_cleanup_minutes": 0}})
		}, "spec.app_discovery.stale_cleanup_minutes", "greater than or equal to 1"),
		Entry("an API URL that is not http(s)", func(ns string) client.Object {
			return newOperatorConfig(ns, "default", map[string]any{"api_sync": map[string]any{"api_url": "api.polycrate.io"}})
		}, "spec.api_sync.api_url"),
		Entry("an Endpoint port of 0", func(ns string) client.Object {
			return object("Endpoint", ns, "ep", map[string]any{"remoteAddress": "a.example.com", "remotePort": 0})
		}, "spec.remotePort", "greater than or equal to 1"),
		Entry("an Endpoint port above 65535", func(ns string) client.Object {
			return object("Endpoint", ns, "ep", map[string]any{"remoteAddress": "a.example.com", "remotePort": 65536})
		}, "spec.remotePort", "less than or equal to 65535"),
		Entry("an Endpoint timeout of 0", func(ns string) client.Object {
			return object("Endpoint", ns, "ep", map[string]any{"remoteAddress": "a.example.com", "timeout": 0})
		}, "spec.timeout", "greater than or equal to 1"),
		Entry("an Endpoint interval below 1", func(ns string) client.Object {
			return object("Endpoint", ns, "ep", map[string]any{"remoteAddress": "a.example.com", "interval": -5})
		}, "spec.interval", "greater than or equal to 1"),
		Entry("an Endpoint expecting status 42", func(ns string) client.Object {
			return object("Endpoint", ns, "ep", map[string]any{"remoteAddress": "a.example.com", "expectedStatusCodes": []any{200, 42}})
		}, "spec.expectedStatusCodes[1]", "greater than or equal to 100"),
		Entry("an Endpoint without a host", func(ns string) client.Object {
			return object("Endpoint", ns, "ep", map[string]any{"path": "/"})
		}, "spec.remoteAddress", "Required value"),
		Entry("an unknown S3 reclaim policy", func(ns string) client.Object {
			return object("S3Bucket", ns, "b", map[string]any{"name": "my-bucket", "reclaim_policy": "keep"})
		}, "spec.reclaim_policy", `Unsupported value: "keep"`, `"retain"`, `"delete"`),
		Entry("an S3 bucket named like an IP address", func(ns string) client.Object {
			return object("S3Bucket", ns, "b", map[string]any{"name": "192.168.1.10"})
		}, "spec.name", "must not be formatted as an IP address"),
		Entry("an S3 bucket name with upper case and underscores", func(ns string) client.Object {
			return object("S3Bucket", ns, "b", map[string]any{"name": "My_Bucket"})
		}, "spec.name", "should match"),
		Entry("an S3 bucket name of two characters", func(ns string) client.Object {
			return object("S3Bucket", ns, "b", map[string]any{"name": "ab"})
		}, "spec.name", "at least 3 chars long"),
		Entry("a K8sCluster with two authentication methods", func(ns string) client.Object {
			ref := map[string]any{"secretRef": map[string]any{"name": "s", "key": "k"}}
			return object("K8sCluster", ns, "c", map[string]any{"apiServer": "https://x:6443",
				"authentication": map[string]any{"serviceAccountToken": ref, "kubeconfig": ref}})
		}, "exactly one of serviceAccountToken or kubeconfig must be set"),
		Entry("a K8sCluster with a token but no API server", func(ns string) client.Object {
			return object("K8sCluster", ns, "c", map[string]any{
				"authentication": map[string]any{"serviceAccountToken": map[string]any{"secretRef": map[string]any{"name": "s", "key": "k"}}}})
		}, "apiServer is required unless authentication.kubeconfig is used"),
		Entry("a Backup from an unknown provider", func(ns string) client.Object {
			return object("Backup", ns, "b", map[string]any{"name": "b", "provider": "restic"})
		}, "spec.provider", `Unsupported value: "restic"`),
		Entry("a Certificate with a cert-manager style issuer kind", func(ns string) client.Object {
			return object("Certificate", ns, "c", map[string]any{"name": "c", "namespace": ns, "secret_name": "s", "issuer_kind": "ClusterIssuer"})
		}, "spec.issuer_kind", `Unsupported value: "ClusterIssuer"`),
	)

	It("refuses to change an S3Bucket's name or region after creation", func() {
		ns := freshNamespace()
		b := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
			Spec: v1.S3BucketSpec{Name: "my-data", Region: "fsn1"}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		Expect(b.Spec.ReclaimPolicy).To(Equal("retain"))

		renamed := b.DeepCopy()
		renamed.Spec.Name = "other-data"
		err := k8s.Update(ctx, renamed)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.name is immutable"))

		moved := b.DeepCopy()
		moved.Spec.Region = "nbg1"
		err = k8s.Update(ctx, moved)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.region is immutable"))

		dropped := b.DeepCopy()
		dropped.Spec.Region = ""
		err = k8s.Update(ctx, dropped)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.region is immutable"))

		// The reclaim policy may change.
		b.Spec.ReclaimPolicy = "delete"
		Expect(k8s.Update(ctx, b)).To(Succeed())
	})

	It("puts every kind in the polycrate category with the seed's short names (kubectl get polycrate)", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		var resources *metav1.APIResourceList
		Eventually(func() error {
			resources, err = dc.ServerResourcesForGroupVersion("polycrate.io/v1alpha1")
			return err
		}, 30*time.Second).Should(Succeed())
		inCategory := map[string][]string{}
		for _, r := range resources.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			Expect(r.Categories).To(ContainElement("polycrate"), r.Name)
			inCategory[r.Kind] = r.ShortNames
		}
		Expect(inCategory).To(HaveLen(10))
		Expect(inCategory["OperatorConfig"]).To(ConsistOf("oc", "opcfg"))
		Expect(inCategory["S3Bucket"]).To(ConsistOf("s3"))
		Expect(slices.Contains(inCategory["Certificate"], "pcert")).To(BeTrue())
	})
}
