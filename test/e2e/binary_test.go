package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// The identity the Deployment in config/manager runs as.
const serviceAccountUser = "system:serviceaccount:polycrate:polycrate-operator"

func run(args ...string) *gexec.Session {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	return s
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// applyManifests applies every document of the given files with server-side apply.
func applyManifests(files ...string) {
	for _, f := range files {
		raw, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				Expect(err.Error()).To(Equal("EOF"), f)
				break
			}
			if len(u.Object) == 0 {
				continue
			}
			Expect(k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
				client.FieldOwner("e2e"), client.ForceOwnership)).To(Succeed(), "%s: %s %s", f, u.GetKind(), u.GetName())
		}
	}
}

var _ = Describe("the polycrate-operator binary", Ordered, func() {
	ctx := context.Background()
	var saKubeconfig string

	It("reports the version injected at build time", func() {
		s := run("version")
		// A first start pages the binary in: seconds on a loaded machine, not Gomega's default second.
		Eventually(s, 30*time.Second).Should(gexec.Exit(0))
		Expect(string(s.Out.Contents())).To(HavePrefix("polycrate-operator " + e2eVersion + " "))
	})

	It("is built without methods it never calls", func() {
		// A reflect call of a method taken by index or by a computed name
		// (Value.Method(i), MethodByName(name)) makes the linker keep every
		// exported method of every type in the program: the binary grew from
		// 60 to 100 MB, and the operator's resting RSS by 18 MiB of file-backed
		// pages (docs/performance.md). Call such a method by a constant name.
		// gRPC does so through golang.org/x/net/trace's init unless built with
		// grpcnotrace: every build of the binary carries that tag, should gRPC
		// be linked again (it is not, see the next spec).
		fi, err := os.Stat(binary)
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Size()).To(BeNumerically("<", 80<<20),
			"the binary is %d MB: a reflect method call by index or by a computed name keeps every method", fi.Size()>>20)
		for _, f := range []string{"Makefile", "Dockerfile"} {
			b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), f))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(MatchRegexp(`(?m)(-tags \$\(GO_BUILD_TAGS\) .*\./cmd/polycrate-operator|GO_BUILD_TAGS := `+testutil.OperatorBuildTags+`$|-tags `+testutil.OperatorBuildTags+` )`), f)
		}
		mk, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "Makefile"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(mk)).To(ContainSubstring("GO_BUILD_TAGS := " + testutil.OperatorBuildTags + "\n"))
		Expect(string(mk)).To(ContainSubstring("go build -tags $(GO_BUILD_TAGS) -ldflags \"$(LDFLAGS)\" -o $(LOCALBIN)/polycrate-operator"))
	})

	It("links none of the apiserver's authentication and authorization plugins", func() {
		// controller-runtime's metrics filter builds its reviews with
		// k8s.io/apiserver's factories, which link their webhook plugins with
		// CEL, OpenTelemetry's gRPC exporters, gRPC and the konnectivity client:
		// 227 packages and 10 MB of binary the reviews do not need
		// (internal/kube/delegated makes them with client-go).
		cmd := exec.Command("go", "list", "-deps", "-tags", testutil.OperatorBuildTags, "./cmd/polycrate-operator")
		cmd.Dir = testutil.RepoRoot()
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		deps := strings.Fields(string(out))
		Expect(len(deps)).To(BeNumerically("<", 1000), "the binary links %d packages", len(deps))
		for _, d := range deps {
			for _, banned := range []string{"k8s.io/apiserver/pkg/authentication/authenticatorfactory", "k8s.io/apiserver/pkg/authorization/authorizerfactory",
				"github.com/google/cel-go/", "google.golang.org/grpc", "sigs.k8s.io/apiserver-network-proxy"} {
				Expect(strings.HasPrefix(d, banned)).To(BeFalse(), "the binary links %s", d)
			}
		}
	})

	It("exits non-zero with a message for an unknown kind", func() {
		s := run("crds", "--kind", "Organization")
		Eventually(s, 30*time.Second).Should(gexec.Exit(1))
		Expect(string(s.Err.Contents())).To(ContainSubstring(`Error: unknown kind "Organization"; valid kinds are: OperatorConfig,`))
	})

	It("installs its CRDs, and the kustomize RBAC and manager manifests are accepted", func() {
		s := run("install-crds", "--kubeconfig", adminKubeconfig)
		Eventually(s, 60*time.Second).Should(gexec.Exit(0))
		Expect(string(s.Out.Contents())).To(ContainSubstring("10 created"))

		root := testutil.RepoRoot()
		applyManifests(filepath.Join(root, "config/manager/manager.yaml"))
		rbac, err := filepath.Glob(filepath.Join(root, "config/rbac/*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var manifests []string
		for _, f := range rbac {
			if filepath.Base(f) != "kustomization.yaml" {
				manifests = append(manifests, f)
			}
		}
		applyManifests(manifests...)

		sa, err := env.AddUser(envtest.User{Name: serviceAccountUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:polycrate", "system:authenticated"}}, adminCfg)
		Expect(err).NotTo(HaveOccurred())
		saKubeconfig = filepath.Join(workDir, "sa.kubeconfig")
		writeKubeconfig(sa.Config(), saKubeconfig)

		// The ServiceAccount is not an admin: least privilege holds. It reads and
		// writes Secrets (meta-Secret discovery, S3 credentials Secrets; docs/s3buckets.md),
		// but may not touch workloads, Nodes or RBAC.
		saClient, err := client.New(sa.Config(), client.Options{Scheme: testutil.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(saClient.List(ctx, &corev1.SecretList{})).To(Succeed())
		err = saClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "planted"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the operator may create namespaces: %v", err)
		err = saClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the operator may delete Pods: %v", err)
		err = saClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "planted"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the operator may create ConfigMaps: %v", err)
		err = saClient.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "planted"},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the operator may bind roles: %v", err)
	})

	It("runs as its ServiceAccount with leader election, is healthy, and stops cleanly on SIGTERM", func() {
		probe, metrics := freePort(), freePort()
		cmd := exec.Command(binary, "run", "--kubeconfig", saKubeconfig, "--leader-elect",
			"--health-probe-bind-address", probe, "--metrics-bind-address", metrics, "--zap-log-level", "debug")
		cmd.Env = append(os.Environ(), "POD_NAMESPACE=polycrate", "KUBECONFIG=")
		op, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		defer op.Kill()

		Eventually(func() int {
			return run("health", "--url", "http://"+probe, "--timeout", "1s").Wait(10 * time.Second).ExitCode()
		}, 60*time.Second, 500*time.Millisecond).Should(Equal(0))

		lease := &coordinationv1.Lease{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "polycrate", Name: "polycrate-operator.polycrate.io"}, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		}, 30*time.Second).Should(Succeed())

		op.Signal(syscall.SIGTERM)
		Eventually(op, 40*time.Second).Should(gexec.Exit(0))
		logs := string(op.Err.Contents())
		Expect(logs).To(ContainSubstring(`"version":"` + e2eVersion + `"`))
		Expect(logs).To(ContainSubstring("polycrate-operator stopped"))
		// The operator applied its own CRDs as its ServiceAccount (nothing to change here).
		Expect(logs).To(ContainSubstring(`"msg":"CRDs in place","created":0,"updated":0,"unchanged":10,"skipped":0`))
		Expect(strings.ToLower(logs)).NotTo(ContainSubstring("forbidden"), "the ServiceAccount lacks a permission")
	})

	It("recreates a missing CRD on start, as its ServiceAccount", func() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "k8sclusters.polycrate.io"}, crd)).To(Succeed())
		Expect(k8s.Delete(ctx, crd)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "k8sclusters.polycrate.io"}, &apiextensionsv1.CustomResourceDefinition{}))
		}, 30*time.Second).Should(BeTrue())

		probe := freePort()
		cmd := exec.Command(binary, "run", "--kubeconfig", saKubeconfig, "--health-probe-bind-address", probe, "--metrics-bind-address", "0")
		cmd.Env = append(os.Environ(), "POD_NAMESPACE=polycrate", "KUBECONFIG=")
		op, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		defer op.Kill()
		Eventually(func() int {
			return run("health", "--url", "http://"+probe, "--timeout", "1s").Wait(10 * time.Second).ExitCode()
		}, 60*time.Second, 500*time.Millisecond).Should(Equal(0))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "k8sclusters.polycrate.io"}, crd)).To(Succeed())
		Expect(crd.Annotations).To(HaveKeyWithValue("polycrate.io/operator-version", e2eVersion))
		op.Signal(syscall.SIGTERM)
		Eventually(op, 40*time.Second).Should(gexec.Exit(0))
		Expect(string(op.Err.Contents())).To(ContainSubstring(`"msg":"CRD created","crd":"k8sclusters.polycrate.io"`))
	})
})
