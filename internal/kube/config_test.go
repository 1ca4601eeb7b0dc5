package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: SERVER
contexts:
- name: ctx
  context: {cluster: c, user: u}
- name: other
  context: {cluster: c, user: u, namespace: x}
current-context: ctx
users:
- name: u
  user: {token: not-a-real-token}
`

func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	p := filepath.Join(dir, "config")
	if err := os.WriteFile(p, []byte(strings.Replace(kubeconfigTemplate, "SERVER", server, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func isolate(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	return home
}

func TestRESTConfigExplicitPathWins(t *testing.T) {
	isolate(t)
	env := writeKubeconfig(t, t.TempDir(), "https://from-env:6443")
	t.Setenv("KUBECONFIG", env)
	explicit := writeKubeconfig(t, t.TempDir(), "https://explicit:6443")
	cfg, err := RESTConfig(ConfigOptions{Kubeconfig: explicit, QPS: 42, Burst: 84, UserAgent: "ua/1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://explicit:6443" || cfg.QPS != 42 || cfg.Burst != 84 || cfg.UserAgent != "ua/1" {
		t.Fatalf("got host=%s qps=%v burst=%d ua=%s", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
}

func TestRESTConfigFromEnvThenHome(t *testing.T) {
	home := isolate(t)
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeKubeconfig(t, filepath.Join(home, ".kube"), "https://home:6443")
	cfg, err := RESTConfig(ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://home:6443" {
		t.Fatalf("~/.kube/config: host %s", cfg.Host)
	}
	t.Setenv("KUBECONFIG", writeKubeconfig(t, t.TempDir(), "https://env:6443"))
	cfg, err = RESTConfig(ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://env:6443" {
		t.Fatalf("$KUBECONFIG: host %s", cfg.Host)
	}
}

func TestRESTConfigErrors(t *testing.T) {
	isolate(t)
	_, err := RESTConfig(ConfigOptions{})
	if err == nil || !strings.Contains(err.Error(), "no Kubernetes configuration found") {
		t.Fatalf("no config anywhere: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	_, err = RESTConfig(ConfigOptions{Kubeconfig: missing})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing explicit file: %v", err)
	}
	p := writeKubeconfig(t, t.TempDir(), "https://x:6443")
	_, err = RESTConfig(ConfigOptions{Kubeconfig: p, Context: "does-not-exist"})
	if err == nil || !strings.Contains(err.Error(), "does-not-exist") {
		t.Fatalf("unknown context: %v", err)
	}
	if strings.Contains(err.Error(), "not-a-real-token") {
		t.Fatal("token leaked into the error")
	}
}

func TestRESTConfigNegativeQPSTurnsThrottlingOff(t *testing.T) {
	isolate(t)
	explicit := writeKubeconfig(t, t.TempDir(), "https://explicit:6443")
	cfg, err := RESTConfig(ConfigOptions{Kubeconfig: explicit, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != -1 {
		t.Fatalf("QPS = %v, want -1 (client-go then builds no rate limiter)", cfg.QPS)
	}
	cfg, err = RESTConfig(ConfigOptions{Kubeconfig: explicit})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 0 || cfg.Burst != 0 {
		t.Fatalf("zero options changed the config: qps=%v burst=%d", cfg.QPS, cfg.Burst)
	}
}
