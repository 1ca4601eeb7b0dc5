// Package examples runs the seed's Ingress examples (the annotations chapter of
// the operator's documentation, examples 1–9) through the built
// polycrate-operator binary against envtest and the Polycrate API emulator, with
// local TLS backends standing in for the services, and checks what a user then
// sees: the API endpoint's fields and state, the Endpoint CR's status and
// Available condition, the probe_success series on the binary's /metrics, and
// the EndpointDown event — up while the backends are healthy, down with the
// right reason once each is broken.
package examples

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

var (
	env        *envtest.Environment
	k8s        client.Client
	api        *emulator.Server
	apiURL     string
	backend    *backends
	metricsURL string
	operator   *gexec.Session
	ctx        = context.Background()
)

func TestExamples(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "the seed's Ingress examples end to end (binary + envtest + emulator + local backends)")
}

// exampleHosts are the host names of the seed's examples; a local DNS server
// answers them with 127.0.0.1 (the binary's --check-dns-server).
var exampleHosts = []string{"app.example.com", "pay.example.com", "db-api.example.com", "legacy.example.com",
	"api.mycompany.com", "api.example.com", "events.example.com", "data.example.com", "booking.example.com", "admin.internal.local"}

var _ = BeforeSuite(func() {
	dir := GinkgoT().TempDir()
	binary := filepath.Join(dir, "polycrate-operator")
	Expect(testutil.BuildOperator(binary, "")).To(Succeed())

	var err error
	env, _, err = testutil.Start(testutil.Options{OwnCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	k8s, err = client.New(env.Config, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	Expect(os.WriteFile(kubeconfig, env.KubeConfig, 0o600)).To(Succeed())

	// The Polycrate API.
	api, err = emulator.New(emulator.Config{})
	Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(api.Handler())
	DeferCleanup(ts.Close)
	apiURL = ts.URL

	// The backends: one TLS server for every example host, with a certificate
	// of a local CA that the binary trusts (SSL_CERT_FILE), as a real ingress
	// controller would serve them.
	caFile := filepath.Join(dir, "ca.pem")
	backend = startBackends(caFile)
	dnsAddr := startDNS()

	// The operator's namespace, token and configuration, as the chart installs them.
	for _, ns := range []string{testutil.OperatorNamespace, "production"} {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testutil.OperatorNamespace, Name: "polycrate-api-creds"},
		StringData: map[string]string{"token": emulator.DevAgentToken}})).To(Succeed())
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: testutil.OperatorNamespace, Name: v1.DefaultOperatorConfigName}}
	oc.Spec.APISync.APIURL = apiURL
	oc.Spec.APISync.HealthReportIntervalSeconds = 2
	oc.Spec.LocalCluster.ClusterName = "examples"
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(true)
	// Other test packages run at the same time: no fixed ports.
	oc.Spec.ExternalDNSWebhook.Enabled = ptr.To(false)
	Expect(k8s.Create(ctx, oc)).To(Succeed())

	metrics, probes := freePort(), freePort()
	metricsURL = "http://" + metrics + "/metrics"
	cmd := exec.Command(binary, "run", "--kubeconfig", kubeconfig, "--metrics-bind-address", metrics, "--metrics-secure=false",
		"--health-probe-bind-address", probes, "--check-dns-server", dnsAddr)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+testutil.OperatorNamespace, "KUBECONFIG=", "SSL_CERT_FILE="+caFile)
	operator, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		operator.Interrupt()
		Eventually(operator, time.Minute).Should(gexec.Exit())
	})
	Eventually(func() (int, error) {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}, 2*time.Minute, 500*time.Millisecond).Should(Equal(http.StatusOK))
})

func freePort() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// startDNS answers every example host with 127.0.0.1 (UDP and TCP on one port).
func startDNS() string {
	GinkgoHelper()
	known := map[string]bool{}
	for _, h := range exampleHosts {
		known[dns.Fqdn(h)] = true
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		switch {
		case !known[strings.ToLower(q.Name)]:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(127, 0, 0, 1)})
		}
		_ = w.WriteMsg(m)
	})
	var pc net.PacketConn
	var l net.Listener
	for attempt := 0; l == nil; attempt++ {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			_ = pc.Close()
			Expect(attempt).To(BeNumerically("<", 20), "no port free for both udp and tcp")
		}
	}
	udp, tcp := &dns.Server{PacketConn: pc, Handler: handler}, &dns.Server{Listener: l, Handler: handler}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	DeferCleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	return pc.LocalAddr().String()
}

// localCA makes a CA and a serving certificate it signed for hosts, and writes
// the CA's certificate to caFile.
func localCA(caFile string, hosts []string) tls.Certificate {
	GinkgoHelper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "examples local CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	ca, err := x509.ParseCertificate(caDER)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)).To(Succeed())

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(60 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
}
