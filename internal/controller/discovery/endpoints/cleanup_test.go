package endpoints_test

import (
	"bytes"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/cli"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

func runCLI(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := cli.NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

var _ = Describe("cleanup (uninstall)", func() {
	It("removes the finalizers of a stopped operator, retiring the API objects first, so an Ingress deletes at once", func() {
		ns := freshNamespace()
		ing := ingress(ns, "leaving", "nginx", map[string]string{annotations.Monitor: "true"}, "leaving.example.com")
		Expect(k8s.Create(ctx, ing)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "leaving-example-com").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
		id := getEndpointOrEmpty(ns, "leaving-example-com").Status.APIID
		Eventually(func() []string {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(ing), ing)
			return ing.Finalizers
		}, timeout, poll).Should(ContainElement(v1.FinalizerIngressDiscovery))

		// The operator is uninstalled.
		Expect(oe.StopOperator()).To(Succeed())
		DeferCleanup(func() { Expect(oe.StartOperator()).To(Succeed()) })
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfig, oe.Env.KubeConfig, 0o600)).To(Succeed())

		// An Endpoint whose create the API committed but whose id never reached its
		// status (a crash, a lost answer): cleanup finds it by its natural key, as
		// the finalizer would.
		orphan, err := oe.Client().Endpoints().Create(ctx, polycrate.EndpointRequest{Name: names.EndpointAPI(ns, "orphan.example.com"),
			RemoteAddress: "orphan.example.com", Kind: "http"})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", Finalizers: []string{v1.FinalizerEndpointCleanup}},
			Spec: v1.EndpointSpec{RemoteAddress: "orphan.example.com"}})).To(Succeed())

		out, err := runCLI("cleanup", "--kubeconfig", kubeconfig, "--dry-run")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("would remove finalizers from Ingress " + ns + "/leaving"))
		Expect(out).To(ContainSubstring("would remove finalizers from Endpoint " + ns + "/leaving-example-com"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ing), ing)).To(Succeed())
		Expect(ing.Finalizers).To(ContainElement(v1.FinalizerIngressDiscovery))

		out, err = runCLI("cleanup", "--kubeconfig", kubeconfig, "--retire-api", "--operator-namespace", testutil.OperatorNamespace)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("removed finalizers from Ingress " + ns + "/leaving"))
		ep := getEndpointOrEmpty(ns, "leaving-example-com")
		Expect(ep.Finalizers).To(BeEmpty())
		_, err = oe.Client().Endpoints().Get(ctx, id)
		Expect(polycrate.IsNotFound(err)).To(BeTrue(), "the API endpoint was not retired: %v", err)
		_, err = oe.Client().Endpoints().Get(ctx, orphan.ID)
		Expect(polycrate.IsNotFound(err)).To(BeTrue(), "the API endpoint of a CR without an id was not found by its natural key: %v", err)

		Expect(k8s.Delete(ctx, ing)).To(Succeed())
		Eventually(func() bool {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(ing), &networkingv1.Ingress{})
			return err != nil && client.IgnoreNotFound(err) == nil
		}, timeout, poll).Should(BeTrue())

		// A second run finds nothing to do.
		out, err = runCLI("cleanup", "--kubeconfig", kubeconfig)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(ContainSubstring(ns + "/leaving"))
	})
})
