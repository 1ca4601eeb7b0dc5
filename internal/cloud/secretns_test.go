package cloud_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/preflight"
)

// This suite runs the operator as the chart's ServiceAccount with the chart's
// RBAC, rendered with rbac.secretNamespaces: Secrets are granted in the operator's
// namespace and team-secrets only, by Roles — no Secret right cluster-wide.
var _ = Describe("Secrets granted in named namespaces only (rbac.secretNamespaces)", Ordered, func() {
	metaDoc := `block:
  name: cache
  kind: helm
  version: 1.0.0
workspace:
  name: production
  organization: acme-corp
action:
  name: install
  status: success
  last_executed_at: "2026-11-30T10:00:00Z"
`
	metaSecret := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache.poly"}, StringData: map[string]string{"block.poly": metaDoc}}
	}

	BeforeAll(func() {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-elsewhere"}})).To(Succeed())
	})

	It("has no Secret right outside them, and its preflight checks its Secret rights where they are granted", func() {
		sa := rest.CopyConfig(oe.Config)
		sa.Impersonate = operatorSA
		c, err := client.New(sa, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.List(ctx, &corev1.SecretList{})).NotTo(Succeed(), "Secrets listable cluster-wide")
		Expect(c.List(ctx, &corev1.SecretList{}, client.InNamespace("team-elsewhere"))).NotTo(Succeed())
		Expect(c.List(ctx, &corev1.SecretList{}, client.InNamespace("team-secrets"))).To(Succeed())

		rep := (&preflight.Checker{Config: sa, Opts: preflight.Options{Profiles: []string{"operator"}, OperatorNamespace: "polycrate",
			SecretNamespaces: secretNamespaces}}).Run(ctx)
		var rights *preflight.Row
		for i := range rep.Rows {
			if rep.Rows[i].Topic == "Rights" {
				rights = &rep.Rows[i]
			}
		}
		Expect(rights).NotTo(BeNil(), "no rights row in %+v", rep.Rows)
		Expect(rights.Verdict).To(Equal(preflight.OK), rights.Found)
	})

	It("discovers a meta-Secret where it is granted, and does not see one elsewhere", func() {
		Expect(k8s.Create(ctx, metaSecret("team-secrets"))).To(Succeed())
		Expect(k8s.Create(ctx, metaSecret("team-elsewhere"))).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: "team-secrets", Name: "cache"}, &v1.K8sApp{})
		}, timeout, poll).Should(Succeed())
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: "team-elsewhere", Name: "cache"}, &v1.K8sApp{})
		}, 2*time.Second, poll).ShouldNot(Succeed())
	})

	It("provisions an S3Bucket where it may write the credentials Secret, and refuses one elsewhere before asking the API", func() {
		ok := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-secrets", Name: "data"}, Spec: v1.S3BucketSpec{Name: "team-data"}}
		Expect(k8s.Create(ctx, ok)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ok), ok)).To(Succeed())
			g.Expect(ok.Status.Phase).To(Equal(v1.S3BucketPhaseReady))
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "team-secrets", Name: "s3-team-data-credentials"}, &corev1.Secret{})).To(Succeed())
		}, timeout, poll).Should(Succeed())

		before := api.Live("s3/buckets")
		refused := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-elsewhere", Name: "data"}, Spec: v1.S3BucketSpec{Name: "elsewhere-data"}}
		Expect(k8s.Create(ctx, refused)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(refused), refused)).To(Succeed())
			c := meta.FindStatusCondition(refused.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1.ReasonSecretNamespaceNotGranted))
			g.Expect(c.Message).To(ContainSubstring("rbac.secretNamespaces"))
		}, timeout, poll).Should(Succeed())
		Expect(api.Live("s3/buckets")).To(Equal(before), "a bucket was created whose credentials cannot be written")
		// The event is written by the recorder's broadcaster, after the condition.
		Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace("team-elsewhere"))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(HaveField("Reason", v1.ReasonSecretNamespaceNotGranted)))
		}, timeout, poll).Should(Succeed())

		// Deleting it needs no Secret right there either.
		Expect(k8s.Delete(ctx, refused)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(refused), &v1.S3Bucket{}))
		}, timeout, poll).Should(BeTrue())
	})
})
