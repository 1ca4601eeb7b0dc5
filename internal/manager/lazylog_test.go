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

	"github.com/polycrate/polycrate-operator/internal/controller"
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

// controller-runtime's "Reconciler error" for a failure the object already
// says (controller.Reported: an error line was logged when it turned to a
// failure) is an info line; any other error stays an error line.
func TestReportedReconcileErrorsLogAtInfo(t *testing.T) {
	var buf bytes.Buffer
	log := lazyValues(zapLogger(&buf)).WithValues("controller", "sync-endpoint")
	log.Error(controller.Reported(errors.New("503 Service Unavailable")), "Reconciler error", "reconcileID", "r-1")
	log.Error(errors.New("etcdserver: request timed out"), "Reconciler error", "reconcileID", "r-2")
	log.Error(controller.Reported(errors.New("other")), "some other message")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines:\n%s", buf.String())
	}
	if !strings.Contains(lines[0], `"level":"info"`) || !strings.Contains(lines[0], `"error":"503 Service Unavailable"`) ||
		!strings.Contains(lines[0], `"reconcileID":"r-1"`) || !strings.Contains(lines[0], `"controller":"sync-endpoint"`) {
		t.Fatalf("a reported failure's retry: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"level":"error"`) || !strings.Contains(lines[1], `"msg":"Reconciler error"`) {
		t.Fatalf("an unreported error: %s", lines[1])
	}
	if !strings.Contains(lines[2], `"level":"error"`) {
		t.Fatalf("another message: %s", lines[2])
	}
}
