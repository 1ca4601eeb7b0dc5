// Command demo runs the Polycrate Operator on embedded defaults, on one machine,
// with nothing installed: the Polycrate API emulator (default seed, data in
// bin/demo/api.db, started anew each run like the control plane), a local control plane (the envtest kube-apiserver and etcd
// built by `make envtest`, with the Gateway-API, cert-manager and Velero CRDs),
// the operator's CRDs, the polycrate namespace, the API token Secret and an
// OperatorConfig pointing at the emulator, the operator, and demo workloads for
// every feature (workloads.go). It waits until everything is synced, prints what
// the API holds, and stops everything it started on Ctrl-C. With DEMO_ONCE=1 it
// exits after convergence: 0, or 1 naming what did not converge.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/cli"
	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

func main() {
	apiAddr := flag.String("api-addr", "127.0.0.1:8090", "where the Polycrate API emulator listens")
	probeAddr := flag.String("health-probe-bind-address", "127.0.0.1:8081", "operator health probes")
	metricsAddr := flag.String("metrics-bind-address", "127.0.0.1:8080", "operator metrics")
	stateDir := flag.String("state-dir", filepath.Join("bin", "demo"), "where the demo writes its kubeconfig")
	dnsAddr := flag.String("dns-addr", "127.0.0.1:8053", "where the emulator serves DNS for its zones")
	externalDNSPort := flag.Int("external-dns-port", 8888, "the operator's external-dns webhook provider port")
	flag.Parse()
	demoDNSAddr, demoExternalDNSPort = *dnsAddr, *externalDNSPort

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *apiAddr, *probeAddr, *metricsAddr, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// The DNS side of the demo (flags).
var (
	demoDNSAddr         string
	demoExternalDNSPort int
)

func run(ctx context.Context, apiAddr, probeAddr, metricsAddr, stateDir string) error {
	// Every listener first, before anything is written: a port another process
	// holds (another demo?) ends the demo here, instead of running it against
	// that process's API. The emulator's listener is kept and served; the
	// operator's ports are checked and released for it.
	apiListener, err := claimPorts(apiAddr, probeAddr, metricsAddr, demoDNSAddr, demoExternalDNSPort)
	if err != nil {
		return err
	}
	defer func() { _ = apiListener.Close() }()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	stopAPI, err := startAPI(apiListener, stateDir)
	if err != nil {
		return err
	}
	defer stopAPI()

	fmt.Println("» starting a local control plane (kube-apiserver + etcd)")
	env, cfg, err := testutil.Start(testutil.Options{ThirdPartyCRDs: true})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("» stopping the control plane")
		_ = env.Stop()
	}()
	kubeconfig, err := filepath.Abs(filepath.Join(stateDir, "kubeconfig"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}

	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		return err
	}
	if err := prepareCluster(ctx, c, apiAddr); err != nil {
		return err
	}

	stopAll, opDone, err := startOperator(ctx, stateDir, kubeconfig, probeAddr, metricsAddr)
	if err != nil {
		return err
	}
	defer func() { _ = stopAll() }()

	status := statusServer()
	defer status.Close()
	statusPort = status.Listener.Addr().(*net.TCPAddr).Port
	apiClient, err := apiDefinedEndpoint(ctx, apiAddr)
	if err != nil {
		_ = stopAll()
		return err
	}
	if err := showcase(ctx, c, apiClient); err != nil {
		_ = stopAll()
		return err
	}
	if os.Getenv("DEMO_ONCE") == "1" {
		fmt.Println("\n» converged; DEMO_ONCE=1: stopping")
		return stopAll()
	}
	printNextSteps(apiAddr, kubeconfig, probeAddr)
	return <-opDone
}

// statusServer is a local status server: a target the monitoring agent can
// reach (/healthz answers 200, /down 503), and, by its port, the API-defined tcp
// endpoint's.
func statusServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
}

