// Package operator assembles the operator's parts into the manager: the live
// configuration, the API connection, the health reporter and the controllers.
package operator

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/agent"
	"github.com/polycrate/polycrate-operator/internal/checks/monitoring"
	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/cloud"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
	"github.com/polycrate/polycrate-operator/internal/controller/crdgate"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/endpoints"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/inventory"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/k8sapps"
	"github.com/polycrate/polycrate-operator/internal/controller/k8scluster"
	"github.com/polycrate/polycrate-operator/internal/controller/operatorconfig"
	"github.com/polycrate/polycrate-operator/internal/controller/s3bucket"
	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/metasecret"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/preflight"
	"github.com/polycrate/polycrate-operator/internal/slimcache"
	"github.com/polycrate/polycrate-operator/internal/webhooks/dns01"
	"github.com/polycrate/polycrate-operator/internal/webhooks/externaldns"
)

// Options configure the operator's parts.
type Options struct {
	Namespace               string
	Version                 string
	UserAgent               string
	MaxConcurrentReconciles int
	// ErrorReportInterval is the minimum time between two error reports (default 5 minutes).
	ErrorReportInterval time.Duration
	// SetLogLevel applies the API cluster record's operator_loglevel (see operatorconfig).
	SetLogLevel func(level int)
	// RepairInterval is how often synced kinds list their API objects to find deleted ones (default 5 minutes).
	RepairInterval time.Duration
	// S3Resync is how often a Ready S3Bucket compares its Secret with the API's credentials (default 5 minutes).
	S3Resync time.Duration
	// Kubeconfig is the file the DNS01 webhook delegates authentication and
	// authorization through ("": in-cluster).
	Kubeconfig string
	// DNS01CertDir holds the DNS01 webhook's serving certificate (tls.crt, tls.key;
	// default /tls, where the chart mounts it).
	DNS01CertDir string
	// CRDs is what the CRD installation on start did (nil: it did not run); the
	// OperatorConfig's CRDsInstalled condition says it.
	CRDs *crds.Report
	// PreflightInterval is how often the provided-cluster checklist runs again
	// (default daily); PreflightDelay the wait before its first run after start
	// (default 2 minutes; negative: at once).
	PreflightInterval, PreflightDelay time.Duration
	// SecretNamespaces limits everything the operator does with Secrets (the
	// metadata store of meta-Secrets and credentials Secrets, meta-Secret reads,
	// S3Bucket credentials) to these namespaces, for clusters that grant it
	// Secrets by namespaced Roles (run --secret-namespaces); nil: cluster-wide.
	SecretNamespaces []string
	// Fence refuses the leader's API requests while its leadership is not
	// confirmed (internal/manager's Fence.Check; nil: never).
	Fence func() error
	// CheckDNSServer resolves the host names of endpoint checks through this DNS
	// server (host:port) instead of the host's resolver (run --check-dns-server).
	CheckDNSServer string
	// KubeRecovery tells of each return of the Kubernetes API server (the one
	// given to the manager): the controllers retry then what failed for want
	// of its answer, not after their back-off (nil: they back off).
	KubeRecovery *kube.Recovery
}

var klogOnce sync.Once

// crdRetrier retries a CRD installation on start that failed (nil: none ran).
func crdRetrier(mgr manager.Manager, o Options) *crds.Retrier {
	if o.CRDs == nil {
		return nil
	}
	return crds.NewRetrier(mgr.GetClient(), o.Version, mgr.GetLogger().WithName("crds"), o.CRDs)
}

