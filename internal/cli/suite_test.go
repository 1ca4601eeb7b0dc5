package cli_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polycrate/polycrate-operator/internal/cli"
	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// One control plane for the package, started without the operator's CRDs so that
// install-crds has something to create.
var (
	env        *envtest.Environment
	cfg        *rest.Config
	k8s        client.Client
	kubeconfig string
	// clusterURL is the API server URL as the kubeconfig names it (what status prints).
	clusterURL string
)

func TestCLI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CLI suite (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, cfg, err = testutil.Start(testutil.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfig, env.KubeConfig, 0o600)).To(Succeed())
	kc, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: kubeconfig})
	Expect(err).NotTo(HaveOccurred())
	clusterURL = kc.Host
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// execute runs the CLI in-process, as main does.
func execute(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	// The operator's runnables log from several goroutines at once.
	var out, errOut syncBuffer
	cmd := cli.NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	Expect(l.Close()).To(Succeed())
	return "127.0.0.1:" + strconv.Itoa(port)
}
