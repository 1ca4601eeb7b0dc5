package crds_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/polycrate/polycrate-operator/internal/crds"
)

// freshCRD is the operator's Endpoint CRD under a group of its own: a resource
// whose storage the API server has not opened yet.
func freshCRD(group string) crds.CRD {
	all, err := crds.All()
	Expect(err).NotTo(HaveOccurred())
	for _, c := range all {
		if c.Kind() == "Endpoint" {
			obj := c.Object.DeepCopy()
			obj.Spec.Group = group
			obj.Name = obj.Spec.Names.Plural + "." + group
			raw, err := yaml.Marshal(obj)
			Expect(err).NotTo(HaveOccurred())
			return crds.CRD{FileName: c.FileName, Raw: raw, Object: obj}
		}
	}
	Fail("no Endpoint CRD")
	return crds.CRD{}
}

// firstWatch opens the streaming list an informer starts with, once (no retry),
// and closes it.
func firstWatch(c crds.CRD) error {
	rc, err := rest.UnversionedRESTClientFor(metadata.ConfigFor(cfg))
	Expect(err).NotTo(HaveOccurred())
	w, err := rc.Get().AbsPath("/apis", c.Object.Spec.Group, c.Object.Spec.Versions[0].Name, c.Plural()).
		Param("watch", "true").Param("sendInitialEvents", "true").Param("resourceVersionMatch", "NotOlderThan").
		Param("allowWatchBookmarks", "true").Param("timeoutSeconds", "5").MaxRetries(0).Watch(ctx)
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}

var _ = Describe("Warming the storage of CRDs", func() {
	It("makes an informer's first watch of a new CRD succeed at once, where it would usually have been told to wait a second", func() {
		suffix := fmt.Sprintf("%d", time.Now().UnixNano())
		warmed, control := freshCRD("warmed-"+suffix+".test.polycrate.io"), freshCRD("cold-"+suffix+".test.polycrate.io")
		_, err := crds.Install(ctx, k8s, []crds.CRD{warmed, control}, crds.InstallOptions{})
		Expect(err).NotTo(HaveOccurred())

		// The premise: the first watch of a resource whose storage is not open yet
		// is answered 429 with Retry-After (the watch cache initialises) — as a
		// rule, not always: a cache that initialises before the watch reaches it
		// (it happened in 2 of about 60 runs, each time as the suite's first spec)
		// answers at once. Either way it is no other error.
		if err := firstWatch(control); err != nil {
			Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the first watch of a cold CRD: %v", err)
			retry, ok := apierrors.SuggestsClientDelay(err)
			Expect(ok).To(BeTrue())
			Expect(retry).To(BeNumerically(">=", 1))
		} else {
			GinkgoWriter.Println("the cold CRD's watch cache was ready before its first watch this time")
		}

		rs := crds.Warm(ctx, cfg, []crds.CRD{warmed}, 10*time.Second)
		Expect(rs).To(HaveLen(1))
		Expect(rs[0].Err).NotTo(HaveOccurred())
		Expect(rs[0].Ready).To(BeTrue())
		Expect(rs[0].Resource).To(Equal(warmed.Object.Name))
		Expect(firstWatch(warmed)).To(Succeed())
	})

	It("stops at any answer but 429 and reports it, without failing", func() {
		missing := freshCRD("missing-" + fmt.Sprint(time.Now().UnixNano()) + ".test.polycrate.io") // never installed
		start := time.Now()
		rs := crds.Warm(ctx, cfg, []crds.CRD{missing}, 5*time.Second)
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "a 404 is an answer: no waiting")
		Expect(rs).To(HaveLen(1))
		Expect(rs[0].Ready).To(BeFalse())
		Expect(apierrors.IsNotFound(rs[0].Err)).To(BeTrue(), "%v", rs[0].Err)
	})
})
