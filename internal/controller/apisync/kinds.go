package apisync

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/prometheus/client_golang/prometheus"
)

// Kinds is the registry of synced kinds: the manager's wiring and the cleanup
// command both read it, so a new kind is one adapter and one line here, and
// cleanup cannot drift from what the finalizers do.
func Kinds(d Deps) []Registered {
	return []Registered{
		Kind[*v1.Endpoint, polycrate.EndpointRequest]{Kind: "Endpoint", Finalizer: v1.FinalizerEndpointCleanup,
			New: func() *v1.Endpoint { return &v1.Endpoint{} }, NewList: func() client.ObjectList { return &v1.EndpointList{} },
			Adapter: endpointAdapter(d.Reader), Related: []Related{endpointsClaiming},
			Mirror: func(ep *v1.Endpoint) bool { return ep.Labels[v1.LabelAPIDefined] == v1.LabelValueTrue }},
		Kind[*v1.K8sApp, polycrate.K8sAppRequest]{Kind: "K8sApp", Finalizer: v1.FinalizerK8sAppCleanup,
			New: func() *v1.K8sApp { return &v1.K8sApp{} }, NewList: func() client.ObjectList { return &v1.K8sAppList{} },
			Adapter: k8sAppAdapter(d.PodDetails)},
		Kind[*v1.Host, polycrate.HostRequest]{Kind: "Host", Finalizer: v1.FinalizerHostCleanup,
			New: func() *v1.Host { return &v1.Host{} }, NewList: func() client.ObjectList { return &v1.HostList{} },
			Adapter: hostAdapter()},
		Kind[*v1.K8sVolume, polycrate.K8sVolumeRequest]{Kind: "K8sVolume", Finalizer: v1.FinalizerK8sVolumeCleanup,
			New: func() *v1.K8sVolume { return &v1.K8sVolume{} }, NewList: func() client.ObjectList { return &v1.K8sVolumeList{} },
			Adapter: k8sVolumeAdapter()},
		Kind[*v1.Backup, polycrate.BackupRequest]{Kind: "Backup", Finalizer: v1.FinalizerBackupCleanup,
			New: func() *v1.Backup { return &v1.Backup{} }, NewList: func() client.ObjectList { return &v1.BackupList{} },
			Adapter: backupAdapter()},
		Kind[*v1.BackupSchedule, polycrate.BackupScheduleRequest]{Kind: "BackupSchedule", Finalizer: v1.FinalizerBackupScheduleCleanup,
			New: func() *v1.BackupSchedule { return &v1.BackupSchedule{} }, NewList: func() client.ObjectList { return &v1.BackupScheduleList{} },
			Adapter: backupScheduleAdapter()},
		Kind[*v1.Certificate, polycrate.CertificateRequest]{Kind: "Certificate", Finalizer: v1.FinalizerCertificateCleanup,
			New: func() *v1.Certificate { return &v1.Certificate{} }, NewList: func() client.ObjectList { return &v1.CertificateList{} },
			Adapter: certificateAdapter()},
	}
}

// Deps are what the adapters' Lookup steps read.
type Deps struct {
	// Reader reads the K8sApp an Endpoint claims (its API id becomes k8s_app).
	Reader client.Reader
	// PodDetails returns a K8sApp's pods_details (from the Pod store); nil sends none.
	PodDetails func(ctx context.Context, app *v1.K8sApp) any
}

// Registered is a synced kind as the wiring and cleanup see it.
type Registered interface {
	// CRKind is the CR's kind, e.g. "Endpoint".
	CRKind() string
	// Setup adds the kind's sync to the manager.
	Setup(mgr manager.Manager, o Options) (Syncer, error)
	phases(ctx context.Context, c cache.Informers) (map[string]int, error)
	// Retire deletes (K8sApp: retires) the API object of one CR as its finalizer
	// would: by the id in its status, else by its natural key (snap names the
	// local cluster; nil skips the lookup). 404 counts as done.
	Retire(ctx context.Context, c *polycrate.Client, snap *liveconfig.Snapshot, obj client.Object) error
}

