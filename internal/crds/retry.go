package crds

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Retry delays of a CRD installation that failed on start.
const (
	RetryInitial = 5 * time.Second
	RetryMax     = 5 * time.Minute
)

// Retrier applies the CRDs again, with back-off, after the installation on
// start failed while the installed ones let the operator run (a kube-apiserver
// that hung at the start, a permission granted later): until then the
// OperatorConfig says CRDsInstalled=False/InstallFailed, afterwards what the
// successful installation did — never the start's failure for the life of the
// process. It runs on the leader (the replica that writes the condition).
type Retrier struct {
	Client  client.Client
	Version string
	Log     logr.Logger
	// Initial and Max bound the back-off (default RetryInitial, RetryMax).
	Initial, Max time.Duration

	mu      sync.Mutex
	report  *Report
	changed chan struct{}
}

// NewRetrier starts from the report of the installation on start (nil: it did
// not run, and nothing is retried).
func NewRetrier(c client.Client, version string, log logr.Logger, first *Report) *Retrier {
	return &Retrier{Client: c, Version: version, Log: log, report: first, changed: make(chan struct{}, 1)}
}

// Report is what the last installation did (nil: none ran).
func (r *Retrier) Report() *Report {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.report
}

// Changed signals a new report.
func (r *Retrier) Changed() <-chan struct{} { return r.changed }

// NeedLeaderElection: the leader installs (and writes the condition).
func (r *Retrier) NeedLeaderElection() bool { return true }

// Start retries while the last installation failed, until it succeeds or ctx ends.
func (r *Retrier) Start(ctx context.Context) error {
	wait, limit := r.Initial, r.Max
	if wait <= 0 {
		wait = RetryInitial
	}
	if limit <= 0 {
		limit = RetryMax
	}
	for {
		if rep := r.Report(); rep == nil || rep.Err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		rep, err := SelfInstall(ctx, r.Client, r.Version, r.Log)
		if err != nil {
			// One of the CRDs went missing since the start: said the same way.
			rep = &Report{Version: r.Version, Counts: map[Action]int{}, Err: err}
		}
		r.mu.Lock()
		r.report = rep
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
		if rep.Err == nil {
			r.Log.Info("CRDs installed on a retry after the installation on start failed")
			return nil
		}
		r.Log.Info("installing the CRDs failed again; retrying", "error", rep.Err.Error(), "in", min(wait*2, limit).String())
		wait = min(wait*2, limit)
	}
}
