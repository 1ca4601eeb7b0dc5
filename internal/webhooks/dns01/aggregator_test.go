package dns01_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	whapi "github.com/cert-manager/cert-manager/pkg/acme/webhook/apis/acme/v1alpha1"
	cmwebhook "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/webhook"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/webhooks/dns01"
)

// frontProxy makes the aggregation layer's PKI as kubeadm does: a front-proxy CA,
// the kube-apiserver's proxy client certificate (CN front-proxy-client) signed by
// it, and — for the negative cases — a client certificate with another name from
// the same CA and one from a CA nobody trusts.
type frontProxy struct {
	dir                             string
	caFile, proxyCert, proxyKey     string
	proxyPair, otherName, untrusted tls.Certificate
}

func newFrontProxy(dir string) (*frontProxy, error) {
	fp := &frontProxy{dir: dir}
	ca, caKey, err := selfSignedCA("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	fp.caFile = filepath.Join(fp.dir, "front-proxy-ca.crt")
	if err := os.WriteFile(fp.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o600); err != nil {
		return nil, err
	}
	var certPEM, keyPEM []byte
	if fp.proxyPair, certPEM, keyPEM, err = clientCert("front-proxy-client", ca, caKey); err != nil {
		return nil, err
	}
	fp.proxyCert, fp.proxyKey = filepath.Join(fp.dir, "proxy.crt"), filepath.Join(fp.dir, "proxy.key")
	if err := os.WriteFile(fp.proxyCert, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(fp.proxyKey, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if fp.otherName, _, _, err = clientCert("someone-else", ca, caKey); err != nil {
		return nil, err
	}
	other, otherKey, err := selfSignedCA("untrusted-ca")
	if err != nil {
		return nil, err
	}
	if fp.untrusted, _, _, err = clientCert("front-proxy-client", other, otherKey); err != nil {
		return nil, err
	}
	return fp, nil
}

// flags are the kube-apiserver's aggregation-layer flags, as kubeadm sets them.
func (fp *frontProxy) flags() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       fp.caFile,
		"requestheader-allowed-names":        "front-proxy-client",
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             fp.proxyCert,
		"proxy-client-key-file":              fp.proxyKey,
	}
}

func selfSignedCA(cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func clientCert(cn string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (tls.Certificate, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	return pair, certPEM, keyPEM, err
}

// TestServedThroughTheAggregator is the webhook as cert-manager uses it in a
// cluster: registered as an APIService, called by cert-manager's own webhook
// client (pkg/issuer/acme/dns/webhook) through the kube-apiserver, which proxies
// with its front-proxy client certificate and the caller in X-Remote-* headers.
// The served API must be found by discovery (aggregated and per group-version),
// be reported Available by the aggregator's own check, write and delete the TXT
// record, and trust X-Remote-* headers only from the front-proxy certificate with
// an allowed name.
func TestServedThroughTheAggregator(t *testing.T) {
	e := sharedEnv(t)
	fp, cfg, cs, allowed, denied := e.fp, e.cfg, e.cs, e.allowed, e.denied
	ctx := context.Background()
	ac, conn := startAPIConnection(t)
	port := freePort(t)
	store := &liveconfig.Store{}
	spec := v1.OperatorConfigSpec{}
	spec.DNS01Webhook = v1.DNS01WebhookConfig{Enabled: true, Port: int32(port)} //nolint:gosec // a port
	store.Set(&liveconfig.Snapshot{Spec: spec})
	srv := dns01.NewServer(&dns01.Server{Config: store, Conn: conn, Log: testr.New(t), Kubeconfig: e.kubeconfig})
	srvCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Start(srvCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// The registration the chart makes, with the Service as an ExternalName to
	// this machine (envtest has no Service network).
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "polycrate-dns01"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The registration goes with the test: a second run in the same process
	// (-count) registers anew, with its own port.
	t.Cleanup(func() {
		_ = cs.CoreV1().Services("default").Delete(context.Background(), "polycrate-dns01", metav1.DeleteOptions{})
	})
	dyn := dynamic.NewForConfigOrDie(cfg)
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	if _, err := apiServices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.webhook.dns.polycrate.io"},
		"spec": map[string]any{"group": "webhook.dns.polycrate.io", "version": "v1alpha1", "groupPriorityMinimum": int64(1000),
			"versionPriority": int64(15), "insecureSkipTLSVerify": true,
			"service": map[string]any{"namespace": "default", "name": "polycrate-dns01", "port": int64(port)}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = apiServices.Delete(context.Background(), "v1alpha1.webhook.dns.polycrate.io", metav1.DeleteOptions{})
	})

	// The aggregator's availability check (GET /apis/<group>/<version> as
	// system:kube-aggregator through the front proxy) passes.
	eventually(t, "the APIService is Available", func() (bool, string) {
		svc, err := apiServices.Get(ctx, "v1alpha1.webhook.dns.polycrate.io", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Available" {
				return m["status"] == "True", fmt.Sprint(m["status"], " ", m["message"])
			}
		}
		return false, "no Available condition"
	})

	// Discovery through the kube-apiserver: the group, and the solver resource
	// with the one verb it serves.
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	var resources *metav1.APIResourceList
	eventually(t, "discovery of webhook.dns.polycrate.io/v1alpha1", func() (bool, string) {
		var err error
		resources, err = dc.ServerResourcesForGroupVersion("webhook.dns.polycrate.io/v1alpha1")
		return err == nil, fmt.Sprint(err)
	})
	if len(resources.APIResources) != 1 || resources.APIResources[0].Name != "polycrate" || resources.APIResources[0].Namespaced ||
		strings.Join(resources.APIResources[0].Verbs, ",") != "create" || resources.APIResources[0].Kind != "ChallengePayload" {
		t.Fatalf("discovery: %+v", resources.APIResources)
	}
	eventually(t, "the group is in the cluster's (aggregated) discovery", func() (bool, string) {
		groups, _, err := dc.ServerGroupsAndResources()
		for _, g := range groups {
			if g.Name == "webhook.dns.polycrate.io" && g.PreferredVersion.Version == "v1alpha1" {
				return err == nil, fmt.Sprint(err)
			}
		}
		return false, fmt.Sprint("not listed; ", err)
	})

	// cert-manager's own webhook client, with cert-manager's ServiceAccount token.
	hook := func(token string) *cmwebhook.Webhook {
		anon := rest.AnonymousClientConfig(cfg)
		anon.BearerToken = token
		w := &cmwebhook.Webhook{}
		if err := w.Initialize(anon, nil); err != nil {
			t.Fatal(err)
		}
		return w
	}
	solverCfg, _ := json.Marshal(map[string]any{"groupName": "webhook.dns.polycrate.io", "solverName": "polycrate", "config": map[string]any{}})
	challenge := func(key string) *whapi.ChallengeRequest {
		return &whapi.ChallengeRequest{UID: types.UID("uid-" + key), Type: "dns-01", DNSName: "shop.example.com", Key: key,
			ResolvedFQDN: "_acme-challenge.shop.example.com.", ResolvedZone: "example.com.", ResourceNamespace: "default",
			Config: &apiextensionsv1.JSON{Raw: solverCfg}}
	}
	txt := func() string {
		rows, err := ac.DNSRecords().List(ctx, polycrate.Query("name_exact", "_acme-challenge.shop", "type", "TXT"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Content)
		}
		return strings.Join(out, ",")
	}
	if err := hook(allowed).Present(challenge("key-a")); err != nil {
		t.Fatalf("Present through the aggregator: %v", err)
	}
	if got := txt(); got != "key-a" {
		t.Fatalf("records after Present: %q", got)
	}
	if err := hook(denied).Present(challenge("key-x")); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("a ServiceAccount without the role: %v", err)
	}
	if err := hook(allowed).CleanUp(challenge("key-a")); err != nil {
		t.Fatalf("CleanUp through the aggregator: %v", err)
	}
	if got := txt(); got != "" {
		t.Fatalf("records after CleanUp: %q", got)
	}

	// Directly at the webhook: X-Remote-* headers count only with the front-proxy
	// certificate of an allowed name; anyone else is at most anonymous.
	direct := func(cert *tls.Certificate, user string, groups ...string) int {
		tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the webhook's self-signed certificate
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		body, _ := json.Marshal(&whapi.ChallengePayload{TypeMeta: metav1.TypeMeta{APIVersion: "webhook.acme.cert-manager.io/v1alpha1", Kind: "ChallengePayload"},
			Request: &whapi.ChallengeRequest{UID: "d", Action: whapi.ChallengeActionPresent, Type: "dns-01", DNSName: "shop.example.com", Key: "direct-" + user,
				ResolvedFQDN: "_acme-challenge.shop.example.com.", ResolvedZone: "example.com.", ResourceNamespace: "default"}})
		req, _ := http.NewRequest(http.MethodPost, "https://127.0.0.1:"+strconv.Itoa(port)+"/apis/webhook.dns.polycrate.io/v1alpha1/polycrate", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Remote-User", user)
		for _, g := range groups {
			req.Header.Add("X-Remote-Group", g)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	sa := "system:serviceaccount:default:cert-manager"
	if code := direct(&fp.proxyPair, sa, "system:serviceaccounts"); code != http.StatusCreated {
		t.Fatalf("the front proxy on behalf of cert-manager: %d", code)
	}
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "another name of the front-proxy CA": &fp.otherName,
		"an untrusted CA": &fp.untrusted} {
		if code := direct(cert, sa, "system:masters"); code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Fatalf("%s claiming to be cert-manager and system:masters: %d", name, code)
		}
	}
	if code := direct(&fp.proxyPair, "system:serviceaccount:default:someone"); code != http.StatusForbidden {
		t.Fatalf("the front proxy on behalf of a user without the role: %d", code)
	}
	if got := txt(); got != "direct-"+sa {
		t.Fatalf("records after the direct calls: %q", got)
	}
}

// eventually polls cond every 250 ms for up to 90 s (the aggregator checks
// availability and refreshes discovery on its own schedule) and fails with the
// last state cond reported.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 90*time.Second, true,
		func(context.Context) (bool, error) {
			ok, state := cond()
			last = state
			return ok, nil
		})
	if err != nil {
		t.Fatalf("%s: not within 90 s (last: %s)", what, last)
	}
}
