package cli

import (
	"io"
	"testing"

	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// --zap-log-level=10 must not let client-go log request and answer bodies
// (V(8) and up: Secrets included).
func TestLogLevelIsCappedBelowClientGoBodies(t *testing.T) {
	level := uzap.NewAtomicLevelAt(zapcore.Level(-10))
	if !capLogLevel(level) {
		t.Fatal("level 10 was not capped")
	}
	logger := zap.New(zap.Level(level), zap.WriteTo(io.Discard))
	if logger.V(8).Enabled() || !logger.V(7).Enabled() {
		t.Fatalf("V(8) enabled %v, V(7) enabled %v: want false, true", logger.V(8).Enabled(), logger.V(7).Enabled())
	}
	info := uzap.NewAtomicLevelAt(zapcore.InfoLevel)
	if capLogLevel(info) || info.Level() != zapcore.InfoLevel {
		t.Fatal("an ordinary level was changed")
	}
}
