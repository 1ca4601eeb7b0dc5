package endpoints

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/crdgate"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch

// HTTPRouteCRD is the CRD whose presence turns HTTPRoute discovery on.
const HTTPRouteCRD = "httproutes.gateway.networking.k8s.io"

// HTTPRoutes reads Gateway-API HTTPRoutes; an HTTPRoute takes a host over from
// an Ingress, never the reverse.
var HTTPRoutes = &Inspector{Kind: "HTTPRoute", Label: v1.LabelEndpointSourceHTTPRoute, Finalizer: v1.FinalizerHTTPRouteDiscovery,
	Priority: 1, Example: &gatewayv1.HTTPRoute{}, Inspect: inspectHTTPRoute}

// inspectHTTPRoute: hosts from spec.hostnames; TLS and port from the parent Gateway's
// listener (sectionName, else the first HTTPS, else the first HTTP listener); the
// path from the first PathPrefix match; gateway_classes filters by the parent's class.
func inspectHTTPRoute(ctx context.Context, c client.Client, obj client.Object, snap *liveconfig.Snapshot) (bool, []Host, error) {
	route := obj.(*gatewayv1.HTTPRoute)
	var gw *gatewayv1.Gateway
	var section string
	for _, ref := range route.Spec.ParentRefs {
		if (ref.Kind != nil && *ref.Kind != "Gateway") || (ref.Group != nil && *ref.Group != gatewayv1.GroupName) {
			continue
		}
		ns := route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		g := &gatewayv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, g); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return false, nil, err
			}
			continue
		}
		gw = g
		if ref.SectionName != nil {
			section = string(*ref.SectionName)
		}
		break
	}
	if classes := snap.Spec.EndpointDiscovery.GatewayClasses; len(classes) > 0 {
		if gw == nil || !containsString(classes, string(gw.Spec.GatewayClassName)) {
			return false, nil, nil
		}
	}
	src := annotations.Source{Listener: pickListener(gw, section), Path: annotations.CheckSourcePath(firstPathPrefix(route))}
	var hosts []Host
	seen := map[string]bool{}
	for _, h := range route.Spec.Hostnames {
		name := string(h)
		if name != "" && name[0] != '*' && !seen[name] {
			seen[name] = true
			hosts = append(hosts, Host{Name: name, Source: src})
		}
	}
	return true, hosts, nil
}

func pickListener(gw *gatewayv1.Gateway, section string) *annotations.Listener {
	if gw == nil {
		return nil
	}
	of := func(l gatewayv1.Listener) *annotations.Listener {
		tls := l.Protocol == gatewayv1.HTTPSProtocolType || l.Protocol == gatewayv1.TLSProtocolType
		return &annotations.Listener{TLS: tls, Port: int(l.Port)}
	}
	if section != "" {
		for _, l := range gw.Spec.Listeners {
			if string(l.Name) == section {
				return of(l)
			}
		}
	}
	for _, p := range []gatewayv1.ProtocolType{gatewayv1.HTTPSProtocolType, gatewayv1.HTTPProtocolType} {
		for _, l := range gw.Spec.Listeners {
			if l.Protocol == p {
				return of(l)
			}
		}
	}
	return nil
}

func firstPathPrefix(route *gatewayv1.HTTPRoute) string {
	for _, rule := range route.Spec.Rules {
		for _, m := range rule.Matches {
			if m.Path != nil && m.Path.Type != nil && *m.Path.Type == gatewayv1.PathMatchPathPrefix && m.Path.Value != nil {
				return *m.Path.Value
			}
		}
	}
	return ""
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// HTTPRouteStarter runs HTTPRoute discovery while the Gateway-API CRD is served
// (crdgate): started without a restart when it is installed later, quiet while it
// is gone.
type HTTPRouteStarter struct {
	Mgr        manager.Manager
	Reconciler *SourceReconciler
	Gate       *crdgate.Gate
	// Also are further watches to start with HTTPRoute discovery (K8sApp claims);
	// each is called again when the CRD returns.
	Also []func() error

	ctrl crcontroller.Controller
}

// Started reports whether HTTPRoute discovery runs.
func (s *HTTPRouteStarter) Started() bool { return s.Gate.Active(HTTPRouteCRD) }

// start builds the controller the first time; every time it (re)adds the watches.
func (s *HTTPRouteStarter) start(first bool) error {
	mgr, r := s.Mgr, s.Reconciler
	list := func(ctx context.Context) ([]client.Object, error) {
		if !s.Started() {
			return nil, nil
		}
		return controller.ListObjects(ctx, mgr.GetClient(), &gatewayv1.HTTPRouteList{}, client.UnsafeDisableDeepCopy)
	}
	if first {
		r.Active = s.Started
		waker := controller.NewWaker()
		if err := waker.WakeOnConfigChange(mgr, r.Config, list); err != nil {
			return err
		}
		c, err := ctrl.NewControllerManagedBy(mgr).
			Named("discovery-httproute").
			Watches(&v1.Endpoint{}, endpointToSource(v1.LabelEndpointSourceHTTPRoute, nil)).
			WatchesRawSource(waker.Source()).
			WithOptions(r.Options()).
			Build(r)
		if err != nil {
			return err
		}
		s.ctrl = c
	}
	// A Gateway is never a source: its change re-queues the routes attached to it.
	gatewayToRoutes := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		routes, _ := list(ctx)
		var out []reconcile.Request
		for _, ro := range routes {
			route := ro.(*gatewayv1.HTTPRoute)
			for _, ref := range route.Spec.ParentRefs {
				ns := route.Namespace
				if ref.Namespace != nil {
					ns = string(*ref.Namespace)
				}
				if string(ref.Name) == o.GetName() && ns == o.GetNamespace() {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(route)})
				}
			}
		}
		return out
	})
	if err := s.ctrl.Watch(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.HTTPRoute{}), &handler.EnqueueRequestForObject{})); err != nil {
		return err
	}
	if err := s.ctrl.Watch(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.Gateway{}), gatewayToRoutes)); err != nil {
		return err
	}
	for _, also := range s.Also {
		if err := also(); err != nil {
			return err
		}
	}
	return nil
}

// SetupWithManager registers HTTPRoute discovery with the CRD gate.
func (s *HTTPRouteStarter) SetupWithManager(mgr manager.Manager) error {
	s.Mgr = mgr
	s.Gate.Register(crdgate.Kind{CRD: HTTPRouteCRD, Version: "v1",
		Objects: []client.Object{&gatewayv1.HTTPRoute{}, &gatewayv1.Gateway{}}, Start: s.start})
	return nil
}
