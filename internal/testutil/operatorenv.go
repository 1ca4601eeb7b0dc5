package testutil

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/kubeproxy"
)

// OperatorNamespace is where OperatorEnv runs the operator.
const OperatorNamespace = "polycrate"

// OperatorEnv is a whole operator for integration tests: envtest, the API emulator
// (default seed), the token Secret, an OperatorConfig with a local cluster, and a
// running manager with every controller.
type OperatorEnv struct {
	Env    *envtest.Environment
	Config *rest.Config
	K8s    client.Client
	API    *emulator.Server
	APIURL string
	Op     *operator.Operator

	log      logr.Logger
	s3Resync time.Duration
	as       rest.ImpersonationConfig
	// secretNamespaces is the operator's --secret-namespaces.
	secretNamespaces []string
	metricsAddr      string
	metricsSecure    bool
	stop             context.CancelFunc
	done             chan error
	ts               *httptest.Server
	// Proxy stands between the operator and the API server (KubeProxy).
	Proxy *kubeproxy.Proxy
}

// OperatorEnvOptions tune StartOperatorEnv.
type OperatorEnvOptions struct {
	ThirdPartyCRDs bool
	Log            logr.Logger
	// Configure edits the OperatorConfig before it is created.
	Configure func(*v1.OperatorConfig)
	// S3Resync is how often a Ready S3Bucket re-reads its credentials (default: the operator's).
	S3Resync time.Duration
	// BeforeStart runs when envtest, the emulator, the token Secret and the
	// OperatorConfig exist, before the operator starts (e.g. to apply RBAC).
	BeforeStart func(*OperatorEnv) error
	// As runs the operator as this user (impersonation): what RBAC grants it is
	// then all it may do. Empty: as envtest's admin.
	As rest.ImpersonationConfig
	// SecretNamespaces runs the operator with --secret-namespaces.
	SecretNamespaces []string
	// MetricsAddr serves the operator's /metrics there (empty: not at all),
	// over HTTPS for RBAC-authorized readers with MetricsSecure.
	MetricsAddr   string
	MetricsSecure bool
	// KubeProxy puts a kubeproxy.Proxy between the operator and the API
	// server (OperatorEnv.Proxy), to play the API server's faults.
	KubeProxy bool
}

// StartOperatorEnv starts everything and waits until the local cluster is registered.
func StartOperatorEnv(o OperatorEnvOptions) (*OperatorEnv, error) {
	env, cfg, err := Start(Options{OwnCRDs: true, ThirdPartyCRDs: o.ThirdPartyCRDs})
	if err != nil {
		return nil, err
	}
	e := &OperatorEnv{Env: env, Config: cfg, log: o.Log, s3Resync: o.S3Resync, as: o.As, secretNamespaces: o.SecretNamespaces,
		metricsAddr: o.MetricsAddr, metricsSecure: o.MetricsSecure}
	if o.KubeProxy {
		if e.Proxy, err = kubeproxy.New(cfg); err != nil {
			return nil, err
		}
	}
	if e.K8s, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		return nil, err
	}
	if e.API, err = emulator.New(emulator.Config{}); err != nil {
		return nil, err
	}
	e.ts = httptest.NewServer(e.API.Handler())
	e.APIURL = e.ts.URL
	ctx := context.Background()
	if err := e.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}); err != nil {
		return nil, err
	}
	if err := e.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: "polycrate-api-creds"},
		StringData: map[string]string{"token": emulator.DevAgentToken}}); err != nil {
		return nil, err
	}
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: "default"}}
	oc.Spec.APISync.APIURL = e.APIURL
	oc.Spec.LocalCluster.ClusterName = "test-cluster"
	// The suites of other features sync endpoints of hosts that do not exist: the
	// monitoring agent stays off there (its checks, results and CR status writes
	// are not what those suites count); the monitoring suite turns it on.
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(false)
	// Test packages run in parallel: none binds the external-dns provider's fixed
	// port (internal/webhooks/externaldns tests it on free ports).
	oc.Spec.ExternalDNSWebhook.Enabled = ptr.To(false)
	if o.Configure != nil {
		o.Configure(oc)
	}
	if err := e.K8s.Create(ctx, oc); err != nil {
		return nil, err
	}
	if o.BeforeStart != nil {
		if err := o.BeforeStart(e); err != nil {
			return nil, err
		}
	}
	if err := e.StartOperator(); err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		id, _ := e.Op.Config.Get().LocalCluster()
		return id != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("the operator did not register its local cluster within a minute: %w", err)
	}
	return e, nil
}

// StartOperator runs a fresh manager (also to restart the operator).
func (e *OperatorEnv) StartOperator() error {
	cfg := e.Config
	if e.Proxy != nil {
		kc, err := e.Proxy.Kubeconfig()
		if err != nil {
			return err
		}
		if cfg, err = clientcmd.RESTConfigFromKubeConfig(kc); err != nil {
			return err
		}
	}
	if e.as.UserName != "" {
		cfg = rest.CopyConfig(cfg)
		cfg.Impersonate = e.as
	}
	metrics := "0"
	if e.metricsAddr != "" {
		metrics = e.metricsAddr
	}
	back := kube.NewRecovery()
	mgr, err := manager.New(cfg, manager.Options{MetricsBindAddress: metrics, MetricsSecure: e.metricsSecure, HealthProbeBindAddress: "0",
		OperatorNamespace: OperatorNamespace, Logger: e.log, SkipNameValidation: true, KubeRecovery: back,
		StockCache: StockCache()})
	if err != nil {
		return err
	}
	op, err := operator.Setup(mgr, operator.Options{Namespace: OperatorNamespace, Version: "0.0.1-test", RepairInterval: time.Hour,
		S3Resync: e.s3Resync, SecretNamespaces: e.secretNamespaces, KubeRecovery: back})
	if err != nil {
		return err
	}
	e.Op = op
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- mgr.Start(ctx) }()
	return nil
}

// StopOperator stops the manager and waits for it.
func (e *OperatorEnv) StopOperator() error {
	if e.stop == nil {
		return nil
	}
	e.stop()
	e.stop = nil
	return <-e.done
}

// Stop stops everything.
func (e *OperatorEnv) Stop() error {
	err := e.StopOperator()
	if e.ts != nil {
		e.ts.Close()
	}
	if e.Proxy != nil {
		e.Proxy.Close()
	}
	if e.Env != nil {
		if serr := e.Env.Stop(); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// Client is an API client with the operator's agent token.
func (e *OperatorEnv) Client() *polycrate.Client {
	c, _ := polycrate.New(polycrate.Options{BaseURL: e.APIURL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	return c
}
