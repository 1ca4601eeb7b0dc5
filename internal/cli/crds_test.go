package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

var allKinds = []string{"OperatorConfig", "K8sCluster", "Endpoint", "Host", "K8sApp", "K8sVolume", "Backup", "BackupSchedule", "Certificate", "S3Bucket"}

func decodeCRDs(stream string) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range strings.Split(stream, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.UnmarshalStrict([]byte(doc), crd)).To(Succeed())
		out = append(out, crd)
	}
	return out
}

var _ = Describe("crds", func() {
	ctx := context.Background()

	It("--list prints every kind with its plural and short names, in the seed's order", func() {
		out, _, err := execute(ctx, "crds", "--list")
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(11))
		Expect(strings.Fields(lines[0])).To(Equal([]string{"KIND", "PLURAL", "SHORTNAMES", "SCOPE", "NAME"}))
		for i, kind := range allKinds {
			Expect(strings.Fields(lines[i+1])[0]).To(Equal(kind))
		}
		Expect(out).To(MatchRegexp(`(?m)^OperatorConfig\s+operatorconfigs\s+oc,opcfg\s+Namespaced`))
		Expect(out).To(MatchRegexp(`(?m)^Endpoint\s+endpoints\s+ep,pep\s`))
		Expect(out).To(MatchRegexp(`(?m)^Host\s+hosts\s+-\s+Cluster`))
		Expect(out).To(MatchRegexp(`(?m)^K8sApp\s+k8sapps\s+app,pca\s`))
		Expect(out).To(MatchRegexp(`(?m)^K8sVolume\s+k8svolumes\s+vol,pvol\s+Cluster`))
		Expect(out).To(MatchRegexp(`(?m)^Certificate\s+certificates\s+cert,pcert\s`))
		Expect(out).To(MatchRegexp(`(?m)^S3Bucket\s+s3buckets\s+s3\s`))
	})

	It("prints all ten CRDs as one YAML stream by default", func() {
		out, _, err := execute(ctx, "crds")
		Expect(err).NotTo(HaveOccurred())
		list := decodeCRDs(out)
		Expect(list).To(HaveLen(10))
		for i, crd := range list {
			Expect(crd.Spec.Names.Kind).To(Equal(allKinds[i]))
		}
	})

	DescribeTable("--kind prints exactly one CRD",
		func(arg, wantName string) {
			out, _, err := execute(ctx, "crds", "--kind", arg)
			Expect(err).NotTo(HaveOccurred())
			list := decodeCRDs(out)
			Expect(list).To(HaveLen(1))
			Expect(list[0].Name).To(Equal(wantName))
		},
		Entry("by kind", "OperatorConfig", "operatorconfigs.polycrate.io"),
		Entry("by lower-case kind", "s3bucket", "s3buckets.polycrate.io"),
		Entry("by plural", "k8sapps", "k8sapps.polycrate.io"),
		Entry("by short name", "pcert", "certificates.polycrate.io"),
	)

	It("--kind with an unknown kind fails and lists the valid kinds (the seed's --kind Organization)", func() {
		out, _, err := execute(ctx, "crds", "--kind", "Organization")
		Expect(err).To(HaveOccurred())
		Expect(out).To(BeEmpty())
		Expect(err.Error()).To(ContainSubstring(`unknown kind "Organization"`))
		for _, k := range allKinds {
			Expect(err.Error()).To(ContainSubstring(k))
		}
	})

	It("--output-dir writes one file per kind", func() {
		dir := filepath.Join(GinkgoT().TempDir(), "crds")
		out, _, err := execute(ctx, "crds", "--output-dir", dir)
		Expect(err).NotTo(HaveOccurred())
		entries, err := os.ReadDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(HaveLen(10))
		seen := map[string]bool{}
		for _, e := range entries {
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			Expect(err).NotTo(HaveOccurred())
			list := decodeCRDs(string(raw))
			Expect(list).To(HaveLen(1), e.Name())
			seen[list[0].Spec.Names.Kind] = true
			Expect(out).To(ContainSubstring(filepath.Join(dir, e.Name())))
		}
		Expect(seen).To(HaveLen(10))

		dir2 := filepath.Join(GinkgoT().TempDir(), "one")
		_, _, err = execute(ctx, "crds", "--kind", "Endpoint", "--output-dir", dir2)
		Expect(err).NotTo(HaveOccurred())
		entries, err = os.ReadDir(dir2)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(HaveLen(1))
		Expect(entries[0].Name()).To(Equal("polycrate.io_endpoints.yaml"))
	})

	It("refuses --list together with --output-dir", func() {
		_, _, err := execute(ctx, "crds", "--list", "--output-dir", GinkgoT().TempDir())
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("list"))
	})
})

var _ = Describe("version", func() {
	It("prints the version", func() {
		out, _, err := execute(context.Background(), "version")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("polycrate-operator "))
		Expect(out).To(ContainSubstring("commit"))
	})
})
