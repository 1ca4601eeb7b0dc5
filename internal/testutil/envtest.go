// Package testutil starts the envtest control plane (a real kube-apiserver and
// etcd, built from source by `make envtest`) for the integration suites, with the
// operator's CRDs and, on request, the real third-party CRDs from the Go module cache.
package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/polycrate/polycrate-operator/internal/manager"
)

// EnvtestK8sVersion is the Kubernetes version `make envtest` builds; keep in step with the Makefile.
const EnvtestK8sVersion = "1.37.2"

// OperatorBuildTags are the build tags of every build of the operator binary
// (Makefile GO_BUILD_TAGS, Dockerfile, the test harnesses). grpcnotrace keeps
// gRPC (linked through k8s.io/apiserver by the secure metrics server's filter)
// from importing golang.org/x/net/trace, whose init reaches html/template: a
// reflect method call there makes the linker keep every exported method, 79 MB
// instead of 51 MB stripped (docs/operations.md).
const OperatorBuildTags = "grpcnotrace"

// StockCache says the suites run the operator with --cache-mode=stock
// (POLYCRATE_CACHE_MODE=stock): make test runs the endpoints discovery suite
// that way too, so the way back from the performance machinery keeps working.
func StockCache() bool { return os.Getenv("POLYCRATE_CACHE_MODE") == "stock" }

// Options choose which CRDs the control plane starts with.
type Options struct {
	// OwnCRDs installs config/crd/bases.
	OwnCRDs bool
	// ThirdPartyCRDs installs the Gateway API (standard channel), cert-manager and
	// Velero CRDs from the Go module cache.
	ThirdPartyCRDs bool
	// APIServerFlags are extra kube-apiserver flags (name without dashes → value),
	// e.g. the front-proxy ones an aggregated API server is tested with.
	APIServerFlags map[string]string
}

// Start starts a control plane. Stop it with env.Stop().
func Start(o Options) (*envtest.Environment, *rest.Config, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  1 * time.Minute,
	}
	if o.OwnCRDs {
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, filepath.Join(RepoRoot(), "config", "crd", "bases"))
	}
	if o.ThirdPartyCRDs {
		paths, err := ThirdPartyCRDPaths()
		if err != nil {
			return nil, nil, err
		}
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, paths...)
	}
	for k, v := range o.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting envtest control plane from %s: %w", assets, err)
	}
	return env, cfg, nil
}

// Scheme is the operator's scheme plus the third-party kinds tests create.
func Scheme() *runtime.Scheme {
	s := manager.NewScheme()
	utilruntime.Must(gatewayv1.Install(s))
	utilruntime.Must(certmanagerv1.AddToScheme(s))
	utilruntime.Must(velerov1.AddToScheme(s))
	return s
}

var (
	rootOnce sync.Once
	root     string
)

// RepoRoot is the directory of the operator's go.mod.
func RepoRoot() string {
	rootOnce.Do(func() {
		dir, _ := os.Getwd()
		for d := dir; ; d = filepath.Dir(d) {
			if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
				strings.Contains(string(b), "module github.com/polycrate/polycrate-operator\n") {
				root = d
				return
			}
			if filepath.Dir(d) == d {
				root = dir
				return
			}
		}
	})
	return root
}

// AssetsDir is $KUBEBUILDER_ASSETS, else bin/k8s/<version> in the repository.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin", "k8s", EnvtestK8sVersion)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("envtest binary %s not found in %s: run 'make envtest' (or 'make test', which builds it)", b, dir)
		}
	}
	return dir, nil
}

// ThirdPartyCRDPaths are the CRD directories of the Gateway API (standard channel),
// cert-manager and Velero modules this project requires, in the module cache.
func ThirdPartyCRDPaths() ([]string, error) {
	dirs := []struct{ module, sub string }{
		{"sigs.k8s.io/gateway-api", "config/crd/standard"},
		{"github.com/cert-manager/cert-manager", "deploy/crds"},
		{"github.com/vmware-tanzu/velero", "config/crd/v1/bases"},
	}
	var out []string
	for _, d := range dirs {
		modDir, err := ModuleDir(d.module)
		if err != nil {
			return nil, err
		}
		out = append(out, filepath.Join(modDir, filepath.FromSlash(d.sub)))
	}
	return out, nil
}

// ModuleDir is the module-cache directory of a module the operator requires.
func ModuleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		if err == nil {
			err = errors.New("module not downloaded")
		}
		return "", fmt.Errorf("locating module %s (go mod download): %w %s", module, err, stderr.String())
	}
	return dir, nil
}

// FreePort returns a TCP port free on 127.0.0.1 now, for a server a test starts
// by port number. It is chosen below the kernel's ephemeral range (32768 and
// up on Linux), so that no outgoing connection of a test running in parallel
// takes it between this check and the server's bind.
func FreePort() (int, error) {
	for range 200 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, errors.New("no free port in 20000-31999")
}
