package k8scluster_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller/k8scluster"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

func apiServerURL() string {
	if strings.HasPrefix(cfg.Host, "http") {
		return cfg.Host
	}
	return "https://" + cfg.Host
}

func secret(namespace, name string, data map[string]string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: data}
	ExpectWithOffset(1, k8s.Create(ctx, s)).To(Succeed())
}

func saToken() string {
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	// Each spec that needs a token asks for one: the ServiceAccount is made by the
	// first of them, whatever the order the specs run in.
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "remote-reader"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "remote-reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func ptr[T any](v T) *T { return &v }

func foreignCA() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-cluster-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func external(namespace, name string, spec v1.K8sClusterSpec) {
	ExpectWithOffset(1, k8s.Create(ctx, &v1.K8sCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec})).To(Succeed())
}

func tokenAuth(secretName string) v1.K8sClusterAuthentication {
	return v1.K8sClusterAuthentication{ServiceAccountToken: &v1.SecretReference{SecretRef: v1.SecretKeySelector{Name: secretName, Key: "token"}}}
}

// expectPhase waits for a K8sCluster's phase and Ready reason.
func expectPhase(namespace, name, phase, reason string) *v1.K8sCluster {
	kc := &v1.K8sCluster{}
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kc)).To(Succeed())
		g.Expect(kc.Status.Phase).To(Equal(phase), kc.Status.Message)
		c := meta.FindStatusCondition(kc.Status.Conditions, v1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		api := meta.FindStatusCondition(kc.Status.Conditions, v1.ConditionAPIReported)
		g.Expect(api).NotTo(BeNil())
		g.Expect(api.Reason).To(Equal(v1.ReasonOneClusterPerWorkspace))
	}, specs.Timeout, specs.Poll).Should(Succeed())
	return kc
}