// Syncer is a running sync.
type Syncer interface {
	// Repair runs one self-repair pass now.
	Repair(ctx context.Context)
}

// Options are what every sync is set up with.
type Options struct {
	controller.Deps
	// Verify is how often self-repair lists the API objects (default 5 minutes).
	Verify time.Duration
}

// Kind is one synced kind: its CR and its adapter.
type Kind[O Object, P any] struct {
	Kind      string // the CR's kind
	Finalizer string // the cleanup finalizer on its CRs
	New       func() O
	NewList   func() client.ObjectList
	Adapter   Adapter[O, P]
	// Related are other kinds whose changes wake objects of this kind (a K8sApp
	// getting its API id wakes the Endpoints that claim it).
	Related []Related
	// Mirror says a CR mirrors an API object someone else owns (an API-defined
	// Endpoint): the sync never writes it, nor its API object (nor cleanup).
	Mirror func(O) bool
}

// mirror applies Kind.Mirror.
func (k Kind[O, P]) mirror(o O) bool { return k.Mirror != nil && k.Mirror(o) }

// Related is a kind whose changes map to objects of the synced kind.
type Related struct {
	Object client.Object
	Map    func(c client.Client) handler.MapFunc
}

// CRKind is the CR's kind.
func (k Kind[O, P]) CRKind() string { return k.Kind }

func (k Kind[O, P]) name() string { return strings.ToLower(k.Kind) }

// Setup adds the kind's reconciler to the manager.
func (k Kind[O, P]) Setup(mgr manager.Manager, o Options) (Syncer, error) {
	r := &Reconciler[O, P]{Deps: o.Deps, Kind: k, Verify: o.Verify}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s sync: %w", k.Kind, err)
	}
	return r, nil
}

// list lists every CR of the kind, as the cache holds them (not copied: the
// wakers and the repair only read them; copying every Endpoint on a restart's
// configuration signals was 7 % of the restart's CPU at 5,000 Ingresses).
func (k Kind[O, P]) list(ctx context.Context, c client.Reader) ([]client.Object, error) {
	return controller.ListObjects(ctx, c, k.NewList(), client.UnsafeDisableDeepCopy)
}

// findOwn looks up by natural key what this CR's create would have made. The
// payload is built without its lookups (they fill links, never the natural key).
func (k Kind[O, P]) findOwn(ctx context.Context, c *polycrate.Client, obj O, snap *liveconfig.Snapshot) (string, error) {
	if snap == nil {
		return "", nil
	}
	var none P
	payload, err := k.Adapter.Payload(obj, snap, none)
	if err != nil {
		// No payload (no local cluster, invalid spec): no create could have been sent.
		return "", nil
	}
	if f, ok := k.Adapter.(DeleteFinder[O, P]); ok {
		return f.FindOwn(ctx, c, obj, payload)
	}
	return k.Adapter.Find(ctx, c, obj, payload)
}

// Retire deletes the API object of one CR (see Registered).
func (k Kind[O, P]) Retire(ctx context.Context, c *polycrate.Client, snap *liveconfig.Snapshot, obj client.Object) error {
	o, ok := obj.(O)
	if !ok {
		u, isU := obj.(*unstructured.Unstructured)
		if !isU {
			return fmt.Errorf("not a %s: %T", k.Kind, obj)
		}
		o = k.New()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
			return fmt.Errorf("reading %s %s: %w", k.Kind, u.GetName(), err)
		}
	}
	if k.mirror(o) {
		return nil // the API owns it
	}
	id := o.SyncState().APIID
	if id == "" {
		found, err := k.findOwn(ctx, c, o, snap)
		if err != nil || found == "" {
			return err
		}
		id = found
	}
	return polycrate.IgnoreNotFound(k.Adapter.Delete(ctx, c, id))
}

