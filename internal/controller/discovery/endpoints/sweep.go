package endpoints

import (
	"context"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
)

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch

// httpRouteGVK is read unstructured, so the sweep works whether or not the Gateway
// API is installed.
var httpRouteGVK = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}

// Sweep deletes discovered Endpoint CRs whose source is gone (seed 002
// "Stale-Sweep"): a safety net for sources deleted while the operator was not
// running or without a finalizer. Endpoints not created by discovery are never
// touched. It runs every endpoint_discovery.stale_cleanup_minutes, on the leader.
type Sweep struct {
	controller.Deps
	Reader client.Reader // uncached reads of the sources
}

// SetupWithManager runs the sweep on the leader every
// endpoint_discovery.stale_cleanup_minutes.
func (s *Sweep) SetupWithManager(mgr manager.Manager) error {
	return controller.Every(mgr, func() time.Duration {
		if snap := s.Config.Get(); snap != nil {
			return controller.MinutesOr(snap.Spec.EndpointDiscovery.StaleCleanupMinutes, controller.DefaultSweepInterval)
		}
		return controller.DefaultSweepInterval
	}, func(ctx context.Context) {
		if n, err := s.Once(ctx); err != nil {
			if ctx.Err() == nil { // not the operator stopping
				s.Log.Error(err, "stale sweep failed")
			}
		} else if n > 0 {
			s.Log.Info("stale sweep deleted Endpoints whose source is gone", "count", n)
		}
	})
}

// Once runs one sweep and returns how many Endpoints it deleted.
func (s *Sweep) Once(ctx context.Context) (int, error) {
	list := &v1.EndpointList{}
	if err := s.Client.List(ctx, list, client.MatchingLabels{v1.LabelDiscovered: v1.LabelValueTrue}); err != nil {
		return 0, err
	}
	deleted := 0
	// One check per source (an Ingress of two hosts has two Endpoints).
	goneBySource := map[string]bool{}
	for i := range list.Items {
		ep := &list.Items[i]
		if !ep.DeletionTimestamp.IsZero() {
			continue
		}
		src := ep.Namespace + "/" + ep.Labels[v1.LabelEndpointSourceIngress] + "/" + ep.Labels[v1.LabelEndpointSourceHTTPRoute]
		gone, checked := goneBySource[src]
		if !checked {
			var err error
			if gone, err = s.sourceGone(ctx, ep); err != nil {
				return deleted, err
			}
			goneBySource[src] = gone
		}
		if gone {
			s.Log.Info("deleting stale Endpoint", "namespace", ep.Namespace, "name", ep.Name)
			if err := client.IgnoreNotFound(s.Client.Delete(ctx, ep)); err != nil {
				return deleted, err
			}
			deleted++
		}
	}
	return deleted, nil
}

func (s *Sweep) sourceGone(ctx context.Context, ep *v1.Endpoint) (bool, error) {
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ep.Namespace, Name: name} }
	if name := ep.Labels[v1.LabelEndpointSourceIngress]; name != "" {
		// The cache first: a sweep of 40,000 Endpoints read every source from the
		// API server, 40,000 GETs each interval (docs/performance.md). Only a
		// source the cache does not have is confirmed uncached (the cache may
		// trail a new source).
		err := s.Client.Get(ctx, key(name), &networkingv1.Ingress{})
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		err = s.Reader.Get(ctx, key(name), &networkingv1.Ingress{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if name := ep.Labels[v1.LabelEndpointSourceHTTPRoute]; name != "" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(httpRouteGVK)
		err := s.Reader.Get(ctx, key(name), u)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return true, nil
		}
		return false, err
	}
	return false, nil // no source label: not ours to judge
}
