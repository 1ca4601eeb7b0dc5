package cloud

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// Controllers runs k8s.io/cloud-provider's cloud-node controller (while
// cloud_controller.enabled) and service controller (while load_balancer.enabled
// too) on the leader, with informers of their own, and starts and stops them as
// the OperatorConfig changes. A changed service_scope re-examines every Service.
type Controllers struct {
	Provider *Provider
	Kube     kubernetes.Interface
	// Cache is the manager's cache: Host and OperatorConfig changes wake the Nodes
	// that wait for them.
	Cache  crcache.Cache
	Config *liveconfig.Store
	Log    logr.Logger
	// NodeStatusUpdateFrequency is how often initialized Nodes' addresses are
	// compared (default 5 minutes, as in cloud-controller-manager).
	NodeStatusUpdateFrequency time.Duration
	// Workers per controller (default 2).
	Workers int

	mu       sync.Mutex
	nodes    *hooked
	services *hooked
}

// Start runs until ctx ends (a leader-election runnable).
func (c *Controllers) Start(ctx context.Context) error {
	changes := c.Config.Subscribe()
	type want struct{ nodes, lb bool }
	var cur want
	var curLB lbSettings
	var stop context.CancelFunc
	var done chan struct{}
	halt := func() {
		if stop != nil {
			stop()
			<-done
			stop, done = nil, nil
		}
	}
	apply := func() {
		nodesOn, lb := settingsOf(c.Config.Get())
		next := want{nodes: nodesOn, lb: lb.enabled}
		switch {
		case next != cur:
			halt()
			if next.nodes || next.lb {
				runCtx, cancel := context.WithCancel(ctx)
				stop, done = cancel, make(chan struct{})
				go func(d chan struct{}) {
					defer close(d)
					c.run(runCtx, next.nodes, next.lb)
				}(done)
			}
			c.Log.Info("cloud controller", "node_initialization", next.nodes, "load_balancers", next.lb)
		case lb != curLB:
			c.nudgeServices() // another scope: every Service is looked at again
		}
		cur, curLB = next, lb
	}
	apply()
	for {
		select {
		case <-ctx.Done():
			halt()
			return nil
		case <-changes:
			apply()
		}
	}
}

// run runs the controllers until ctx ends.
func (c *Controllers) run(ctx context.Context, nodes, lb bool) {
	workers := c.Workers
	if workers <= 0 {
		workers = 2
	}
	freq := c.NodeStatusUpdateFrequency
	if freq <= 0 {
		freq = 5 * time.Minute
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithTransform(strip))
	nodeInf := &hooked{SharedIndexInformer: factory.Core().V1().Nodes().Informer(),
		nudge: func(h toolscache.ResourceEventHandler, obj any) { h.OnUpdate(obj, obj) }}
	var svcInf *hooked
	if lb {
		svcInf = &hooked{SharedIndexInformer: factory.Core().V1().Services().Informer(), filter: c.passService,
			nudge: func(h toolscache.ResourceEventHandler, obj any) { h.OnAdd(obj, false) }}
	}
	metrics := controllersmetrics.NewControllerManagerMetrics("polycrate-operator")
	var wg sync.WaitGroup
	var cleanup []func()
	if nodes {
		cnc, err := nodecontroller.NewCloudNodeController(nodeInformer{nodeInf}, c.Kube, c.Provider, freq, int32(workers), int32(workers))
		if err != nil {
			c.Log.Error(err, "cannot start the cloud-node controller")
			return
		}
		// Initialized Nodes: the Host's condition says so.
		_, _ = nodeInf.SharedIndexInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.initialized(ctx, obj) },
			UpdateFunc: func(_, obj any) { c.initialized(ctx, obj) },
		})
		cleanup = append(cleanup, c.wakeNodes(ctx, nodeInf)...)
		wg.Go(func() { cnc.RunWithContext(ctx, metrics) })
	}
	if lb {
		clusterID := ""
		if snap := c.Config.Get(); snap != nil {
			clusterID = snap.LocalClusterID
		}
		sc, err := servicecontroller.New(c.Provider, c.Kube, serviceInformer{svcInf}, nodeInformer{nodeInf}, clusterID, featuregate.NewFeatureGate())
		if err != nil {
			c.Log.Error(err, "cannot start the service controller")
			return
		}
		wg.Go(func() { sc.Run(ctx, workers, metrics) })
	}
	c.mu.Lock()
	c.nodes, c.services = nodeInf, svcInf
	c.mu.Unlock()
	factory.Start(ctx.Done())
	<-ctx.Done()
	for _, f := range cleanup {
		f()
	}
	wg.Wait()
	factory.Shutdown()
	c.mu.Lock()
	c.nodes, c.services = nil, nil
	c.mu.Unlock()
}

// passService lets through to the service controller what the operator manages
// and what it must let go of (a Service carrying the cleanup finalizer, or one
// that was managed before this change): every other Service is left alone,
// without a finalizer, event or status write.
func (c *Controllers) passService(old, cur any) bool {
	svc, ok := cur.(*corev1.Service)
	if !ok {
		return true
	}
	if c.Provider.Manages(svc) || servicehelper.HasLBFinalizer(svc) {
		return true
	}
	prev, ok := old.(*corev1.Service)
	return ok && c.Provider.Manages(prev)
}

