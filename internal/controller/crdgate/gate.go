// Package crdgate starts controllers of third-party kinds (Velero, CloudNativePG,
// cert-manager, the Gateway API) only while their CRD is served: a CRD installed
// after the operator started starts its controller without a restart; a CRD that
// is absent costs one log line, not an error loop; a CRD that is removed makes its
// informers stop (its controller goes quiet) until the CRD returns.
package crdgate

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"github.com/polycrate/polycrate-operator/internal/controller"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Kind is one gated kind.
type Kind struct {
	// CRD is the CRD's name, e.g. "backups.velero.io".
	CRD string
	// Version must be served, e.g. "v1".
	Version string
	// Objects are the informers to stop when the CRD goes (the kind itself).
	Objects []client.Object
	// Start is called whenever the CRD becomes served: the first time it builds
	// what it needs, later it re-adds its watches.
	Start func(first bool) error
}

type state struct {
	kind    Kind
	started bool // Start ran once
	active  bool // served now
	logged  bool // "not installed" said once
}

// Gate watches CRDs (metadata only) and runs the registered kinds.
type Gate struct {
	Mgr manager.Manager
	Log logr.Logger

	mu    sync.Mutex
	kinds map[string]*state
}

// Register adds a kind; call before Setup.
func (g *Gate) Register(k Kind) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.kinds == nil {
		g.kinds = map[string]*state{}
	}
	g.kinds[k.CRD] = &state{kind: k}
}

// Active reports whether the CRD is served and its kind's controller runs.
func (g *Gate) Active(crd string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.kinds[crd]
	return s != nil && s.active
}

// Setup watches the registered CRDs, and says once at start which are missing.
func (g *Gate) Setup() error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	initial := make(chan event.GenericEvent, len(g.kinds))
	for name := range g.kinds {
		o := &metav1.PartialObjectMetadata{}
		o.SetName(name)
		initial <- event.GenericEvent{Object: o}
	}
	return ctrl.NewControllerManagedBy(g.Mgr).
		Named("crd-gate").
		For(crd, builder.OnlyMetadata, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			_, ok := g.kinds[o.GetName()]
			return ok
		}))).
		// Every registered CRD is decided once at start, present or not.
		WatchesRawSource(source.Channel(initial, &handler.EnqueueRequestForObject{})).
		Complete(g)
}

// Reconcile decides one CRD.
func (g *Gate) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	g.mu.Lock()
	s := g.kinds[req.Name]
	g.mu.Unlock()
	if s == nil {
		return ctrl.Result{}, nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := g.Mgr.GetAPIReader().Get(ctx, types.NamespacedName{Name: req.Name}, crd)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	// A CRD being deleted still counts as served until it is gone: its objects are
	// deleted first, and a controller with finalizers on them must release them.
	served := err == nil && established(crd) && servesVersion(crd, s.kind.Version)
	if err == nil && crd.DeletionTimestamp.IsZero() && !established(crd) {
		return ctrl.Result{RequeueAfter: controller.RequeueShortly}, nil // being installed
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case served && !s.active:
		first := !s.started
		if err := s.kind.Start(first); err != nil {
			return ctrl.Result{}, err
		}
		s.started, s.active = true, true
		g.Log.Info("CRD found: discovery of its kind started", "crd", req.Name)
	case !served && s.active:
		s.active = false
		for _, o := range s.kind.Objects {
			if err := g.Mgr.GetCache().RemoveInformer(ctx, o); err != nil {
				g.Log.Error(err, "cannot stop the informer of a removed CRD", "crd", req.Name)
			}
		}
		g.Log.Info("CRD removed: discovery of its kind is quiet until it returns", "crd", req.Name)
	case !served && !s.started && !s.logged:
		s.logged = true
		g.Log.Info("CRD not installed: discovery of its kind starts when it appears", "crd", req.Name)
	}
	return ctrl.Result{}, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func servesVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}

var _ reconcile.Reconciler = &Gate{}
