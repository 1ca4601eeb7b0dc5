package crds_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

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
		Eventually(func() (err error) { rep, err = crds.SelfInstall(ctx, weak, "v0.5.0", bufferLogger(&buf)); return err }, 30*time.Second).Should(Succeed())
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

	It("retries a failed installation with back-off until it succeeds, and says so (the start's failure does not stay)", func() {
		user, err := env.AddUser(envtest.User{Name: "crd-rights-later", Groups: []string{"system:authenticated"}}, cfg)
		Expect(err).NotTo(HaveOccurred())
		weak, err := client.New(user.Config(), client.Options{Scheme: testutil.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, readerRole()))).To(Succeed())
		binding := readerBinding("crd-rights-later")
		binding.Name = "crd-reader-later"
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		var buf bytes.Buffer
		var first *crds.Report
		Eventually(func() (err error) { first, err = crds.SelfInstall(ctx, weak, "v0.6.0", bufferLogger(&buf)); return err }, 30*time.Second).Should(Succeed())
		Expect(first.Err).To(HaveOccurred())

		r := crds.NewRetrier(weak, "v0.6.0", bufferLogger(&buf), first)
		r.Initial, r.Max = 100*time.Millisecond, 400*time.Millisecond
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Start(rctx) }()
		// Still refused: it retries, and the report keeps saying why.
		Eventually(r.Changed(), 5*time.Second).Should(Receive())
		Expect(r.Report().Err).To(HaveOccurred())
		// The right to write CRDs arrives: the next retry installs them, and stops.
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crd-rights-later-admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "crd-rights-later", APIGroup: "rbac.authorization.k8s.io"}}})).To(Succeed())
		Eventually(done, 30*time.Second).Should(Receive(BeNil()))
		Expect(r.Report().Err).NotTo(HaveOccurred())
		Expect(r.Report().Version).To(Equal("v0.6.0"))
		Expect(buf.String()).To(ContainSubstring("CRDs installed on a retry"))
	})

	It("installs with just the chart's CRD rights: create and patch by the names of its own CRDs, and no other CRD", func() {
		raw, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config/helm/polycrate-operator/files/crd-install-rules.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var install []rbacv1.PolicyRule
		Expect(yaml.Unmarshal(raw, &install)).To(Succeed())
		var names []string
		for _, c := range all {
			names = append(names, c.Object.Name)
		}
		Expect(install).To(HaveLen(1))
		Expect(install[0].ResourceNames).To(ConsistOf(names), "the CRD write rule names exactly the embedded CRDs (internal/controller/rbac.go)")

		user, err := env.AddUser(envtest.User{Name: "crd-installer", Groups: []string{"system:authenticated"}}, cfg)
		Expect(err).NotTo(HaveOccurred())
		installer, err := client.New(user.Config(), client.Options{Scheme: testutil.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		role := readerRole()
		role.Name = "crd-installer"
		role.Rules = append(role.Rules, install...)
		Expect(k8s.Create(ctx, role)).To(Succeed())
		binding := readerBinding("crd-installer")
		binding.Name, binding.RoleRef.Name = "crd-installer", "crd-installer"
		Expect(k8s.Create(ctx, binding)).To(Succeed())

		// A missing CRD of its own is created (a server-side apply: authorized by name).
		hosts := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "hosts.polycrate.io"}, hosts)).To(Succeed())
		Expect(k8s.Delete(ctx, hosts)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "hosts.polycrate.io"}, &apiextensionsv1.CustomResourceDefinition{}))
		}, 30*time.Second).Should(BeTrue())
		var buf bytes.Buffer
		var rep *crds.Report
		Eventually(func() (err error) {
			rep, err = crds.SelfInstall(ctx, installer, "v0.5.0", bufferLogger(&buf))
			return err
		}, 30*time.Second).Should(Succeed())
		Expect(rep.Err).NotTo(HaveOccurred())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "hosts.polycrate.io"}, hosts)).To(Succeed())

		// Another CRD is out of its reach: neither changed nor created.
		widgets := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
						XPreserveUnknownFields: ptr.To(true)}}}}}}
		Expect(k8s.Create(ctx, widgets.DeepCopy())).To(Succeed())
		err = installer.Patch(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"planted":"yes"}}}`)))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patched a foreign CRD: %v", err)
		gadgets := widgets.DeepCopy()
		gadgets.Name, gadgets.Spec.Names = "gadgets.example.com", apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
		Expect(apierrors.IsForbidden(installer.Create(ctx, gadgets))).To(BeTrue(), "created a foreign CRD")
	})

	It("never drops a version objects are still stored in: the CRD is left as installed, with the reason", func() {
		var buf bytes.Buffer
		_, err := crds.SelfInstall(ctx, k8s, "v0.6.0", bufferLogger(&buf))
		Expect(err).NotTo(HaveOccurred())
		// A newer operator served K8sVolumes as v1beta1 and stored objects in it.
		vol := &apiextensionsv1.CustomResourceDefinition{}
		// The API server writes the CRD's status meanwhile: a conflict is made again.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKey{Name: "k8svolumes.polycrate.io"}, vol); err != nil {
				return err
			}
			beta := *vol.Spec.Versions[0].DeepCopy()
			beta.Name = "v1beta1"
			vol.Spec.Versions[0].Storage = false
			vol.Spec.Versions = append(vol.Spec.Versions, beta)
			return k8s.Update(ctx, vol)
		})).To(Succeed())
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
