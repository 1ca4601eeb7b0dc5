package manager

import (
	"errors"

	"github.com/go-logr/logr"
)

// lazyValues returns log with a sink whose WithValues only notes the values:
// they reach the underlying sink when a line is logged. The output is the
// same, line for line.
//
// controller-runtime gives every reconcile a logger of its own: the builder's
// LogConstructor adds the object's kind, namespace and name, the controller
// the reconcile's id — three WithValues per reconcile, and zap encodes the
// fields of each at once, into a clone of its encoder. Almost no reconcile logs
// a line. On a restart at 20,000 Ingresses (60,000 reconciles that write
// nothing) those encodings were 5 % of the operator's CPU (docs/performance.md).
// Noting the values instead costs one small slice; a line logged pays for the
// encoding then, once.
func lazyValues(log logr.Logger) logr.Logger {
	sink := log.GetSink()
	if sink == nil {
		return log
	}
	// One frame more between the caller and the underlying sink: its caller
	// annotation must still name the caller.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return log.WithSink(&lazySink{base: sink})
}

// lazySink is a logr.LogSink that keeps the values of WithValues until a line
// is logged.
type lazySink struct {
	base logr.LogSink
	kv   []any
}

var _ logr.CallDepthLogSink = &lazySink{}

// Init is called by logr.New only, which lazyValues does not use.
func (s *lazySink) Init(info logr.RuntimeInfo) { s.base.Init(info) }

func (s *lazySink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *lazySink) Info(level int, msg string, kv ...any) { s.flush().Info(level, msg, kv...) }

// Error logs an error line, except controller-runtime's "Reconciler error"
// for an error whose failure the object already says (controller.Reported):
// that one was logged at error level when the object turned to a failure, and
// each retry of it is an info line.
func (s *lazySink) Error(err error, msg string, kv ...any) {
	var reported interface{ FailureReported() bool }
	if msg == reconcilerError && errors.As(err, &reported) && reported.FailureReported() {
		s.flush().Info(0, "retrying; the failure is on the object (condition and Warning event)", append(kv, "error", err.Error())...)
		return
	}
	s.flush().Error(err, msg, kv...)
}

// reconcilerError is controller-runtime's message for a reconcile that returned
// an error (pkg/internal/controller).
const reconcilerError = "Reconciler error"

// WithValues notes the values (in a slice of its own: loggers derived from one
// another never share one).
func (s *lazySink) WithValues(kv ...any) logr.LogSink {
	if len(kv) == 0 {
		return s
	}
	return &lazySink{base: s.base, kv: append(s.kv[:len(s.kv):len(s.kv)], kv...)}
}

// WithName names the underlying sink at once: a name is no field, and the
// order of names and values does not change a line.
func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{base: s.base.WithName(name), kv: s.kv}
}

func (s *lazySink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.base.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &lazySink{base: cd.WithCallDepth(depth), kv: s.kv}
}

// flush is the underlying sink with the noted values.
func (s *lazySink) flush() logr.LogSink {
	if len(s.kv) == 0 {
		return s.base
	}
	return s.base.WithValues(s.kv...)
}
