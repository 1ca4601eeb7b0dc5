package manager

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// zapLogger is a zap logger as the operator builds it (controller-runtime's
// zap), with the caller annotated and no time, into buf.
func zapLogger(buf *bytes.Buffer) logr.Logger {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", NameKey: "logger", CallerKey: "caller",
		EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeCaller: zapcore.ShortCallerEncoder})
	return zap.New(zap.WriteTo(buf), zap.Encoder(enc), zap.Level(zapcore.Level(-2)), zap.RawZapOpts(uzap.AddCaller()))
}

// emit logs through loggers derived from log in every way controller-runtime
// and the operator derive them; both loggers of a comparison log from these
// same lines, so their caller annotations must be equal.
func emit(log logr.Logger) {
	ctrl := log.WithValues("controller", "sync-endpoint").WithName("kit")
	req := ctrl.WithValues("Endpoint", map[string]string{"name": "a"}, "namespace", "shop", "name", "api")
	req.WithValues("reconcileID", "r-1").Info("synced", "id", 7)
	other := req.WithValues("reconcileID", "r-2") // derived from the same logger: r-1 must not leak in
	other.V(1).Info("debug", "k", "v")
	other.V(3).Info("not shown")
	other.Error(errors.New("boom"), "failed", "attempt", 2)
	ctrl.WithName("sub").WithValues().Info("named")
	ctrl.WithCallDepth(0).Info("depth")
	log.Info("root")
}

func TestLazyValuesLogsAsZap(t *testing.T) {
	var eager, lazy bytes.Buffer
	emit(zapLogger(&eager))
	emit(lazyValues(zapLogger(&lazy)))
	if eager.String() != lazy.String() {
		t.Fatalf("lazy values log\n%s\nzap logs\n%s", lazy.String(), eager.String())
	}
	lines := strings.Split(strings.TrimSpace(eager.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[0], `"reconcileID":"r-1"`) || strings.Contains(lines[1], "r-1") ||
		!strings.Contains(lines[0], `"caller":"manager/lazylog_test.go:`) || !strings.Contains(lines[3], `"logger":"kit.sub"`) {
		t.Fatalf("the lines are not what emit logs:\n%s", eager.String())
	}
	if lazyValues(logr.Logger{}).GetSink() != nil {
		t.Fatal("a logger with no sink gained one")
	}
}

// BenchmarkReconcileLogger is the logging a reconcile that logs nothing costs:
// controller-runtime's three WithValues and its disabled V(5) lines.
func BenchmarkReconcileLogger(b *testing.B) {
	for _, c := range []struct {
		name string
		log  logr.Logger
	}{{"zap", zapLogger(&bytes.Buffer{})}, {"lazy", lazyValues(zapLogger(&bytes.Buffer{}))}} {
		base := c.log.WithValues("controller", "sync-endpoint", "controllerGroup", "polycrate.io", "controllerKind", "Endpoint")
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l := base.WithValues("Endpoint", "shop/api").WithValues("namespace", "shop", "name", "api")
				l = l.WithValues("reconcileID", "0d5e3a44-8c7e-11f0-9f4b-0242ac120002")
				l.V(5).Info("Reconciling")
				l.V(5).Info("Reconcile successful")
			}
		})
	}
}
