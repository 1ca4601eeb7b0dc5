package preflight

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// The operator reads what the checks read (all read-only, cluster metadata).
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses,verbs=list
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses,verbs=list
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get
// +kubebuilder:rbac:groups=velero.io,resources=backupstoragelocations,verbs=list
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create

// DefaultDelay is the wait before the first run after start.
const DefaultDelay = 2 * time.Minute

// DefaultInterval is how often the running operator checks again (seed 004's
// checklist, daily).
const DefaultInterval = 24 * time.Hour

// Runner runs the checklist in the operator: at start and every Interval, with
// the operator's own rights (profile "operator", and "cloud-controller" while
// the cloud controller is enabled). The OperatorConfig controller shows the
// report (condition PreflightPassed, status.preflight) and hands its summary to
// the API's cluster record.
type Runner struct {
	Config *rest.Config
	// Scheme is the checks' client's (the manager's; nil: the Checker's default).
	Scheme *runtime.Scheme
	// Namespace is the operator's namespace (its Role's rights).
	Namespace string
	// SecretNamespaces limits the Secret rights checked to these namespaces (see Options).
	SecretNamespaces []string
	Live             *liveconfig.Store
	Interval         time.Duration
	// Delay is the wait before the first run (default DefaultDelay; negative: at
	// once): a restarted operator's first minutes stay quiet, and a fleet that
	// restarts at once does not ask every API server at the same moment.
	Delay time.Duration
	Log   logr.Logger

	mu      sync.Mutex
	last    *Report
	changed chan struct{}
	now     chan struct{}
}

func (r *Runner) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed, r.now = make(chan struct{}, 1), make(chan struct{}, 1)
	}
}

// Last is the latest report (nil before the first).
func (r *Runner) Last() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Changed receives a value after each report.
func (r *Runner) Changed() <-chan struct{} { r.init(); return r.changed }

// RunNow asks for a run as soon as possible.
func (r *Runner) RunNow() {
	r.init()
	select {
	case r.now <- struct{}{}:
	default:
	}
}

// Start runs until ctx ends (on the leader).
func (r *Runner) Start(ctx context.Context) error {
	r.init()
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	delay := r.Delay
	if delay == 0 {
		delay = DefaultDelay
	}
	if delay > 0 && !r.wait(ctx, delay) {
		return nil
	}
	for {
		r.run(ctx)
		if !r.wait(ctx, interval) {
			return nil
		}
	}
}

// wait waits d, or less when RunNow asks; false when ctx ended.
func (r *Runner) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-r.now:
	}
	return true
}

func (r *Runner) run(ctx context.Context) {
	profiles := []string{"operator"}
	if snap := r.Live.Get(); snap != nil && snap.Spec.CloudController.Enabled {
		profiles = append(profiles, "cloud-controller")
	}
	rep := (&Checker{Config: r.Config, Scheme: r.Scheme, Opts: Options{Profiles: profiles, OperatorNamespace: r.Namespace, SecretNamespaces: r.SecretNamespaces}}).Run(ctx)
	if ctx.Err() != nil {
		return
	}
	r.Log.Info("preflight checklist", "summary", rep.Summary, "failed", rep.Failed())
	r.mu.Lock()
	r.last = rep
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}
