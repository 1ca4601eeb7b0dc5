package controller

import (
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// RemoteError is a failed call to a peer other than the Polycrate API (a
// K8sCluster's kube-apiserver): the shared mapping names that peer and where
// its CA is configured, and reads its Kubernetes and network errors.
type RemoteError struct {
	// Peer names it in a message ("the cluster"); CAField is where a private CA
	// for it goes ("spec.caCertificate").
	Peer, CAField string
	Err           error
}

func (e *RemoteError) Error() string { return e.Err.Error() }
func (e *RemoteError) Unwrap() error { return e.Err }

// Remote marks err as a failed call to peer (see RemoteError).
func Remote(peer, caField string, err error) error {
	return &RemoteError{Peer: peer, CAField: caField, Err: err}
}

// The Polycrate API as a peer of the shared mapping's messages.
const (
	apiPeer    = "the Polycrate API"
	apiCAField = "api_sync.ca_certificate"
)

// Classify maps an error to its outcome, the one mapping of the operator:
//   - WaitingError → wait; PermanentError → failure, no retry;
//   - refused by the leader fence (not sent) → nothing said, look again shortly;
//   - held back by the open circuit breaker → wait (parked: the breaker's
//     closing wakes the object; no backoff stacked on the breaker's probes);
//   - the peer's TLS certificate not trusted → InvalidCACertificate, failure,
//     no retry (the CA's fix is a configuration change, which wakes objects);
//   - no answer (DNS, connection refused or reset, proxy, timeout) →
//     Unreachable, failure, backoff;
//   - API transient (5xx, 429) → APIUnavailable, failure, backoff (or the
//     Retry-After);
//   - 401 → Unauthorized, 403 → Forbidden: failure, look again after
//     RequeueResync (a token fix also reconfigures the connection, which wakes
//     every object);
//   - API redirect → failure, no retry (the URL's fix is a configuration change);
//   - any other API error (4xx, undecodable answer) → failure, no retry;
//   - anything else (a Kubernetes read, a lost answer) → failure, backoff.
//
// The Polycrate API is the peer unless err is a RemoteError; for a remote its
// Kubernetes status errors (401, 403) and network errors count as well.
func Classify(err error) Outcome {
	var w *WaitingError
	var p *PermanentError
	var apiErr *polycrate.APIError
	var decode *polycrate.DecodeError
	var transport *polycrate.TransportError
	peer, caField := apiPeer, apiCAField
	var remote *RemoteError
	isRemote := errors.As(err, &remote)
	if isRemote {
		peer, caField = remote.Peer, remote.CAField
	}
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
	case UntrustedCertificate(err) || (isRemote && strings.Contains(msg, "x509:")):
		return Outcome{Reason: v1.ReasonInvalidCACertificate, Failed: true,
			Message: peer + "'s TLS certificate is not trusted (a private CA or a TLS-inspecting proxy's CA goes into " + caField + "): " + msg}
	case errors.As(err, &transport) || (isRemote && isNetworkError(err)):
		return Outcome{Reason: v1.ReasonUnreachable, Failed: true, Err: Reported(err),
			Message: peer + " cannot be reached (DNS, connection, proxy or timeout): " + msg}
	case polycrate.IsTransient(err):
		o := Outcome{Reason: v1.ReasonAPIUnavailable, Message: peer + " is unavailable: " + msg, Failed: true, Err: Reported(err)}
		if wait := polycrate.RetryAfter(err); wait > 0 {
			o.Result, o.Err = reconcile.Result{RequeueAfter: wait}, nil
		}
		return o
	case polycrate.IsUnauthorized(err) || (isRemote && apierrors.IsUnauthorized(err)):
		return Outcome{Reason: v1.ReasonUnauthorized, Message: peer + " rejected the credentials (401): " + msg, Failed: true,
			Result: reconcile.Result{RequeueAfter: RequeueResync}}
	case polycrate.IsForbidden(err) || (isRemote && apierrors.IsForbidden(err)):
		return Outcome{Reason: v1.ReasonForbidden, Message: peer + " refused the credentials (403): " + msg, Failed: true,
			Result: reconcile.Result{RequeueAfter: RequeueResync}}
	case polycrate.IsRedirect(err):
		return Outcome{Reason: v1.ReasonAPIRedirect, Message: msg, Failed: true}
	case errors.As(err, &apiErr), errors.As(err, &decode):
		return Outcome{Reason: v1.ReasonAPIError, Message: msg, Failed: true}
	default:
		return Outcome{Reason: v1.ReasonAPIError, Message: msg, Failed: true, Err: Reported(err)}
	}
}

// isNetworkError: no answer from a remote (a dial, a reset, a timeout, a URL
// that does not resolve).
func isNetworkError(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr)
}

// WaitsOnOutage: reason says the API (or the way to it) failed for a while —
// the circuit open, no answer, 5xx/429 — not that the object or its
// credentials are wrong; such an object keeps its phase and is woken when the
// API answers again.
func WaitsOnOutage(reason string) bool {
	return reason == v1.ReasonCircuitOpen || reason == v1.ReasonAPIUnavailable || reason == v1.ReasonUnreachable
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