// objects is polycrate_operator_objects{kind,phase}: the synced objects by sync
// phase, counted from the informer cache at each scrape (read without copies),
// so a dashboard shows the fleet's state without kubectl.
//
// polycrate_operator_certificate_expiration_timestamp_seconds{certificate_namespace,certificate}
// is each mirrored certificate's not-after (the cert-manager Certificate's namespace
// and name), read from the Certificate CRs at the same scrape. Not "namespace": a
// scrape's own namespace label (the operator's) would rename it to exported_namespace.
var objects = &phaseCollector{
	desc: prometheus.NewDesc("polycrate_operator_objects",
		"The operator's synced objects by kind and sync phase (Pending, Synced, Error), counted at scrape time.",
		[]string{"kind", "phase"}, nil),
	expiry: prometheus.NewDesc("polycrate_operator_certificate_expiration_timestamp_seconds",
		"The not-after time of each certificate the operator mirrors (Certificate CRs), in Unix seconds.",
		[]string{"certificate_namespace", "certificate"}, nil),
}

func init() { ctrlmetrics.Registry.MustRegister(objects) }

// Failing names the synced kinds with objects in Error, as "<n> <Kind> object(s) in
// Error" (for the health report), from what CountPhases was given.
func Failing(ctx context.Context) []string {
	objects.mu.Lock()
	reader, kinds := objects.reader, objects.kinds
	objects.mu.Unlock()
	var out []string
	for _, k := range kinds {
		if counts, err := k.phases(ctx, reader); err == nil && counts[v1.PhaseError] > 0 {
			out = append(out, fmt.Sprintf("%d %s object(s) in Error (kubectl get %s -A)", counts[v1.PhaseError], k.CRKind(), strings.ToLower(k.CRKind())+"s.polycrate.io"))
		}
	}
	return out
}

// CountPhases makes polycrate_operator_objects count these kinds from the
// manager's cache. The last call wins: tests run several managers in one process.
func CountPhases(reader cache.Informers, kinds []Registered) {
	objects.mu.Lock()
	defer objects.mu.Unlock()
	objects.reader, objects.kinds = reader, kinds
}

type phaseCollector struct {
	desc   *prometheus.Desc
	expiry *prometheus.Desc
	mu     sync.Mutex
	reader cache.Informers
	kinds  []Registered
}

func (p *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc; ch <- p.expiry }

func (p *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	reader, kinds := p.reader, p.kinds
	p.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, k := range kinds {
		counts, err := k.phases(ctx, reader)
		if err != nil {
			continue // a kind whose CRD is gone: no figure rather than a wrong one
		}
		for _, phase := range []string{v1.PhasePending, v1.PhaseSynced, v1.PhaseError} {
			ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(counts[phase]), k.CRKind(), phase)
		}
	}
	seen := map[[2]string]bool{}
	_ = controller.RangeCached(ctx, reader, &v1.Certificate{}, func(o client.Object) {
		cert, ok := o.(*v1.Certificate)
		if !ok {
			return
		}
		s := &cert.Spec
		key := [2]string{s.Namespace, s.Name}
		if s.NotAfter == nil || seen[key] {
			return // not issued yet; or a second CR of one certificate (a duplicate series would fail the scrape)
		}
		seen[key] = true
		ch <- prometheus.MustNewConstMetric(p.expiry, prometheus.GaugeValue, float64(s.NotAfter.Unix()), s.Namespace, s.Name)
	})
}

// phases counts the kind's CRs by sync phase (none yet counts as Pending), from
// the informer's store: no copies (controller.RangeCached).
func (k Kind[O, P]) phases(ctx context.Context, c cache.Informers) (map[string]int, error) {
	out := map[string]int{}
	err := controller.RangeCached(ctx, c, k.New(), func(o client.Object) {
		cr, ok := o.(O)
		if !ok {
			return
		}
		phase := cr.SyncState().Phase
		if phase == "" {
			phase = v1.PhasePending
		}
		out[phase]++
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
