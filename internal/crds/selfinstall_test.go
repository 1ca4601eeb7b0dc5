package crds_test

import (
	"bytes"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

func annotations(all []crds.CRD) map[string]string {
	out := map[string]string{}
	for _, c := range all {
		live := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: c.Object.Name}, live)).To(Succeed())
		out[c.Object.Name] = live.Annotations[crds.VersionAnnotation]
	}
	return out
}

func bufferLogger(buf *bytes.Buffer) logr.Logger {
	return funcr.New(func(prefix, args string) { buf.WriteString(prefix + " " + args + "\n") }, funcr.Options{})
}

// versionSpecs run after the install flow: upgrades annotate, downgrades are refused,
// and SelfInstall fails only when a CRD is really missing.
func versionSpecs() {
	var all []crds.CRD

	BeforeAll(func() {
		var err error
		all, err = crds.All()
		Expect(err).NotTo(HaveOccurred())
	})

	It("records the installing operator's version and refuses to downgrade", func() {
		rs, err := crds.Install(ctx, k8s, all, crds.InstallOptions{Version: "v0.2.0"})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Updated: 10}))
		Expect(annotations(all)).To(HaveEach("v0.2.0"))

		rs, err = crds.Install(ctx, k8s, all, crds.InstallOptions{Version: "v0.1.9"})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Skipped: 10}))
		Expect(rs[0].Reason).To(ContainSubstring("installed by operator v0.2.0, newer than this operator (v0.1.9)"))
		Expect(annotations(all)).To(HaveEach("v0.2.0"))

		rs, err = crds.Install(ctx, k8s, all, crds.InstallOptions{Version: "v0.2.0"})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Unchanged: 10}))

		rs, err = crds.Install(ctx, k8s, all, crds.InstallOptions{Version: "v0.3.0"})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Updated: 10}))
		Expect(annotations(all)).To(HaveEach("v0.3.0"))
	})

	It("SelfInstall logs what it did", func() {
		var buf bytes.Buffer
		rep, err := crds.SelfInstall(ctx, k8s, "v0.4.0", bufferLogger(&buf))
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Counts[crds.Updated]).To(Equal(10))
		Expect(buf.String()).To(ContainSubstring(`"msg"="CRD updated"`))
		Expect(buf.String()).To(ContainSubstring(`"updated"=10`))
	})

	It("SelfInstall without the right to write CRDs: runs on when all are installed, fails when one is missing", func() {
		user, err := env.AddUser(envtest.User{Name: "no-crd-rights", Groups: []string{"system:authenticated"}}, cfg)
		Expect(err).NotTo(HaveOccurred())
		weak, err := client.New(user.Config(), client.Options{Scheme: testutil.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		// A reader role, no write: get/list/watch on CRDs.
		Expect(k8s.Create(ctx, readerRole())).To(Succeed())
		Expect(k8s.Create(ctx, readerBinding("no-crd-rights"))).To(Succeed())

		var buf bytes.Buffer
		var rep *crds.Report
		Eventually(func() (err error) { rep, err = crds.SelfInstall(ctx, weak, "v0.5.0", bufferLogger(&buf)); return err }).Should(Succeed())
		Expect(buf.String()).To(ContainSubstring("could not update the CRDs; running with the installed ones"))
		Expect(rep.Err).To(HaveOccurred(), "the report keeps the failure the operator runs despite")

		s3 := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "s3buckets.polycrate.io"}, s3)).To(Succeed())
		Expect(k8s.Delete(ctx, s3)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "s3buckets.polycrate.io"}, &apiextensionsv1.CustomResourceDefinition{}))
		}, 30*time.Second).Should(BeTrue())
		_, err = crds.SelfInstall(ctx, weak, "v0.5.0", bufferLogger(&buf))
		Expect(err).To(MatchError(ContainSubstring("s3buckets.polycrate.io is not installed")))
		Expect(err).To(MatchError(ContainSubstring("install-crds")))

		// With the rights, the missing CRD comes back.
		_, err = crds.SelfInstall(ctx, k8s, "v0.5.0", bufferLogger(&buf))
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "s3buckets.polycrate.io"}, s3)).To(Succeed())
	})

	It("never drops a version objects are still stored in: the CRD is left as installed, with the reason", func() {
		var buf bytes.Buffer
		_, err := crds.SelfInstall(ctx, k8s, "v0.6.0", bufferLogger(&buf))
		Expect(err).NotTo(HaveOccurred())
		// A newer operator served K8sVolumes as v1beta1 and stored objects in it.
		vol := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "k8svolumes.polycrate.io"}, vol)).To(Succeed())
		beta := *vol.Spec.Versions[0].DeepCopy()
		beta.Name = "v1beta1"
		vol.Spec.Versions[0].Storage = false
		vol.Spec.Versions = append(vol.Spec.Versions, beta)
		Expect(k8s.Update(ctx, vol)).To(Succeed())
		Eventually(func() []string {
			_ = k8s.Get(ctx, client.ObjectKey{Name: "k8svolumes.polycrate.io"}, vol)
			return vol.Status.StoredVersions
		}, 30*time.Second).Should(ContainElement("v1beta1"))

		// This operator's CRD has only v1alpha1: applying it would strand them.
		rep, err := crds.SelfInstall(ctx, k8s, "v0.6.0", bufferLogger(&buf))
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Skipped).To(ConsistOf(And(HavePrefix("k8svolumes.polycrate.io: "), ContainSubstring("no version v1beta1"),
			ContainSubstring("status.storedVersions"))))
		Expect(buf.String()).To(ContainSubstring("CRD left as installed"))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "k8svolumes.polycrate.io"}, vol)).To(Succeed())
		Expect(vol.Spec.Versions).To(HaveLen(2), "the CRD is untouched")
	})
}

func readerRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "crd-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}}}}
}

func readerBinding(user string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crd-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "crd-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}}}
}
