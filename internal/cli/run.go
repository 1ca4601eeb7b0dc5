package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	polycratev1alpha1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/version"
)

// runOptions are the flags of `polycrate-operator run`.
type runOptions struct {
	kube             kubeFlags
	mgr              manager.Options
	qps              float32
	burst            int
	compression      bool
	installCRDs      bool
	secretNamespaces []string
	checkDNSServer   string
	cacheMode        string
	zapOpts          zap.Options
}

// restConfig is the operator's Kubernetes client configuration: the kubeconfig
// flags, the client-side limits and, unless --kube-api-compression, no gzip.
// The operator runs next to its API server: compressed watch streams and lists
// cost the API server and the operator CPU for bandwidth nobody lacks, and each
// watch keeps a decompressor of its own (about 40 KiB) for as long as it runs.
func (o *runOptions) restConfig() (*rest.Config, error) {
	cfg, err := kube.RESTConfig(kube.ConfigOptions{
		Kubeconfig: o.kube.kubeconfig, Context: o.kube.context,
		QPS: o.qps, Burst: o.burst, UserAgent: userAgent(),
	})
	if err != nil {
		return nil, err
	}
	cfg.DisableCompression = !o.compression
	return cfg, nil
}

func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return polycratev1alpha1.DefaultOperatorNamespace
}

// Client-side limits towards the kube-apiserver. They sit above what a full
// convergence needs (two writes per Endpoint, docs/performance.md), so the API
// server's own Priority and Fairness, not the client, paces a large start; they
// still cap a runaway loop.
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

