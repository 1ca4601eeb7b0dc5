package dns01_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/webhooks/dns01"
)

func freePort(t *testing.T) int {
	t.Helper()
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// saToken makes a ServiceAccount, optionally allowed to create challenge
// payloads of the solver (as cert-manager's own ServiceAccount is by the chart's
// domain-solver ClusterRole), and returns a token of it.
func saToken(cs kubernetes.Interface, name string, allowed bool) (string, error) {
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if allowed {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"webhook.dns.polycrate.io"}, Resources: []string{"polycrate"}, Verbs: []string{"create"}}}},
			metav1.CreateOptions{}); err != nil {
			return "", err
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
			return "", err
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// TestServedFromTheOperator drives the served webhook as the kube-apiserver's
// aggregation layer does for cert-manager: a ChallengePayload POSTed to
// /apis/<group>/v1alpha1/<solver>, authenticated by a token the server reviews
// with the kube-apiserver (TokenReview) and authorized there (SubjectAccessReview);
// and it follows dns01_webhook live: off, on, a new port.
func TestServedFromTheOperator(t *testing.T) {
	e := sharedEnv(t)
	allowed, denied, kubeconfig := e.allowed, e.denied, e.kubeconfig
	ac, conn := startAPIConnection(t)
	store := &liveconfig.Store{}
	port := freePort(t)
	set := func(enabled bool, port int) {
		spec := v1.OperatorConfigSpec{}
		spec.DNS01Webhook = v1.DNS01WebhookConfig{Enabled: enabled, GroupName: "webhook.dns.polycrate.io", SolverName: "polycrate", Port: int32(port)} //nolint:gosec // a port
		store.Set(&liveconfig.Snapshot{Spec: spec})
	}
	set(false, port)
	srv := dns01.NewServer(&dns01.Server{Config: store, Conn: conn, Log: testr.New(t), Kubeconfig: kubeconfig})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the webhook's self-signed certificate
	post := func(port int, token, action, key string) (int, map[string]any) {
		body, _ := json.Marshal(map[string]any{"apiVersion": "webhook.acme.cert-manager.io/v1alpha1", "kind": "ChallengePayload",
			"request": map[string]any{"uid": "1", "action": action, "type": "dns-01", "dnsName": "shop.example.com", "key": key,
				"resolvedFQDN": "_acme-challenge.shop.example.com.", "resolvedZone": "example.com.", "resourceNamespace": "default"}})
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d/apis/webhook.dns.polycrate.io/v1alpha1/polycrate", port), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer func() { _ = resp.Body.Close() }()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	waitServing := func(port int) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			code, _ := post(port, allowed, "Present", "probe")
			return code == http.StatusCreated || code == http.StatusOK, nil
		}); err != nil {
			t.Fatalf("the webhook does not serve on %d", port)
		}
	}
	txt := func() string {
		rows, err := ac.DNSRecords().List(context.Background(), polycrate.Query("name_exact", "_acme-challenge.shop", "type", "TXT"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Content)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}

	// Off: nothing listens, for as long as we look.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if code, _ := post(port, allowed, "Present", "k"); code != 0 || srv.Running() != 0 {
			t.Fatalf("disabled, but answered %d", code)
		}
	}
	// On: served.
	set(true, port)
	waitServing(port)
	code, out := post(port, allowed, "Present", "key-1")
	if code != http.StatusCreated || fmt.Sprint(out["response"]) != "map[success:true uid:1]" {
		t.Fatalf("present: %d %v", code, out)
	}
	if got := txt(); got != "key-1,probe" {
		t.Fatalf("records %q", got)
	}
	if code, out := post(port, allowed, "CleanUp", "probe"); code != http.StatusCreated || txt() != "key-1" {
		t.Fatalf("cleanup: %d %v, records %q", code, out, txt())
	}
	// Not allowed, or no valid token: refused by the kube-apiserver's reviews, nothing written.
	if code, _ := post(port, denied, "Present", "key-x"); code != http.StatusForbidden {
		t.Fatalf("a ServiceAccount without the role: %d", code)
	}
	if code, _ := post(port, "not-a-token", "Present", "key-x"); code != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d", code)
	}
	if strings.Contains(txt(), "key-x") {
		t.Fatal("a refused request wrote a record")
	}
	// A new port: the old one closes, the new one serves.
	newPort := freePort(t)
	set(true, newPort)
	waitServing(newPort)
	if code, _ := post(port, allowed, "Present", "k"); code != 0 {
		t.Fatalf("the old port still answers %d", code)
	}
	// Off again.
	set(false, newPort)
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c, _ := post(newPort, allowed, "Present", "k")
		return srv.Running() == 0 && c == 0, nil
	}); err != nil {
		t.Fatal("still serving after dns01_webhook.enabled=false")
	}
}

// testEnv is the package's one control plane, shared by its tests: started
// with kubeadm's front-proxy flags (the aggregation layer), with a ServiceAccount
// allowed to call the solver (as cert-manager's is) and one that is not.
type testEnv struct {
	cfg             *rest.Config
	cs              kubernetes.Interface
	kubeconfig      string
	fp              *frontProxy
	allowed, denied string
}

var (
	envOnce   sync.Once
	env       *testEnv
	envErr    error
	stopEnv   = func() {}
	envTmpDir string
)

// sharedEnv starts the control plane on first use; TestMain stops it.
func sharedEnv(t *testing.T) *testEnv {
	t.Helper()
	envOnce.Do(func() {
		envTmpDir, envErr = os.MkdirTemp("", "dns01-test-")
		if envErr != nil {
			return
		}
		e := &testEnv{}
		if e.fp, envErr = newFrontProxy(envTmpDir); envErr != nil {
			return
		}
		te, cfg, err := testutil.Start(testutil.Options{APIServerFlags: e.fp.flags()})
		if err != nil {
			envErr = err
			return
		}
		stopEnv = func() { _ = te.Stop() }
		e.cfg, e.cs = cfg, kubernetes.NewForConfigOrDie(cfg)
		e.kubeconfig = filepath.Join(envTmpDir, "kubeconfig")
		if envErr = os.WriteFile(e.kubeconfig, te.KubeConfig, 0o600); envErr != nil {
			return
		}
		if e.allowed, envErr = saToken(e.cs, "cert-manager", true); envErr != nil {
			return
		}
		if e.denied, envErr = saToken(e.cs, "someone", false); envErr != nil {
			return
		}
		env = e
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopEnv()
	if envTmpDir != "" {
		_ = os.RemoveAll(envTmpDir)
	}
	os.Exit(code)
}

// startAPIConnection runs the emulator and an operator connection to it.
func startAPIConnection(t *testing.T) (*polycrate.Client, *polycrate.Connection) {
	t.Helper()
	ac, _, _, apiURL := dns01.StartAPI(t)
	conn := polycrate.NewConnection(polycrate.Options{})
	if _, err := conn.Configure(apiURL, "", emulator.DevAgentToken); err != nil {
		t.Fatal(err)
	}
	return ac, conn
}