// printNextSteps says where everything runs and what to try in another shell.
func printNextSteps(apiAddr, kubeconfig, probeAddr string) {
	fmt.Printf(`
Everything is synced. The Polycrate API emulator runs at http://%s
(open it in a browser; agent token %q). In another shell:

  export KUBECONFIG=%s
  go run ./cmd/polycrate-operator status
  kubectl get polycrate -A        # if kubectl is installed
  go run ./cmd/polycrate-operator health --url http://%s

Press Ctrl-C to stop everything.

`, apiAddr, emulator.DevAgentToken, kubeconfig, probeAddr)
}

// apiDefinedEndpoint creates the tcp endpoint status-tcp in the API, as a
// person would, and returns the API client it used.
func apiDefinedEndpoint(ctx context.Context, apiAddr string) (*polycrate.Client, error) {
	apiClient, err := polycrate.New(polycrate.Options{BaseURL: "http://" + apiAddr, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	if err != nil {
		return nil, err
	}
	fmt.Printf("» creating the API-defined tcp endpoint status-tcp (127.0.0.1:%d) in the API, as a person would\n", statusPort)
	_, err = apiClient.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "status-tcp", Kind: "tcp", RemoteAddress: "127.0.0.1",
		RemotePort: &statusPort, CreatedByComponent: "api",
		Spec: &polycrate.EndpointSpec{TCP: &polycrate.TCPSpec{Timeout: 2, Interval: 5}}})
	return apiClient, err
}

// startOperator runs the operator in this process, its JSON log in
// stateDir/operator.log (the terminal shows the steps and the final table);
// stop (idempotent) stops it and returns how it ended; done is its end.
func startOperator(ctx context.Context, stateDir, kubeconfig, probeAddr, metricsAddr string) (stop func() error, done <-chan error, err error) {
	logPath := filepath.Join(stateDir, "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	fmt.Println("» starting the operator (its log: " + logPath + ")")
	root := cli.NewRootCommand()
	root.SetErr(logFile)
	root.SetArgs([]string{"run", "--kubeconfig", kubeconfig, "--namespace", v1.DefaultOperatorNamespace,
		"--health-probe-bind-address", probeAddr, "--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--graceful-shutdown-timeout", (10 * time.Second).String()})
	opCtx, stopOperator := context.WithCancel(ctx)
	opDone := make(chan error, 1)
	ended := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(opCtx)
		_ = logFile.Close()
		opDone <- err
		ended <- err
	}()
	var once sync.Once
	var result error
	return func() error {
		once.Do(func() { stopOperator(); result = <-opDone })
		return result
	}, ended, nil
}

// startAPI starts the emulator on its listener, with fresh data (the file of
// the last run replaced: the control plane starts empty every run, and the last
// run's API objects would be adopted or duplicated by CRs that never made them;
// the file stays after a run, for a look at what the API held), and its DNS
// server; stop stops both.
func startAPI(apiListener net.Listener, stateDir string) (stop func(), err error) {
	dataFile := filepath.Join(stateDir, "api.db")
	if err := os.Remove(dataFile); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	fmt.Println("» starting the Polycrate API emulator on http://" + apiListener.Addr().String())
	api, err := emulator.New(emulator.Config{DataFile: dataFile})
	if err != nil {
		return nil, err
	}
	apiCtx, stopAPI := context.WithCancel(context.Background())
	apiDone := make(chan error, 1)
	go func() { apiDone <- api.Serve(apiCtx, apiListener) }()
	servedDNS, err := api.ListenDNS(apiCtx, demoDNSAddr)
	if err != nil {
		stopAPI()
		_ = api.Close()
		return nil, fmt.Errorf("serving DNS on %s: %w", demoDNSAddr, err)
	}
	fmt.Println("» the emulator serves DNS for its zones on " + servedDNS + " (dig @" + strings.Replace(servedDNS, ":", " -p ", 1) + " www.example.com)")
	return func() {
		fmt.Println("» stopping the API emulator")
		stopAPI()
		<-apiDone
		_ = api.Close()
	}, nil
}

