package monitoring

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// mirror keeps an Endpoint CR in the operator's namespace for every assigned
// endpoint that was defined in the API (created_by_component is not "operator":
// a person, the CLI or the API made it), labelled monitoring.polycrate.io/api-defined.
// The sync, discovery and its sweep leave such CRs alone; the agent updates them
// when the API's endpoint changes and deletes them when the API unassigns or
// deletes the endpoint. Endpoints an operator created (from an Ingress, here or in
// another cluster) are never mirrored. It returns the ids of the endpoints
// that have a mirror now.
func (a *Agent) mirror(ctx context.Context, list []polycrate.AgentEndpoint) (map[string]bool, error) {
	existing := &v1.EndpointList{}
	if err := a.Client.List(ctx, existing, client.InNamespace(a.Namespace), client.MatchingLabels{v1.LabelAPIDefined: v1.LabelValueTrue}); err != nil {
		return nil, err
	}
	mirrors := map[string]*v1.Endpoint{}
	for i := range existing.Items {
		ep := &existing.Items[i]
		mirrors[ep.Annotations[v1.AnnotationAPIEndpointID]] = ep
	}
	keep := map[string]bool{}
	var errs []string
	for _, e := range list {
		defined, err := a.definedInAPI(ctx, e.ID)
		if err != nil {
			errs = append(errs, err.Error())
			if mirrors[e.ID] != nil {
				keep[e.ID] = true // unknown for now: keep what is there
			}
			continue
		}
		if !defined || a.heldLocally(ctx, e.ID) {
			continue
		}
		keep[e.ID] = true
		if err := a.ensureMirror(ctx, e, mirrors[e.ID]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for id, ep := range mirrors {
		if keep[id] {
			continue
		}
		if err := a.Client.Delete(ctx, ep); err != nil && !kerrors.IsNotFound(err) {
			errs = append(errs, err.Error())
			continue
		}
		a.Log.Info("removed the Endpoint CR of an API-defined endpoint no longer assigned", "name", ep.Name, "apiID", id)
	}
	if len(errs) > 0 {
		return keep, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return keep, nil
}

// definedInAPI says whether an endpoint was made outside the operator; the
// answer is cached (created_by_component does not change).
func (a *Agent) definedInAPI(ctx context.Context, id string) (bool, error) {
	a.mu.Lock()
	if a.origin == nil {
		a.origin = map[string]bool{}
	}
	defined, known := a.origin[id]
	a.mu.Unlock()
	if known {
		return defined, nil
	}
	c := a.Conn.Client()
	if c == nil {
		return false, fmt.Errorf("not connected")
	}
	e, err := c.Endpoints().Get(ctx, id)
	if err != nil {
		return false, fmt.Errorf("reading endpoint %s: %w", id, err)
	}
	defined = ptr.Deref(e.CreatedByComponent, "") != "operator"
	a.mu.Lock()
	a.origin[id] = defined
	a.mu.Unlock()
	return defined, nil
}

// heldLocally: a CR of this cluster (not a mirror) carries the id.
func (a *Agent) heldLocally(ctx context.Context, id string) bool {
	held := &v1.EndpointList{}
	if err := a.Client.List(ctx, held, client.MatchingFields{apisync.IndexAPIID: id}); err != nil {
		return true // unknown: never make a second CR for it
	}
	for i := range held.Items {
		if held.Items[i].Labels[v1.LabelAPIDefined] != v1.LabelValueTrue {
			return true
		}
	}
	return false
}

// mirrorName is the CR name of an API-defined endpoint: its API name and the
// start of its id (names repeat across workspaces).
func mirrorName(e polycrate.AgentEndpoint) string {
	short := e.ID
	if len(short) > 8 {
		short = short[:8]
	}
	return names.DNS("api", strings.ToLower(e.Name), short)
}

// mirrorSpec is the CR spec of an API endpoint, with the CRD's defaults filled in
// (so that an unchanged endpoint compares equal to the stored CR).
func mirrorSpec(e polycrate.AgentEndpoint) v1.EndpointSpec {
	kind := e.Kind
	if kind == "" {
		kind = "http"
	}
	s := v1.EndpointSpec{DisplayName: e.Name, RemoteAddress: e.RemoteAddress, Kind: kind, TLS: ptr.To(false), Path: "/",
		Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}, RemotePort: 443}
	if e.RemotePort != nil && *e.RemotePort > 0 {
		s.RemotePort = int32(*e.RemotePort) //nolint:gosec // a port
	}
	if h := specHTTP(e); h != nil {
		s.TLS = ptr.To(h.TLS)
		if h.Path != "" {
			s.Path = h.Path
		}
		if h.Timeout > 0 {
			s.Timeout = int32(h.Timeout) //nolint:gosec // seconds
		}
		if h.Interval > 0 {
			s.Interval = int32(h.Interval) //nolint:gosec // seconds
		}
		codes := []int32{}
		if h.ExpectedStatusCode > 0 {
			codes = append(codes, int32(h.ExpectedStatusCode)) //nolint:gosec // a status code
		}
		for _, c := range h.AcceptedStatusCodes {
			codes = append(codes, int32(c)) //nolint:gosec // a status code
		}
		if len(codes) > 0 {
			s.ExpectedStatusCodes = codes
		}
	}
	if s.Interval == 60 {
		if iv := int32(Interval(targetOf(e)).Seconds()); iv > 0 { //nolint:gosec // seconds
			s.Interval = iv
		}
	}
	return s
}

func specHTTP(e polycrate.AgentEndpoint) *polycrate.HTTPSpec {
	if e.Spec == nil {
		return nil
	}
	return e.Spec.HTTP
}

func targetOf(e polycrate.AgentEndpoint) (t probe.Target) {
	t.Kind = e.Kind
	if e.Spec != nil {
		t.Spec = *e.Spec
	}
	return t
}

// ensureMirror declares the CR of an API-defined endpoint the way the operator
// declares every object it derives (discovery's Endpoints, K8sApps, the
// inventory): server-side apply, field owner polycrate-operator, forced — and
// nothing sent when the cached CR already is what it declares.
func (a *Agent) ensureMirror(ctx context.Context, e polycrate.AgentEndpoint, ep *v1.Endpoint) error {
	spec := mirrorSpec(e)
	if ep == nil || !equality.Semantic.DeepEqual(ep.Spec, spec) {
		created := ep == nil
		want := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: mirrorName(e),
			Labels:      map[string]string{v1.LabelAPIDefined: v1.LabelValueTrue},
			Annotations: map[string]string{v1.AnnotationAPIEndpointID: e.ID}}, Spec: spec}
		if !created {
			want.Name = ep.Name
		} else {
			// Not in the cache: a CR of that name that is no mirror (made by
			// someone else) is never taken over by the apply; one the cache has
			// not seen yet is.
			other := &v1.Endpoint{}
			switch err := a.freshReader().Get(ctx, client.ObjectKeyFromObject(want), other); {
			case err == nil && other.Labels[v1.LabelAPIDefined] != v1.LabelValueTrue:
				return fmt.Errorf("the Endpoint CR %s/%s of API endpoint %s exists and is not its mirror; left alone", want.Namespace, want.Name, e.Name)
			case err != nil && !kerrors.IsNotFound(err):
				return err
			}
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
		if err != nil {
			return err
		}
		delete(u, "status")
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		obj := &unstructured.Unstructured{Object: u}
		obj.SetGroupVersionKind(v1.GroupVersion.WithKind("Endpoint"))
		if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(v1.FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("declaring the Endpoint CR of API endpoint %s: %w", e.Name, err)
		}
		// The answer is the stored CR (its status and resourceVersion for the
		// status write below).
		ep = &v1.Endpoint{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, ep); err != nil {
			return err
		}
		if created {
			a.Log.Info("declared the Endpoint CR of an API-defined endpoint", "name", ep.Name, "apiID", e.ID)
		}
	}
	if ep.Status.APIID == e.ID && ep.SyncState().Phase == v1.PhaseSynced {
		return nil
	}
	// The mirror's status (Ready among the conditions, which the checks' status
	// writer shares with its Available) with the resourceVersion as a
	// precondition: on a conflict again from a fresh read, never over the
	// other writer's condition.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		before := ep.DeepCopy()
		now := metav1.Now()
		ep.SetSyncState(v1.SyncState{Phase: v1.PhaseSynced, APIID: e.ID, LastSyncedAt: &now, ConfigHash: ep.Status.ConfigHash,
			Message: "defined in the Polycrate API; mirrored by the monitoring agent"})
		ep.Status.ObservedGeneration = ep.Generation
		controller.SetCondition(&ep.Status.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: v1.ReasonMirrored, Message: ep.Status.Message, ObservedGeneration: ep.Generation})
		err := a.Client.Status().Patch(ctx, ep, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if kerrors.IsConflict(err) {
			fresh := &v1.Endpoint{}
			if gerr := a.freshReader().Get(ctx, client.ObjectKeyFromObject(ep), fresh); gerr != nil {
				return gerr
			}
			*ep = *fresh
		}
		return err
	})
	if err != nil && !kerrors.IsNotFound(err) {
		return fmt.Errorf("writing the status of the Endpoint CR of API endpoint %s: %w", e.Name, err)
	}
	return nil
}

// freshReader reads past the cache (the API reader), or through the client
// where there is none.
func (a *Agent) freshReader() client.Reader {
	if a.status.Reader != nil {
		return a.status.Reader
	}
	return a.Client
}