// initialized records a Node's initialization on its Host.
func (c *Controllers) initialized(ctx context.Context, obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		c.Provider.Initialized(ctx, n)
	}
}

// wakeNodes wakes a tainted Node when its Host changes (it may have synced) and
// every tainted Node when the OperatorConfig changes (pop_name, the local
// cluster); an initialized Node's Host gets its condition back if a status write
// of the sync controller dropped it. It returns the handlers' removal.
func (c *Controllers) wakeNodes(ctx context.Context, nodes *hooked) []func() {
	lister := corelisters.NewNodeLister(nodes.GetIndexer())
	var out []func()
	add := func(obj client.Object, h toolscache.ResourceEventHandler) {
		inf, err := c.Cache.GetInformer(ctx, obj)
		if err != nil {
			c.Log.Error(err, "cannot watch for the cloud controller", "kind", obj.GetObjectKind().GroupVersionKind().Kind)
			return
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return
		}
		out = append(out, func() { _ = inf.RemoveEventHandler(reg) })
	}
	host := func(obj any) {
		h, ok := obj.(*v1.Host)
		if !ok {
			return
		}
		n, err := lister.Get(h.Name)
		if err != nil {
			return
		}
		if Tainted(n) {
			nodes.Nudge(n)
		} else {
			c.Provider.Initialized(ctx, n)
		}
	}
	add(&v1.Host{}, toolscache.ResourceEventHandlerFuncs{AddFunc: host, UpdateFunc: func(_, obj any) { host(obj) }})
	add(&v1.OperatorConfig{}, toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {
		all, _ := lister.List(labels.Everything())
		for _, n := range all {
			if Tainted(n) {
				nodes.Nudge(n)
			}
		}
	}})
	return out
}

// nudgeServices hands every Service to the service controller again (through
// the scope filter).
func (c *Controllers) nudgeServices() {
	c.mu.Lock()
	svcs := c.services
	c.mu.Unlock()
	if svcs == nil {
		return
	}
	for _, obj := range svcs.GetStore().List() {
		svcs.Nudge(obj)
	}
}

// strip is the informers' transform: no managedFields, no Node images (the
// largest part of a Node; the controllers never read them, and a Node update
// never writes status).
func strip(obj any) (any, error) {
	switch t := obj.(type) {
	case *corev1.Node:
		t.ManagedFields = nil
		t.Status.Images = nil
	case *corev1.Service:
		t.ManagedFields = nil
	}
	return obj, nil
}

// hooked is an informer that records the event handlers the upstream
// controllers register (so that a Node or Service can be handed to them again:
// Nudge) and lets through only what filter passes.
type hooked struct {
	toolscache.SharedIndexInformer
	filter func(old, cur any) bool
	nudge  func(h toolscache.ResourceEventHandler, obj any)

	mu       sync.Mutex
	handlers []toolscache.ResourceEventHandler
}

func (h *hooked) wrap(handler toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	if h.filter != nil {
		handler = filtered{handler, h.filter}
	}
	h.mu.Lock()
	h.handlers = append(h.handlers, handler)
	h.mu.Unlock()
	return handler
}

func (h *hooked) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return h.SharedIndexInformer.AddEventHandler(h.wrap(handler))
}

func (h *hooked) AddEventHandlerWithResyncPeriod(handler toolscache.ResourceEventHandler, d time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return h.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h.wrap(handler), d)
}

func (h *hooked) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return h.SharedIndexInformer.AddEventHandlerWithOptions(h.wrap(handler), o)
}

// Nudge hands an object to every recorded handler again.
func (h *hooked) Nudge(obj any) {
	h.mu.Lock()
	hs := append([]toolscache.ResourceEventHandler(nil), h.handlers...)
	h.mu.Unlock()
	for _, handler := range hs {
		h.nudge(handler, obj)
	}
}

// filtered passes adds and updates that pass; deletions always.
type filtered struct {
	toolscache.ResourceEventHandler
	pass func(old, cur any) bool
}

func (f filtered) OnAdd(obj any, initial bool) {
	if f.pass(nil, obj) {
		f.ResourceEventHandler.OnAdd(obj, initial)
	}
}

func (f filtered) OnUpdate(old, cur any) {
	if f.pass(old, cur) {
		f.ResourceEventHandler.OnUpdate(old, cur)
	}
}

// nodeInformer and serviceInformer give the upstream controllers the hooked
// informers in the shape they take.
type nodeInformer struct{ *hooked }

func (n nodeInformer) Informer() toolscache.SharedIndexInformer { return n.hooked }
func (n nodeInformer) Lister() corelisters.NodeLister {
	return corelisters.NewNodeLister(n.GetIndexer())
}

type serviceInformer struct{ *hooked }

func (s serviceInformer) Informer() toolscache.SharedIndexInformer { return s.hooked }
func (s serviceInformer) Lister() corelisters.ServiceLister {
	return corelisters.NewServiceLister(s.GetIndexer())
}

var (
	_ coreinformers.NodeInformer    = nodeInformer{}
	_ coreinformers.ServiceInformer = serviceInformer{}
)
