package cli

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// --zap-log-level=10 must not let client-go log request and answer bodies
// (V(8) and up: Secrets included).
func TestLogLevelIsCappedBelowClientGoBodies(t *testing.T) {
	level := uzap.NewAtomicLevelAt(zapcore.Level(-10))
	if !capLogLevel(level) {
		t.Fatal("level 10 was not capped")
	}
	logger := zap.New(zap.Level(level), zap.WriteTo(io.Discard))
	if logger.V(8).Enabled() || !logger.V(7).Enabled() {
		t.Fatalf("V(8) enabled %v, V(7) enabled %v: want false, true", logger.V(8).Enabled(), logger.V(7).Enabled())
	}
	info := uzap.NewAtomicLevelAt(zapcore.InfoLevel)
	if capLogLevel(info) || info.Level() != zapcore.InfoLevel {
		t.Fatal("an ordinary level was changed")
	}
}

// The operator asks its API server for uncompressed answers unless
// --kube-api-compression: what a request carries, seen by a server. (Over TLS,
// as every API server is served: client-go ignores DisableCompression for a
// plain-HTTP server, which it reaches through http.DefaultTransport.)
func TestRunAsksForNoCompression(t *testing.T) {
	for _, compression := range []bool{false, true} {
		seen := make(chan string, 1)
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case seen <- r.Header.Get("Accept-Encoding"):
			default:
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
		}))
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
		cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q, certificate-authority-data: %s}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n", srv.URL, ca)
		if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		o := &runOptions{kube: kubeFlags{kubeconfig: kubeconfig}, qps: DefaultKubeAPIQPS, burst: DefaultKubeAPIBurst, compression: compression}
		rc, err := o.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dc.ServerVersion(); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		got := <-seen
		if asked := strings.Contains(got, "gzip"); asked != compression {
			t.Errorf("--kube-api-compression=%v: Accept-Encoding %q", compression, got)
		}
	}
}
