// Package manager builds the operator's one controller-runtime manager: one cache,
// one client, one metrics registry, health probes and leader election. Every
// controller, webhook server and the agent are added to it.
package manager

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"

	polycratev1alpha1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/version"
)

// Defaults of the run command's flags.
const (
	DefaultMetricsBindAddress     = ":8080"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultLeaderElectionID       = "polycrate-operator.polycrate.io"
	// DefaultRenewDeadline is controller-runtime's default renew deadline.
	DefaultRenewDeadline    = 10 * time.Second
	DefaultGracefulShutdown = 30 * time.Second
)

// Options configure the manager.
type Options struct {
	// MetricsBindAddress serves /metrics; "0" turns it off.
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS to authenticated and authorized
	// clients only (metricsauth.go); false serves plain HTTP to anyone.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key of the metrics server (reloaded
	// when they change); empty or without them: a self-signed certificate.
	MetricsCertDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns it off.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles; empty or "0" turns it off.
	PprofBindAddress string
	// LeaderElect makes only one replica active at a time (a Lease in OperatorNamespace).
	LeaderElect bool
	// LeaderElectionID is the Lease's name.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (0: the
	// defaults 15 s, 10 s, 2 s): a standby takes over at most about
	// LeaseDuration + RetryPeriod after the leader died.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Fence, with LeaderElect, learns of each renewal of the Lease: the API
	// client refuses to write while the leadership is not confirmed (fence.go).
	Fence *Fence
	// OperatorNamespace is where the operator runs: its Lease, OperatorConfig and token Secret.
	OperatorNamespace string
	// MaxConcurrentReconciles is the default concurrency of every controller.
	MaxConcurrentReconciles int
	// GracefulShutdownTimeout bounds how long runnables may take to stop.
	GracefulShutdownTimeout time.Duration
	// Logger is the manager's (and its controllers') logger; empty uses ctrl.Log.
	Logger logr.Logger
	// SkipNameValidation allows a second manager with the same controllers in one
	// process (tests that restart the operator in-process).
	SkipNameValidation bool
	// StreamEndpointList makes the Endpoint informer's initial list client-go's
	// streaming list instead of a LIST decoded in one pass (endpointlist.go):
	// for make perf-informer's comparison of the two.
	StreamEndpointList bool
	// StockCache builds the manager's cache and logger as stock
	// controller-runtime and client-go build them: controller-runtime's field
	// indexes instead of the compact ones (indexcache.go), and the Endpoint
	// informer's stock list and watch instead of the one-pass decoders
	// (endpointlist.go, endpointwatch.go). The way back from the
	// performance machinery (run --cache-mode=stock; docs/performance.md). The
	// resilience of every informer (resilient.go) and the compact Pod and Secret
	// stores are no performance options and stay.
	StockCache bool
	// KubeRecovery learns each time the Kubernetes API server answers again
	// after it did not (the informers' gate, resilient.go); the controllers
	// retry at once what failed for want of its answer (nil: nobody listens).
	KubeRecovery *kube.Recovery
}

// NewScheme returns the scheme with every type the operator reads or writes.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(polycratev1alpha1.AddToScheme(s))
	utilruntime.Must(gatewayv1.Install(s))
	utilruntime.Must(certmanagerv1.AddToScheme(s))
	utilruntime.Must(velerov1.AddToScheme(s))
	return s
}

