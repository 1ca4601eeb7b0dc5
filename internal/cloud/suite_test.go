package cloud_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/helmchart"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	api *emulator.Server
	ctx = context.Background()
)

func TestCloud(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cloud controller: node initialization and load balancers (envtest + emulator + k8s.io/cloud-provider's controllers)")
}

// The cloud controller on, with load balancers in the default scope (all);
// health reports every 2 s. The operator runs as the chart's ServiceAccount with
// nothing but the RBAC the chart grants with cloudController.enabled: a verb the
// cloud controller needs and the chart lacks fails these specs.
var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{
	Configure: func(oc *v1.OperatorConfig) {
		oc.Spec.APISync.HealthReportIntervalSeconds = 2
		oc.Spec.CloudController.Enabled = true
	},
	BeforeStart: applyChartRBAC,
	As:          operatorSA,
	// Secrets granted by namespaced Roles only (rbac.secretNamespaces; secretns_test.go).
	SecretNamespaces: secretNamespaces,
}, func(e *testutil.OperatorEnv) {
	oe, k8s, api = e, e.K8s, e.API
})

// operatorSA is the chart's ServiceAccount the operator runs as.
var operatorSA = helmchart.OperatorSA

// secretNamespaces are the only namespaces the chart grants the operator Secrets in.
var secretNamespaces = []string{helmchart.Namespace, "team-secrets"}

// applyChartRBAC creates the roles and bindings the chart renders with the cloud
// controller enabled.
func applyChartRBAC(e *testutil.OperatorEnv) error {
	ch, err := helmchart.Load()
	if err != nil {
		return err
	}
	objs, err := helmchart.Objects(ch, map[string]any{"cloudController": map[string]any{"enabled": true},
		"rbac": map[string]any{"secretNamespaces": []any{secretNamespaces[0], secretNamespaces[1]}}})
	if err != nil {
		return err
	}
	for _, ns := range secretNamespaces {
		if ns != helmchart.Namespace {
			if err := e.K8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
		}
	}
	n, err := helmchart.ApplyRBAC(context.Background(), e.K8s, objs)
	if err != nil {
		return err
	}
	if n < 6 {
		return fmt.Errorf("the chart rendered only %d RBAC objects", n)
	}
	return nil
}
