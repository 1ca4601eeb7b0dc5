package controller

import (
	"crypto/x509"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// The requeue intervals, named once. A wait is a fixed recheck, never a retry
// storm; failures that may pass on their own back off exponentially instead
// (BaseDelay … MaxDelay).
const (
	// RequeueNotConnected: an object waiting for the API connection looks again
	// (the connection's arrival also wakes it at once).
	RequeueNotConnected = 30 * time.Second
	// RequeueLocalCluster: an object waiting for the local cluster (a safety net:
	// the registration wakes it).
	RequeueLocalCluster = 2 * time.Minute
	// RequeueFailedStep: a deletion step the API refused, an unreachable cluster.
	RequeueFailedStep = time.Minute
	// RequeueResync: the steady state's re-read (a ready bucket's credentials, the
	// cluster record, a reachable cluster), and a token the API refused.
	RequeueResync = 5 * time.Minute
	// RequeueShortly: something is mid-change (an object being retired, a CRD
	// being installed, an API object found deleted).
	RequeueShortly = time.Second
	// RequeueIssuing: the API has not issued something yet (bucket credentials).
	RequeueIssuing = 10 * time.Second
	// RequeueCircuitOpen: an object parked while the API connection's circuit
	// breaker is open looks again (a safety net: the breaker's closing wakes it,
	// and a look while it is open sends nothing).
	RequeueCircuitOpen = time.Minute
	// DefaultSweepInterval: stale sweeps whose interval is not configured.
	DefaultSweepInterval = 10 * time.Minute
)

// MinutesOr is a configured interval in minutes, or def when it is not set.
func MinutesOr(minutes int32, def time.Duration) time.Duration {
	if minutes > 0 {
		return time.Duration(minutes) * time.Minute
	}
	return def
}

// PermanentError is bad input: retrying unchanged fails again. The object gets
// a condition and a Warning event, and waits for a change.
type PermanentError struct{ Reason, Message string }

func (e *PermanentError) Error() string { return e.Message }

// Permanent returns a PermanentError.
func Permanent(reason, msg string) error { return &PermanentError{Reason: reason, Message: msg} }

// WaitingError is no failure: something the object needs is not there yet. The
// object gets a condition (no event) and looks again after the interval (0:
// only when woken).
type WaitingError struct {
	Reason, Message string
	After           time.Duration
}

func (e *WaitingError) Error() string { return e.Message }

// Waiting returns a WaitingError.
func Waiting(reason, msg string, after time.Duration) error {
	return &WaitingError{Reason: reason, Message: msg, After: after}
}

// Outcome is what an error means for the object: the condition's reason and
// message, whether it is a failure (Warning event, error phase) or a wait, and
// what the reconcile returns.
type Outcome struct {
	Reason, Message string
	Failed          bool
	Result          reconcile.Result
	// Err is returned to controller-runtime: exponential backoff.
	Err error
}

// Classify maps an error to its outcome, the one mapping of the operator:
//   - WaitingError → wait; PermanentError → failure, no retry;
//   - refused by the leader fence (not sent) → nothing said, look again shortly;
//   - held back by the open circuit breaker → wait (parked: the breaker's
//     closing wakes the object; no backoff stacked on the breaker's probes);
//   - API transient (5xx, 429, no answer) → failure, backoff (or the Retry-After);
//   - API 401/403 → failure, look again after RequeueResync (a token fix also
//     reconfigures the connection, which wakes every object);
//   - API redirect → failure, no retry (the URL's fix is a configuration change);
//   - any other API error (4xx, undecodable answer) → failure, no retry;
//   - anything else (a Kubernetes read, a lost answer) → failure, backoff.
func Classify(err error) Outcome {
	var w *WaitingError
	var p *PermanentError
	var apiErr *polycrate.APIError
	var decode *polycrate.DecodeError
	msg := err.Error()
	switch {
	case errors.As(err, &w):
		return Outcome{Reason: w.Reason, Message: w.Message, Result: reconcile.Result{RequeueAfter: w.After}}
	case errors.As(err, &p):
		return Outcome{Reason: p.Reason, Message: p.Message, Failed: true}
	case errors.Is(err, polycrate.ErrFenced):
		// This replica's leadership is not confirmed: nothing was sent, and nothing
		// is said on the object (another replica may be leading it now); look again
		// shortly — by then it leads again, or it has stopped.
		return Outcome{Message: msg, Result: reconcile.Result{RequeueAfter: RequeueShortly}}
	case polycrate.IsCircuitOpen(err):
		return Outcome{Reason: v1.ReasonCircuitOpen, Message: msg, Result: reconcile.Result{RequeueAfter: RequeueCircuitOpen}}
	case polycrate.IsTransient(err):
		o := Outcome{Reason: v1.ReasonAPIUnavailable, Message: msg, Failed: true, Err: Reported(err)}
		if wait := polycrate.RetryAfter(err); wait > 0 {
			o.Result, o.Err = reconcile.Result{RequeueAfter: wait}, nil
		}
		return o
	case polycrate.IsUnauthorized(err), polycrate.IsForbidden(err):
		return Outcome{Reason: v1.ReasonUnauthorized, Message: msg, Failed: true, Result: reconcile.Result{RequeueAfter: RequeueResync}}
	case polycrate.IsRedirect(err):
		return Outcome{Reason: v1.ReasonAPIRedirect, Message: msg, Failed: true}
	case errors.As(err, &apiErr), errors.As(err, &decode):
		return Outcome{Reason: v1.ReasonAPIError, Message: msg, Failed: true}
	default:
		return Outcome{Reason: v1.ReasonAPIError, Message: msg, Failed: true, Err: Reported(err)}
	}
}

// Reported marks an error whose failure the object already says (a condition,
// a Warning event, and one error-level line when it turned to a failure):
// controller-runtime's "Reconciler error" line for each of its retries is
// logged at info level then (internal/manager's log sink), not at error level
// once per retry.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return reportedError{err}
}

type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// FailureReported says that the failure is on the object already.
func (reportedError) FailureReported() bool { return true }

// UntrustedCertificate: the peer's TLS certificate failed verification (unknown
// authority, wrong host name, invalid): a CA to configure, not an outage.
func UntrustedCertificate(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid)
}