// New builds the manager.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.OperatorNamespace == "" {
		o.OperatorNamespace = polycratev1alpha1.DefaultOperatorNamespace
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = controller.DefaultMaxConcurrentReconciles
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = DefaultGracefulShutdown
	}
	shutdown := o.GracefulShutdownTimeout
	unfenced := cfg // the metrics server's reviews are no writes to fence
	var lock resourcelock.Interface
	if o.LeaderElect && o.Fence != nil {
		if o.RenewDeadline <= 0 {
			o.RenewDeadline = DefaultRenewDeadline
		}
		var err error
		if lock, err = leaseLock(cfg, o.OperatorNamespace, o.LeaderElectionID, o.RenewDeadline, o.Fence); err != nil {
			return nil, err
		}
		// The manager's clients (not the Lease's) write only while the leadership
		// is confirmed. Followers write nothing to Kubernetes.
		cfg = fenceWrites(cfg, o.Fence)
	}

	var httpClient atomic.Pointer[http.Client] // the manager's, once it exists
	mgr, err := ctrl.NewManager(cfg, managerOptions(cfg, o, lock, &shutdown, unfenced, &httpClient))
	if err != nil {
		return nil, err
	}
	httpClient.Store(mgr.GetHTTPClient())
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("cache-sync", cacheSynced(mgr.GetCache())); err != nil {
		return nil, err
	}
	registerInfoMetric()
	return mgr, nil
}

// managerOptions are the controller-runtime manager's options: the operator's
// cache (compact indexes, the Endpoint informer's own list
// and watch, every informer resilient to its API server), metrics, probes and
// leader election. unfenced is the configuration the metrics server's reviews
// use; httpClient is the manager's HTTP client, once it exists.
func managerOptions(cfg *rest.Config, o Options, lock resourcelock.Interface, shutdown *time.Duration, unfenced *rest.Config, httpClient *atomic.Pointer[http.Client]) ctrl.Options {
	logger := o.Logger
	if logger.GetSink() == nil {
		logger = ctrl.Log // controller-runtime's default
	}
	scheme := NewScheme()
	// The performance machinery, or stock controller-runtime (StockCache).
	newCache := newCompactIndexCache
	if o.StockCache {
		newCache = cache.New
	}
	return ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		// Field indexes of the operator's own, a seventh of the memory
		// (indexcache.go).
		NewCache: newCache,
		Cache: cache.Options{
			// Nothing the operator does reads managedFields: never keep them in
			// memory.
			DefaultTransform: cache.TransformStripManagedFields(),
			// Pods and Secrets are watched cluster-wide into compact stores of
			// their own (internal/slimcache), never through this cache. Should
			// anything read them through it after all, they stay stripped here.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:    {Transform: kube.StripPod},
				&corev1.Secret{}: {Transform: kube.StripMetadata},
			},
			// The Endpoint informer lists with a LIST and watches, each
			// decoded in one pass (endpointlist.go, endpointwatch.go); every
			// informer comes back within seconds of its API server (resilient.go).
			NewInformer: endpointInformers(cfg, scheme, httpClient.Load, o.StreamEndpointList, o.StockCache, o.KubeRecovery.Back),
		},
		Metrics:                       metricsOptions(o, unfenced),
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		PprofBindAddress:              o.PprofBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.OperatorNamespace,
		LeaderElectionReleaseOnCancel: true,
		// The Lease lock controller-runtime would build, telling the fence of
		// each renewal (fence.go); nil without a fence.
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       durationOrNil(o.LeaseDuration),
		RenewDeadline:                       durationOrNil(o.RenewDeadline),
		RetryPeriod:                         durationOrNil(o.RetryPeriod),
		GracefulShutdownTimeout:             shutdown,
		Controller: config.Controller{
			MaxConcurrentReconciles: o.MaxConcurrentReconciles,
			SkipNameValidation:      &o.SkipNameValidation,
		},
	}
}

// cacheSynced reports ready once the manager's cache has started and synced.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 200*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer cache not synced yet")
		}
		return nil
	}
}

var infoOnce sync.Once

// registerInfoMetric exposes polycrate_operator_info{version,commit} = 1.
func registerInfoMetric() {
	infoOnce.Do(func() {
		info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "polycrate_operator_info",
			Help: "Build information of the running Polycrate Operator; always 1.",
		}, []string{"version", "commit"})
		info.WithLabelValues(version.Get(), version.Commit).Set(1)
		ctrlmetrics.Registry.MustRegister(info)
	})
}

func durationOrNil(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}