// Operator is what Setup built; tests and later controllers use its parts.
type Operator struct {
	Config   *liveconfig.Store
	Conn     *polycrate.Connection
	Health   *agent.State
	Reporter *agent.Reporter
	Errors   *agent.ErrorReporter
	// Syncs are the API syncs of the registered kinds (apisync.Kinds), by CR kind.
	Syncs map[string]apisync.Syncer
	// Sweep deletes discovered Endpoints whose source is gone.
	Sweep *endpoints.Sweep
	// HTTPRoutes starts HTTPRoute discovery when the Gateway API appears.
	HTTPRoutes *endpoints.HTTPRouteStarter
	// S3Buckets provisions S3Bucket CRs.
	S3Buckets *s3bucket.Reconciler
	// Gate starts the controllers of third-party kinds while their CRDs are served.
	Gate *crdgate.Gate
	// Inventory are the inventory mirrors' reconcilers, by name (tests run their passes).
	Inventory map[string]inventory.Runner
	// Apps discovers K8sApps.
	Apps *k8sapps.Discovery
	// Pods and Secrets are the compact cluster-wide stores (internal/slimcache).
	Pods    *k8sapps.PodStore
	Secrets *slimcache.Store[slimcache.Meta]
	// Monitor is the monitoring agent: it checks the endpoints the API assigns.
	Monitor *monitoring.Agent
	// DNS01 serves the cert-manager DNS01 webhook while dns01_webhook.enabled.
	DNS01 *dns01.Server
	// ExternalDNS serves the external-dns webhook provider while external_dns_webhook.enabled.
	ExternalDNS *externaldns.Server
	// Servers is this replica's own configuration and API connection for the
	// servers every replica runs (the DNS webhooks).
	Servers *operatorconfig.Replica
	// Cloud is the cloud provider (CCM-lite); CloudControllers run the upstream
	// cloud-node and service controllers with it while cloud_controller is enabled.
	Cloud            *cloud.Provider
	CloudControllers *cloud.Controllers
	// Preflight runs seed 004's checklist at start and daily.
	Preflight *preflight.Runner
}

// Setup adds everything to the manager: the steps below in order, each a
// part of the operator with what it needs from the parts before it (builder).
func Setup(mgr ctrl.Manager, o Options) (*Operator, error) {
	b := &builder{mgr: mgr, o: o, op: &Operator{
		Config: &liveconfig.Store{},
		Health: agent.NewState(),
		Errors: &agent.ErrorReporter{Interval: o.ErrorReportInterval},
	}}
	for _, step := range []struct {
		name string
		run  func() error
	}{
		{"the API connection and the health report", b.connection},
		{"each replica's own configuration for the webhooks", b.replica},
		{"the compact Pod and Secret stores", b.stores},
		{"the components", b.components},
		{"the controllers", b.controllers},
		{"the synced kinds", b.syncs},
		{"the start-up check for an OperatorConfig", b.startNotice},
	} {
		if err := step.run(); err != nil {
			return nil, fmt.Errorf("setting up %s: %w", step.name, err)
		}
	}
	return b.op, nil
}

// builder carries what one step of Setup makes for the later ones.
type builder struct {
	mgr ctrl.Manager
	o   Options
	op  *Operator

	apiMetrics *polycrate.Metrics
	breaker    *polycrate.Breaker
	// secrets caches the Secrets of the operator's own namespace only (the token
	// Secret lives there), never cluster-wide.
	secrets cache.Cache
	d       controller.Deps
	apps    *k8sapps.Reconciler
}

// add adds runnables to the manager.
func (b *builder) add(rs ...manager.Runnable) error {
	for _, r := range rs {
		if err := b.mgr.Add(r); err != nil {
			return err
		}
	}
	return nil
}

// connection: the API connection with its one circuit breaker, the health
// reporter, and the memory releaser.
func (b *builder) connection() error {
	mgr, o, op := b.mgr, b.o, b.op
	var err error
	if b.apiMetrics, err = polycrate.NewMetrics(ctrlmetrics.Registry); err != nil {
		return err
	}
	healthMetrics, err := agent.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	// One circuit breaker for every request to the API, of this replica's
	// controllers, health report, monitoring and webhooks alike; the client does
	// not retry on its own (MaxRetries -1): each caller's loop does — the work
	// queue's backoff, the report's interval — so retries never stack
	// (docs/reliability.md). Any answer of the API while the health report is
	// failing asks for an early report: APIConnected follows a recovery within
	// seconds, not after the report's backoff.
	b.breaker = polycrate.NewBreaker(polycrate.BreakerOptions{Metrics: b.apiMetrics, Log: mgr.GetLogger().WithName("api-circuit")})
	op.Conn = polycrate.NewConnection(polycrate.Options{UserAgent: o.UserAgent, Metrics: b.apiMetrics, Breaker: b.breaker, MaxRetries: -1, Fence: o.Fence,
		OnAnswer: func(resource string, serving bool) {
			if serving && resource != polycrate.ResourceHealth && op.Reporter != nil {
				op.Reporter.ReportSoon()
			}
		}})
	op.Reporter = &agent.Reporter{Conn: op.Conn, Config: op.Config, State: op.Health, Metrics: healthMetrics,
		Identity: agent.ClusterIdentity(mgr.GetAPIReader(), o.Namespace), Version: o.Version,
		Log: mgr.GetLogger().WithName("agent"), Errors: op.Errors}
	// At rest, the heap the collector freed goes back to the OS (kube.MemoryReleaser).
	return b.add(op.Reporter, &kube.MemoryReleaser{Log: mgr.GetLogger().WithName("memory")})
}

