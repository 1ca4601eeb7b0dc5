package crds_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polycrate/polycrate-operator/internal/crds"
)

func actions(rs []crds.Result) map[crds.Action]int {
	m := map[crds.Action]int{}
	for _, r := range rs {
		m[r.Action]++
	}
	return m
}

func established(name string) bool {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return false
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// One Ordered container: the CRDs are cluster-wide state, so the install flow runs
// first on a clean cluster, then the schema specs run against what it installed.
var _ = Describe("The operator's CRDs", Ordered, func() {
	var all []crds.CRD

	BeforeAll(func() {
		var err error
		all, err = crds.All()
		Expect(err).NotTo(HaveOccurred())
		Expect(all).To(HaveLen(10))
		for _, c := range all {
			err := k8s.Get(ctx, client.ObjectKey{Name: c.Object.Name}, &apiextensionsv1.CustomResourceDefinition{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the install flow needs a cluster without %s", c.Object.Name)
		}
	})

	It("dry run on a clean cluster reports every CRD as created and creates nothing", func() {
		rs, err := crds.Install(ctx, k8s, all, crds.InstallOptions{DryRun: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Created: 10}))
		for _, c := range all {
			err := k8s.Get(ctx, client.ObjectKey{Name: c.Object.Name}, &apiextensionsv1.CustomResourceDefinition{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "dry run created %s", c.Object.Name)
		}
	})

	It("creates every CRD and returns once all are Established", func() {
		rs, err := crds.Install(ctx, k8s, all, crds.InstallOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Created: 10}))
		for _, c := range all {
			Expect(established(c.Object.Name)).To(BeTrue(), "%s not established when Install returned", c.Object.Name)
		}
	})

	It("is idempotent: a second install changes nothing", func() {
		before := map[string]string{}
		for _, c := range all {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: c.Object.Name}, crd)).To(Succeed())
			before[crd.Name] = crd.ResourceVersion
		}
		rs, err := crds.Install(ctx, k8s, all, crds.InstallOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Unchanged: 10}))
		for _, c := range all {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: c.Object.Name}, crd)).To(Succeed())
			Expect(crd.ResourceVersion).To(Equal(before[crd.Name]), "%s was written", crd.Name)
		}
		rs, err = crds.Install(ctx, k8s, all, crds.InstallOptions{DryRun: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(actions(rs)).To(Equal(map[crds.Action]int{crds.Unchanged: 10}))
	})

	It("reports a changed CRD as updated (dry run changes nothing, a real run applies it)", func() {
		changed := all[2] // Endpoint
		obj := changed.Object.DeepCopy()
		obj.Spec.Versions[0].AdditionalPrinterColumns = obj.Spec.Versions[0].AdditionalPrinterColumns[:1]
		raw, err := yamlOf(obj)
		Expect(err).NotTo(HaveOccurred())
		modified := crds.CRD{FileName: changed.FileName, Raw: raw, Object: obj}

		rs, err := crds.Install(ctx, k8s, []crds.CRD{modified}, crds.InstallOptions{DryRun: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(rs).To(ConsistOf(crds.Result{Name: obj.Name, Kind: "Endpoint", Action: crds.Updated}))
		live := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: obj.Name}, live)).To(Succeed())
		Expect(live.Spec.Versions[0].AdditionalPrinterColumns).To(HaveLen(len(changed.Object.Spec.Versions[0].AdditionalPrinterColumns)))

		rs, err = crds.Install(ctx, k8s, []crds.CRD{modified}, crds.InstallOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rs[0].Action).To(Equal(crds.Updated))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: obj.Name}, live)).To(Succeed())
		Expect(live.Spec.Versions[0].AdditionalPrinterColumns).To(HaveLen(1))

		// And back to the embedded definition.
		rs, err = crds.Install(ctx, k8s, []crds.CRD{changed}, crds.InstallOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rs[0].Action).To(Equal(crds.Updated))
	})

	Describe("schema", schemaSpecs)
	Describe("versions and self-install", Ordered, versionSpecs)
})