// prepareCluster installs the CRDs and creates the namespace, the API token
// Secret and the OperatorConfig, pointed at the emulator.
func prepareCluster(ctx context.Context, c client.Client, apiAddr string) error {
	fmt.Println("» installing the operator's CRDs")
	all, err := crds.All()
	if err != nil {
		return err
	}
	if _, err := crds.Install(ctx, c, all, crds.InstallOptions{}); err != nil {
		return err
	}
	fmt.Println("» creating namespace polycrate, the API token Secret and OperatorConfig default")
	if err := ensure(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultOperatorNamespace}}); err != nil {
		return err
	}
	if err := ensure(ctx, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polycrate-api-creds", Namespace: v1.DefaultOperatorNamespace},
		StringData: map[string]string{"token": emulator.DevAgentToken}}); err != nil {
		return err
	}
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultOperatorConfigName, Namespace: v1.DefaultOperatorNamespace}}
	oc.Spec.APISync.APIURL = "http://" + apiAddr
	oc.Spec.LocalCluster.ClusterName = "demo"
	oc.Spec.CloudController.Enabled = true                       // node initialization and load balancers (docs/cloud-controller.md)
	oc.Spec.APISync.HealthReportIntervalSeconds = 10             // check results reach the API with the health report
	oc.Spec.ExternalDNSWebhook.Port = int32(demoExternalDNSPort) //nolint:gosec // a port
	if err := ensure(ctx, c, oc); err != nil {
		return err
	}
	return nil
}

// showcase applies the demo workloads, waits until everything is synced and the
// local targets are checked, and prints what the API holds.
func showcase(ctx context.Context, c client.Client, apiClient *polycrate.Client) error {
	fmt.Println("» applying the demo workloads (the simulator plays kubelet, cert-manager and Velero)")
	if err := applyWorkloads(ctx, c); err != nil {
		return err
	}
	fmt.Println("» waiting until the operator has synced everything")
	if err := waitConverged(ctx, c, 3*time.Minute); err != nil {
		return err
	}
	fmt.Println("» waiting until the API holds the check results of the local targets")
	if err := waitChecked(ctx, apiClient, time.Minute); err != nil {
		return err
	}
	fmt.Println("\n» what the Polycrate API now holds (as this cluster's agent sees it):")
	if err := printAPI(ctx, os.Stdout, apiClient); err != nil {
		return err
	}
	return nil
}

// busyError names a port another process holds and the flag that moves it.
func busyError(addr, flagName string, err error) error {
	_, port, _ := net.SplitHostPort(addr)
	return fmt.Errorf("port %s is in use (another demo?); pass -%s (%v)", port, flagName, err)
}

// claimPorts listens on the emulator's address (the listener it returns is
// the one the emulator serves) and checks that every other port the demo opens
// is free: the emulator's DNS (udp and tcp), the operator's health probes,
// metrics and external-dns webhook (on every interface, as the operator
// listens).
func claimPorts(apiAddr, probeAddr, metricsAddr, dnsAddr string, externalDNSPort int) (net.Listener, error) {
	api, err := net.Listen("tcp", apiAddr)
	if err != nil {
		return nil, busyError(apiAddr, "api-addr", err)
	}
	checks := []struct{ network, addr, flag string }{
		{"tcp", probeAddr, "health-probe-bind-address"},
		{"tcp", metricsAddr, "metrics-bind-address"},
		{"tcp", dnsAddr, "dns-addr"},
		{"udp", dnsAddr, "dns-addr"},
		{"tcp", net.JoinHostPort("", strconv.Itoa(externalDNSPort)), "external-dns-port"},
	}
	for _, c := range checks {
		if c.addr == "0" || strings.HasSuffix(c.addr, ":0") {
			continue // disabled, or any free port
		}
		var closeErr error
		if c.network == "udp" {
			pc, err := net.ListenPacket(c.network, c.addr)
			if err != nil {
				_ = api.Close()
				return nil, busyError(c.addr, c.flag, err)
			}
			closeErr = pc.Close()
		} else {
			l, err := net.Listen(c.network, c.addr)
			if err != nil {
				_ = api.Close()
				return nil, busyError(c.addr, c.flag, err)
			}
			closeErr = l.Close()
		}
		if closeErr != nil {
			_ = api.Close()
			return nil, closeErr
		}
	}
	return api, nil
}

func ensure(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}