// replica: the operator namespace's Secret cache and, for the DNS webhooks that
// run on every replica behind their Services, each replica's own configuration
// and API connection; the breaker's probe and the early report on its closing.
func (b *builder) replica() error {
	mgr, o, op := b.mgr, b.o, b.op
	var err error
	b.secrets, err = cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	op.Servers = &operatorconfig.Replica{Reader: mgr.GetCache(), Secrets: b.secrets, Config: &liveconfig.Store{},
		Conn: polycrate.NewConnection(polycrate.Options{UserAgent: o.UserAgent, Metrics: b.apiMetrics, Breaker: b.breaker, MaxRetries: -1}), Namespace: o.Namespace,
		Log: mgr.GetLogger().WithName("operatorconfig")}
	// Every replica starts the Secret cache: followers read the token from it
	// too (operatorconfig.Follower). While the breaker is open and every caller
	// is parked, a probe of its own notices the recovery (every replica: the
	// webhooks use the breaker too); its closing asks the leader for a health
	// report at once, so APIConnected follows within seconds.
	if err := b.add(everyReplica{b.secrets}, op.Servers, prober{breaker: b.breaker, conns: []*polycrate.Connection{op.Servers.Conn, op.Conn}}); err != nil {
		return err
	}
	return controller.OnSignal(mgr, b.breaker.Subscribe(), func(context.Context) {
		if !b.breaker.State().Open {
			op.Reporter.ReportNow()
		}
	})
}

// stores: Pods and Secrets are watched cluster-wide into compact stores of
// their own, never into the manager's cache: counted Pods as what K8sApp
// status needs, meta-Secrets and S3Bucket credentials Secrets by metadata, and
// nothing at all of every other Pod and Secret (docs/performance.md).
func (b *builder) stores() error {
	mgr, o, op := b.mgr, b.o, b.op
	var err error
	if op.Pods, err = k8sapps.NewPodStore(mgr.GetConfig()); err != nil {
		return err
	}
	op.Secrets, err = slimcache.NewMetadataStore(mgr.GetConfig(), corev1.SchemeGroupVersion.WithResource("secrets"), "secrets",
		func(m *metav1.PartialObjectMetadata) bool {
			return metasecret.IsMetaSecret(m.Name) || s3bucket.OwnsSecret(m)
		}, o.SecretNamespaces...)
	if err != nil {
		return err
	}
	for name, s := range map[string]interface {
		manager.Runnable
		WaitForSync(context.Context) error
	}{"pods": op.Pods, "secrets": op.Secrets} {
		if err := mgr.Add(s); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck(name+"-synced", storeSynced(s.WaitForSync)); err != nil {
			return err
		}
	}
	return nil
}