func newRunCommand() *cobra.Command {
	o := &runOptions{zapOpts: zap.Options{}}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the operator",
		Long: `Start the operator's manager: its controllers, health probes (/healthz, /readyz) and
Prometheus metrics (/metrics, HTTPS for RBAC-authorized readers unless
--metrics-secure=false). Stops gracefully on SIGTERM or SIGINT.`,
		Example: `  polycrate-operator run --kubeconfig ~/.kube/config
  polycrate-operator run --leader-elect
  polycrate-operator run --metrics-bind-address :8080
  polycrate-operator run --metrics-bind-address 127.0.0.1:8080 --metrics-secure=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.bindFlags(cmd)
	return cmd
}

// bindFlags binds the run command's flags to o.
func (o *runOptions) bindFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.kube.bind(cmd)
	f.BoolVar(&o.mgr.LeaderElect, "leader-elect", false, "enable leader election for HA (one active replica; a Lease in --namespace)")
	f.StringVar(&o.mgr.MetricsBindAddress, "metrics-bind-address", manager.DefaultMetricsBindAddress, `address of the Prometheus metrics endpoint ("0" disables it)`)
	f.BoolVar(&o.mgr.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients RBAC allows to get the non-resource URL /metrics only (TokenReview and SubjectAccessReview, as kubebuilder scaffolds; the ClusterRole polycrate-operator-metrics-reader grants it); false: plain HTTP to anyone, for local runs")
	f.StringVar(&o.mgr.MetricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the secure metrics server, reloaded when they change (e.g. a cert-manager Certificate's Secret); empty: a self-signed certificate")
	f.StringVar(&o.mgr.HealthProbeBindAddress, "health-probe-bind-address", manager.DefaultHealthProbeBindAddress, `address of the /healthz and /readyz endpoints ("0" disables them)`)
	f.StringVar(&o.mgr.PprofBindAddress, "pprof-bind-address", "0", `address of Go's /debug/pprof profiles, for performance work ("0" disables them)`)
	f.IntVar(&o.mgr.MaxConcurrentReconciles, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "how many objects each controller reconciles at once")
	f.StringVar(&o.mgr.OperatorNamespace, "namespace", defaultNamespace(), "the operator's namespace: its OperatorConfig, token Secret and leader-election Lease ($POD_NAMESPACE)")
	f.StringVar(&o.mgr.LeaderElectionID, "leader-election-id", manager.DefaultLeaderElectionID, "name of the leader-election Lease")
	f.DurationVar(&o.mgr.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before taking over")
	f.DurationVar(&o.mgr.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading (and exits)")
	f.DurationVar(&o.mgr.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the Lease")
	f.StringSliceVar(&o.secretNamespaces, "secret-namespaces", nil, "limit what the operator does with Secrets (meta-Secrets, S3Bucket credentials) to these namespaces, for clusters that grant it Secrets by namespaced Roles (chart value rbac.secretNamespaces); empty: cluster-wide")
	f.StringVar(&o.checkDNSServer, "check-dns-server", "", "resolve the host names of endpoint checks through this DNS server (host:port, UDP with TCP fallback) instead of the Pod's resolver: split-horizon DNS, or names that only a local server knows (the demo, the end-to-end tests)")
	f.DurationVar(&o.mgr.GracefulShutdownTimeout, "graceful-shutdown-timeout", manager.DefaultGracefulShutdown, "how long controllers may take to finish on shutdown")
	f.BoolVar(&o.installCRDs, "install-crds", true, "apply the operator's CRDs on start (server-side apply; never deletes or downgrades); false for GitOps-managed CRDs")
	f.Float32Var(&o.qps, "kube-api-qps", DefaultKubeAPIQPS, "queries per second to the Kubernetes API, per resource kind (negative: no client-side limit)")
	f.IntVar(&o.burst, "kube-api-burst", DefaultKubeAPIBurst, "burst of queries to the Kubernetes API, per resource kind")
	f.StringVar(&o.cacheMode, "cache-mode", "fast", "fast: the operator's compact field indexes and one-pass Endpoint list and watch decoders; stock: the cache as stock controller-runtime and client-go build it (the way back, e.g. after a client-go upgrade; docs/performance.md has what each part buys)")
	f.BoolVar(&o.compression, "kube-api-compression", false, "ask the kube-apiserver for gzip-compressed responses and watch streams (off: the operator runs next to its API server, where compression costs both sides CPU and each watch a decompressor's memory)")
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zapOpts.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
}

// validate checks the flags the manager does not check itself.
func (o *runOptions) validate() error {
	switch o.cacheMode {
	case "fast":
	case "stock":
		o.mgr.StockCache = true
	default:
		return fmt.Errorf("--cache-mode %q: fast or stock", o.cacheMode)
	}
	if o.checkDNSServer != "" {
		if _, _, err := net.SplitHostPort(o.checkDNSServer); err != nil {
			return fmt.Errorf("--check-dns-server %q: want host:port (%w)", o.checkDNSServer, err)
		}
	}
	return nil
}

// LogTimeLayout is the log's default timestamp: RFC 3339 with milliseconds.
const LogTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// run runs the operator until cmd's context ends.
func (o *runOptions) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	// The level is atomic so the API's cluster record (operator_loglevel) can change it live.
	level, ok := o.zapOpts.Level.(uzap.AtomicLevel)
	if !ok {
		level = uzap.NewAtomicLevelAt(zapcore.InfoLevel)
		if o.zapOpts.Development {
			level = uzap.NewAtomicLevelAt(zapcore.DebugLevel)
		}
		o.zapOpts.Level = level
	}
	// No stack trace on error lines unless asked for (--zap-stacktrace-level):
	// a failed reconcile is an error line, and its trace names the
	// operator's own frames, not what went wrong.
	if o.zapOpts.StacktraceLevel == nil {
		o.zapOpts.StacktraceLevel = zapcore.PanicLevel
	}
	// Timestamps to the millisecond unless --zap-time-encoding says otherwise
	// (controller-runtime's default is the second, in which a whole reconcile fits).
	if o.zapOpts.TimeEncoder == nil {
		o.zapOpts.TimeEncoder = zapcore.TimeEncoderOfLayout(LogTimeLayout)
	}
	capped := capLogLevel(level)
	flagLevel := level.Level()
	logger := zap.New(zap.UseFlagOptions(&o.zapOpts), zap.WriteTo(cmd.ErrOrStderr()))
	ctrl.SetLogger(logger)
	o.mgr.Logger = logger
	log := logger.WithName("setup")
	if capped {
		log.Info("log level capped at 7: from 8 on, client-go logs request and response bodies, Secrets included")
	}

	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	var crdReport *crds.Report
	if o.installCRDs {
		c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
		if err != nil {
			return err
		}
		if crdReport, err = crds.SelfInstall(cmd.Context(), c, version.Get(), logger.WithName("crds")); err != nil {
			return err
		}
	} else {
		log.Info("CRD installation on start is off (--install-crds=false): CRDs are managed outside the operator")
	}
	warmCRDStorage(cmd.Context(), cfg, logger.WithName("crds"))
	// With leader election, the leader's API requests are fenced by its Lease
	// (a paused leader that resumes after a takeover writes nothing).
	fence := &manager.Fence{}
	o.mgr.Fence = fence
	// The informers' gate tells the controllers each return of the API server.
	back := kube.NewRecovery()
	o.mgr.KubeRecovery = back
	mgr, err := manager.New(cfg, o.mgr)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if _, err := operator.Setup(mgr, operator.Options{Namespace: o.mgr.OperatorNamespace, Version: version.Get(),
		UserAgent: userAgent(), MaxConcurrentReconciles: o.mgr.MaxConcurrentReconciles,
		SetLogLevel: func(l int) { level.SetLevel(zapLevel(l, flagLevel)) },
		Kubeconfig:  kube.KubeconfigFile(kube.ConfigOptions{Kubeconfig: o.kube.kubeconfig}), CRDs: crdReport,
		SecretNamespaces: o.secretNamespaces, Fence: fence.Check, CheckDNSServer: o.checkDNSServer, KubeRecovery: back}); err != nil {
		return err
	}
	log.Info("starting polycrate-operator", "version", version.Get(), "commit", version.Commit,
		"apiServer", cfg.Host, "namespace", o.mgr.OperatorNamespace, "leaderElection", o.mgr.LeaderElect,
		"metrics", o.mgr.MetricsBindAddress, "metricsSecure", o.mgr.MetricsSecure, "healthProbes", o.mgr.HealthProbeBindAddress,
		"maxConcurrentReconciles", o.mgr.MaxConcurrentReconciles)
	if err := mgr.Start(cmd.Context()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	log.Info("polycrate-operator stopped")
	return nil
}

// zapLevel maps operator_loglevel (1 Info, 2 Debug, 3 Trace) to a zap level; 0 is
// the --zap-log-level flag's level.
func zapLevel(l int, flag zapcore.Level) zapcore.Level {
	switch l {
	case 1:
		return zapcore.InfoLevel
	case 2:
		return zapcore.DebugLevel
	case 3:
		return zapcore.Level(-2) // logr V(2)
	default:
		return flag
	}
}

// MaxLogVerbosity is the most verbose level the operator logs at. client-go logs
// the bodies of requests and answers from V(8) on (its contextual logger is the
// operator's), and those include Secrets, which must never reach a log.
const MaxLogVerbosity = 7

// capLogLevel keeps a level at most MaxLogVerbosity verbose; it reports whether it
// had to.
func capLogLevel(level uzap.AtomicLevel) bool {
	if level.Level() < -MaxLogVerbosity {
		level.SetLevel(zapcore.Level(-MaxLogVerbosity))
		return true
	}
	return false
}

// warmCRDStorage opens the API server's storage of the operator's kinds before
// the informers start (crds.Warm: a cold watch cache answers an informer with 429
// and a second's wait). It never fails the start: what is not ready in time is
// what the informers wait for as before.
func warmCRDStorage(ctx context.Context, cfg *rest.Config, log logr.Logger) {
	all, err := crds.All()
	if err != nil {
		return
	}
	var slowest time.Duration
	ready := 0
	for _, r := range crds.Warm(ctx, cfg, all, 3*time.Second) {
		switch {
		case r.Err != nil:
			log.V(1).Info("could not open the storage of a CRD ahead of the informers", "resource", r.Resource, "error", r.Err.Error())
		case r.Ready:
			ready++
		}
		slowest = max(slowest, r.Waited)
	}
	log.V(1).Info("CRD storage opened ahead of the informers", "ready", ready, "of", len(all), "slowest", slowest.Round(time.Millisecond).String())
}
