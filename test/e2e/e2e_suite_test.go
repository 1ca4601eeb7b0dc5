// Package e2e runs the built polycrate-operator binary as a user would, against an
// envtest control plane.
package e2e

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polycrate/polycrate-operator/internal/testutil"
)

const e2eVersion = "v0.0.0-e2e"

var (
	env             *envtest.Environment
	adminCfg        *rest.Config
	k8s             client.Client
	binary          string
	adminKubeconfig string
	workDir         string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "polycrate-operator binary end to end (envtest)")
}

var _ = BeforeSuite(func() {
	workDir = GinkgoT().TempDir()
	binary = filepath.Join(workDir, "polycrate-operator")
	Expect(testutil.BuildOperator(binary, e2eVersion)).To(Succeed())

	var err error
	env, adminCfg, err = testutil.Start(testutil.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(adminCfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	adminKubeconfig = filepath.Join(workDir, "admin.kubeconfig")
	Expect(os.WriteFile(adminKubeconfig, env.KubeConfig, 0o600)).To(Succeed())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// writeKubeconfig writes a kubeconfig for a client-certificate user.
func writeKubeconfig(cfg *rest.Config, path string) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user"}
	kc.CurrentContext = "envtest"
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
}