// components: the parts that are not controllers of one kind — the CRD gate,
// the monitoring agent, the DNS webhooks, the preflight runner, the cloud
// controller — and the discovery parts the controllers share.
func (b *builder) components() error {
	mgr, o, op := b.mgr, b.o, b.op
	b.d = controller.NewDeps(mgr, op.Config, op.Conn, o.MaxConcurrentReconciles)
	b.d.KubeBack = o.KubeRecovery
	d := b.d
	op.Gate = &crdgate.Gate{Mgr: mgr, Log: d.Log.WithName("crd-gate")}
	op.HTTPRoutes = &endpoints.HTTPRouteStarter{Gate: op.Gate,
		Reconciler: &endpoints.SourceReconciler{Deps: d.Named("discovery"), Inspector: endpoints.HTTPRoutes, Others: []*endpoints.Inspector{endpoints.Ingresses}, Reader: mgr.GetAPIReader()}}
	b.apps = &k8sapps.Reconciler{Deps: d.Named("discovery-k8sapp"), Reader: mgr.GetAPIReader(), HTTPRoutes: op.HTTPRoutes.Started,
		Pods: op.Pods, Secrets: op.Secrets}
	op.Apps = &k8sapps.Discovery{R: b.apps}
	op.HTTPRoutes.Also = append(op.HTTPRoutes.Also, op.Apps.WatchHTTPRoutes)
	op.S3Buckets = &s3bucket.Reconciler{Deps: d.Named("s3bucket"), Reader: mgr.GetAPIReader(), Secrets: op.Secrets, Resync: o.S3Resync,
		SecretNamespaces: o.SecretNamespaces}
	op.Sweep = &endpoints.Sweep{Deps: d.Named("sweep"), Reader: mgr.GetAPIReader()}
	op.Inventory = inventory.Reconcilers(d.Named("inventory"), op.Gate)
	op.Monitor = monitoring.New(d.Named("monitoring"), o.Namespace, op.Health)
	if o.CheckDNSServer != "" {
		op.Monitor.Prober.Resolver = probe.ResolverVia(o.CheckDNSServer)
	}
	op.Reporter.Checks = op.Monitor
	certDir := o.DNS01CertDir
	if certDir == "" {
		certDir = "/tls"
	}
	op.DNS01 = dns01.NewServer(&dns01.Server{Config: op.Servers.Config, Conn: op.Servers.Conn, Log: d.Log.WithName("dns01"), Kubeconfig: o.Kubeconfig, CertDir: certDir})
	op.ExternalDNS = externaldns.NewServer(&externaldns.Server{Config: op.Servers.Config, Conn: op.Servers.Conn, Log: d.Log.WithName("external-dns")})
	op.Preflight = &preflight.Runner{Config: mgr.GetConfig(), Scheme: mgr.GetScheme(), Namespace: o.Namespace, SecretNamespaces: o.SecretNamespaces,
		Live: op.Config, Interval: o.PreflightInterval, Delay: o.PreflightDelay, Log: d.Log.WithName("preflight")}
	// The cloud controller: k8s.io/cloud-provider's own controllers with the
	// operator's Provider (internal/cloud); they log through klog, which logs
	// through the manager's logger. klog's logger is the process's: set once
	// (an operator started again in one process, as the suites restart it, would
	// race the running event broadcasters that read it).
	klogOnce.Do(func() { klog.SetLogger(mgr.GetLogger().WithName("cloud-provider")) })
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	op.Cloud = &cloud.Provider{Reader: mgr.GetClient(), Writer: mgr.GetClient(), Kube: kube, Config: op.Config, Conn: op.Conn,
		Namespace: o.Namespace, Recorder: d.Recorder, Log: d.Log.WithName("cloud")}
	op.CloudControllers = &cloud.Controllers{Provider: op.Cloud, Kube: kube, Cache: mgr.GetCache(), Config: op.Config, Log: d.Log.WithName("cloud")}
	return b.add(op.DNS01, op.ExternalDNS, op.Preflight, op.CloudControllers)
}