var _ = Describe("K8sCluster: external clusters", func() {
	ca := func() string { return string(cfg.CAData) }

	It("connects with a ServiceAccount token and reads the server version", func() {
		secret(ns, "remote-token", map[string]string{"token": saToken()})
		external(ns, "production-cluster", v1.K8sClusterSpec{DisplayName: "Production Cluster", APIServer: apiServerURL(),
			Authentication: tokenAuth("remote-token"), CACertificate: ca()})
		kc := expectPhase(ns, "production-cluster", k8scluster.PhaseReady, "Connected")
		Expect(kc.Status.ServerVersion).To(Equal("v1.37.2"))
	})

	It("connects with a kubeconfig from a Secret", func() {
		user, err := env.AddUser(envtest.User{Name: "kubeconfig-user", Groups: []string{"system:authenticated"}}, cfg)
		Expect(err).NotTo(HaveOccurred())
		uc := user.Config()
		kcfg := clientcmdapi.NewConfig()
		kcfg.Clusters["c"] = &clientcmdapi.Cluster{Server: apiServerURL(), CertificateAuthorityData: uc.CAData}
		kcfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: uc.CertData, ClientKeyData: uc.KeyData}
		kcfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		kcfg.CurrentContext = "c"
		raw, err := clientcmd.Write(*kcfg)
		Expect(err).NotTo(HaveOccurred())
		secret(ns, "remote-kubeconfig", map[string]string{"kubeconfig": string(raw)})
		external(ns, "via-kubeconfig", v1.K8sClusterSpec{Authentication: v1.K8sClusterAuthentication{
			Kubeconfig: &v1.SecretReference{SecretRef: v1.SecretKeySelector{Name: "remote-kubeconfig", Key: "kubeconfig"}}}})
		Expect(expectPhase(ns, "via-kubeconfig", k8scluster.PhaseReady, "Connected").Status.ServerVersion).To(HavePrefix("v1.37"))
	})

	DescribeTable("says why it cannot connect",
		func(name string, spec func() v1.K8sClusterSpec, reason, message string) {
			external(ns, name, spec())
			kc := expectPhase(ns, name, k8scluster.PhaseError, reason)
			Expect(kc.Status.Message).To(ContainSubstring(message))
		},
		Entry("missing Secret", "no-secret", func() v1.K8sClusterSpec {
			return v1.K8sClusterSpec{APIServer: apiServerURL(), Authentication: tokenAuth("does-not-exist")}
		}, v1.ReasonSecretNotFound, "polycrate/does-not-exist does not exist"),
		Entry("unauthorized", "bad-token", func() v1.K8sClusterSpec {
			secret(ns, "bad-token", map[string]string{"token": "not-a-token"})
			return v1.K8sClusterSpec{APIServer: apiServerURL(), Authentication: tokenAuth("bad-token"), CACertificate: string(cfg.CAData)}
		}, v1.ReasonUnauthorized, "401"),
		Entry("a CA that did not sign the server's certificate", "foreign-ca", func() v1.K8sClusterSpec {
			secret(ns, "foreign-ca-token", map[string]string{"token": "x"})
			return v1.K8sClusterSpec{APIServer: apiServerURL(), Authentication: tokenAuth("foreign-ca-token"), CACertificate: foreignCA()}
		}, v1.ReasonInvalidCACertificate, "not trusted"),
		Entry("the seed's placeholder CA", "placeholder-ca", func() v1.K8sClusterSpec {
			secret(ns, "placeholder-token", map[string]string{"token": "x"})
			return v1.K8sClusterSpec{APIServer: apiServerURL(), Authentication: tokenAuth("placeholder-token"),
				CACertificate: "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n"}
		}, v1.ReasonInvalidCACertificate, "not a PEM certificate"),
		Entry("unreachable", "unreachable", func() v1.K8sClusterSpec {
			secret(ns, "unreachable-token", map[string]string{"token": "x"})
			return v1.K8sClusterSpec{APIServer: "https://127.0.0.1:1", Authentication: tokenAuth("unreachable-token")}
		}, v1.ReasonUnreachable, "the cluster cannot be reached"),
	)

	It("refuses a K8sCluster outside the operator namespace", func() {
		elsewhere := specs.Namespace(k8s, "elsewhere")
		external(elsewhere, "stray", v1.K8sClusterSpec{APIServer: apiServerURL(), Authentication: tokenAuth("x")})
		Expect(expectPhase(elsewhere, "stray", k8scluster.PhaseError, v1.ReasonInvalidSpec).Status.Message).To(ContainSubstring(`operator namespace "polycrate"`))
	})

	It("picks up fixed credentials at once through the Secret watch, with an event on every change of the reason", func() {
		external(ns, "fixed-later", v1.K8sClusterSpec{APIServer: apiServerURL(), Authentication: tokenAuth("fixed-later"), CACertificate: string(cfg.CAData)})
		expectPhase(ns, "fixed-later", k8scluster.PhaseError, v1.ReasonSecretNotFound)
		specs.ExpectEvent(k8s, ns, "fixed-later", corev1.EventTypeWarning, v1.ReasonSecretNotFound)
		secret(ns, "fixed-later", map[string]string{"token": "wrong"})
		expectPhase(ns, "fixed-later", k8scluster.PhaseError, v1.ReasonUnauthorized)
		specs.ExpectEvent(k8s, ns, "fixed-later", corev1.EventTypeWarning, v1.ReasonUnauthorized)
		s := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fixed-later"}, s)).To(Succeed())
		token := saToken()
		s.Data = map[string][]byte{"token": []byte(token)}
		Expect(k8s.Update(ctx, s)).To(Succeed())
		// Well before the one-minute recheck of a failing cluster.
		Eventually(func() string {
			kc := &v1.K8sCluster{}
			_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fixed-later"}, kc)
			return kc.Status.Phase
		}, 20*time.Second, specs.Poll).Should(Equal(k8scluster.PhaseReady))
		specs.ExpectEvent(k8s, ns, "fixed-later", corev1.EventTypeNormal, v1.ReasonConnected) // "connected again"
		// No credential in any status.
		list := &v1.K8sClusterList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		for _, kc := range list.Items {
			Expect(kc.Status.Message).NotTo(ContainSubstring(token))
		}
	})
})