// controllers: every controller of one kind, as one list.
func (b *builder) controllers() error {
	mgr, o, op, d := b.mgr, b.o, b.op, b.d
	singleton := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: v1.DefaultOperatorConfigName}}
	tokenSecret := predicate.NewTypedPredicateFuncs(func(s *corev1.Secret) bool {
		name := "polycrate-api-creds"
		if snap := op.Config.Get(); snap != nil {
			name = snap.Spec.APISync.CredentialsRef.SecretName
		}
		return s.Name == name
	})
	secretSource := source.Kind(b.secrets, &corev1.Secret{},
		handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *corev1.Secret) []reconcile.Request { return []reconcile.Request{singleton} }),
		tokenSecret)
	type setup = interface{ SetupWithManager(manager.Manager) error }
	controllers := []struct {
		name string
		c    setup
	}{
		{"the OperatorConfig controller", &operatorconfig.Reconciler{Deps: d, Secrets: b.secrets, SecretSource: secretSource,
			Namespace: o.Namespace, Health: op.Health, Reporter: op.Reporter, Version: o.Version, KubernetesVersion: kubeVersion(mgr),
			Errors: op.Errors, SetLogLevel: o.SetLogLevel, CRDs: crdRetrier(mgr, o), Preflight: op.Preflight}},
		{"the K8sCluster controller", &k8scluster.Reconciler{Deps: d, Secrets: b.secrets, Namespace: o.Namespace,
			SecretSource: source.Kind(b.secrets, &corev1.Secret{}, k8scluster.SecretHandler(mgr.GetClient()))}},
		// Ingresses and (once the Gateway API exists) HTTPRoutes → Endpoint CRs, and the stale sweep.
		{"Ingress discovery", endpoints.IngressDiscovery{SourceReconciler: &endpoints.SourceReconciler{Deps: d.Named("discovery"),
			Inspector: endpoints.Ingresses, Others: []*endpoints.Inspector{endpoints.HTTPRoutes}, Reader: mgr.GetAPIReader()}}},
		{"HTTPRoute discovery", op.HTTPRoutes},
		{"the stale sweep", op.Sweep},
		// Meta-Secrets, annotated Pods and Ingress/HTTPRoute claims → K8sApp CRs.
		{"K8sApp discovery", op.Apps},
		// S3Bucket CRs → API buckets → credentials Secrets.
		{"S3Bucket provisioning", op.S3Buckets},
		// The endpoints the API assigns → checks → health report, metrics, CR status.
		{"endpoint monitoring", op.Monitor},
	}
	// Nodes, PVs, Velero/CNPG backups and schedules, cert-manager Certificates → their CRs.
	for _, name := range slices.Sorted(maps.Keys(op.Inventory)) {
		controllers = append(controllers, struct {
			name string
			c    setup
		}{name + " discovery", op.Inventory[name]})
	}
	for _, c := range controllers {
		if err := c.c.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// kubeVersion is the cluster's version for the local cluster record ("" when
// it cannot be read).
func kubeVersion(mgr ctrl.Manager) string {
	dc, err := k8sdiscovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return ""
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}

// syncs: every registered kind's CRs → the API; then the CRD gate starts.
func (b *builder) syncs() error {
	mgr, op := b.mgr, b.op
	op.Syncs = map[string]apisync.Syncer{}
	syncOpts := apisync.Options{Deps: b.d.Named("sync"), Verify: b.o.RepairInterval}
	kinds := apisync.Kinds(apisync.Deps{Reader: mgr.GetClient(), PodDetails: b.apps.PodDetails})
	for _, k := range kinds {
		var err error
		if op.Syncs[k.CRKind()], err = k.Setup(mgr, syncOpts); err != nil {
			return err
		}
	}
	apisync.CountPhases(mgr.GetCache(), kinds)
	op.Reporter.Problems = apisync.Failing
	if err := op.Gate.Setup(); err != nil {
		return fmt.Errorf("the CRD gate: %w", err)
	}
	return nil
}

// startNotice says once at start when there is no OperatorConfig: the operator
// then discovers nothing.
func (b *builder) startNotice() error {
	o, op := b.o, b.op
	apiReader := b.mgr.GetAPIReader()
	log := b.mgr.GetLogger().WithName("operatorconfig")
	key := types.NamespacedName{Namespace: o.Namespace, Name: v1.DefaultOperatorConfigName}
	return b.add(manager.RunnableFunc(func(ctx context.Context) error {
		oc := &v1.OperatorConfig{}
		err := apiReader.Get(ctx, key, oc)
		switch {
		case apierrors.IsNotFound(err):
			log.Info("no OperatorConfig: the operator discovers nothing until one exists", "namespace", o.Namespace, "name", v1.DefaultOperatorConfigName)
			op.Config.MarkLoaded()
		case err != nil:
			log.Error(err, "cannot read the OperatorConfig", "namespace", o.Namespace)
		}
		return nil
	}))
}

// prober runs the breaker's probe with whichever connection has a client.
type prober struct {
	breaker *polycrate.Breaker
	conns   []*polycrate.Connection
}

func (p prober) Start(ctx context.Context) error {
	p.breaker.Probe(ctx, func(ctx context.Context) {
		for _, c := range p.conns {
			if cl := c.Client(); cl != nil {
				_ = cl.Ping(ctx)
				return
			}
		}
	})
	return nil
}

func (prober) NeedLeaderElection() bool { return false }

// everyReplica runs a cache on every replica, not only on the leader (a cache
// added to the manager is a leader-election runnable by default).
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

// storeSynced reports ready once a compact store has its first list.
func storeSynced(wait func(context.Context) error) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 200*time.Millisecond)
		defer cancel()
		return wait(ctx)
	}
}
