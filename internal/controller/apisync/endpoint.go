package apisync

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/opconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Annotations on API endpoints for seed-only data (docs/api-contract.md).
const (
	APIAnnotationExpectedBody = "polycrate.io/expected-body"
	APIAnnotationK8sApp       = "polycrate.io/k8sapp-name"
	APIAnnotationSource       = "polycrate.io/source"
)

// +kubebuilder:rbac:groups=polycrate.io,resources=endpoints,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=polycrate.io,resources=endpoints/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=polycrate.io,resources=endpoints/finalizers,verbs=update

// +kubebuilder:rbac:groups=polycrate.io,resources=k8sapps,verbs=get;list;watch

// EndpointAdapter syncs Endpoint CRs to /api/v1/endpoints/.
type EndpointAdapter struct {
	// Reader reads the claimed K8sApp (its API id becomes the endpoint's k8s_app).
	Reader client.Reader
}

// Name is the kind.
func (EndpointAdapter) Name() string { return "endpoint" }

// New returns an empty Endpoint.
func (EndpointAdapter) New() *v1.Endpoint { return &v1.Endpoint{} }

// List lists every Endpoint.
func (EndpointAdapter) List(ctx context.Context, c client.Client) ([]*v1.Endpoint, error) {
	list := &v1.EndpointList{}
	err := c.List(ctx, list)
	return ptrs(list.Items), err
}

// Finalizer deletes the API endpoint.
func (EndpointAdapter) Finalizer() string { return v1.FinalizerEndpointCleanup }

// Payload maps the CR to EndpointRequest (docs/annotations.md "How the check reaches the API").
func (a EndpointAdapter) Payload(ep *v1.Endpoint, snap *opconfig.Snapshot) (any, error) {
	s := ep.Spec
	if s.RemoteAddress == "" {
		return nil, fmt.Errorf("%w: spec.remoteAddress is empty", ErrPermanent)
	}
	host := strings.ToLower(strings.TrimSuffix(s.RemoteAddress, "."))
	display := s.DisplayName
	if display == "" {
		display = host
	}
	port := int(s.RemotePort)
	tls := s.TLS == nil || *s.TLS
	http := &polycrate.HTTPSpec{Path: s.Path, TLS: tls, Timeout: int(s.Timeout), Interval: int(s.Interval)}
	if len(s.ExpectedStatusCodes) > 0 {
		http.ExpectedStatusCode = int(s.ExpectedStatusCodes[0])
	}
	if len(s.ExpectedStatusCodes) > 1 {
		for _, c := range s.ExpectedStatusCodes {
			http.AcceptedStatusCodes = append(http.AcceptedStatusCodes, int(c))
		}
	}
	kind := s.Kind
	if kind == "" {
		kind = "http"
	}
	req := polycrate.EndpointRequest{
		Name: names.EndpointAPI(ep.Namespace, host), RemoteAddress: host, RemotePort: &port, Kind: kind,
		Spec: &polycrate.EndpointSpec{HTTP: http}, CreatedByComponent: "operator",
		Common: polycrate.Common{DisplayName: &display,
			Labels:      map[string]string{"polycrate_source_namespace": ep.Namespace, "polycrate_source_name": ep.Name},
			Annotations: map[string]string{APIAnnotationSource: ep.Namespace + "/" + ep.Name}},
	}
	if ep.Labels[v1.LabelDiscovered] == v1.LabelValueTrue {
		req.Labels[v1.LabelDiscovered] = v1.LabelValueTrue
	}
	if s.ExpectedBody != "" {
		req.Annotations[APIAnnotationExpectedBody] = s.ExpectedBody
	}
	if s.K8sAppName != "" {
		req.Annotations[APIAnnotationK8sApp] = s.K8sAppName
		// The link in the API once the claimed app is synced (K8sApp status.api_id);
		// until then the endpoint is synced unclaimed and re-synced when the app is.
		if a.Reader != nil {
			app := &v1.K8sApp{}
			if err := a.Reader.Get(context.Background(), client.ObjectKey{Namespace: ep.Namespace, Name: s.K8sAppName}, app); err == nil && app.Status.APIID != "" {
				id := app.Status.APIID
				req.K8sApp = &id
			}
		}
	}
	if snap != nil && snap.LocalClusterID != "" {
		id := snap.LocalClusterID
		req.K8sCluster = &id
	}
	return req, nil
}

// Find looks the endpoint up by its name (one request).
func (EndpointAdapter) Find(ctx context.Context, c *polycrate.Client, _ *v1.Endpoint, payload any) (string, error) {
	row, err := c.FindEndpoint(ctx, payload.(polycrate.EndpointRequest).Name)
	if err != nil || row == nil {
		return "", err
	}
	return row.ID, nil
}

// Create creates the endpoint.
func (EndpointAdapter) Create(ctx context.Context, c *polycrate.Client, payload any) (string, error) {
	ep, err := c.Endpoints().Create(ctx, payload.(polycrate.EndpointRequest))
	if err != nil {
		return "", err
	}
	return ep.ID, nil
}

// Update replaces the endpoint's writable fields.
func (EndpointAdapter) Update(ctx context.Context, c *polycrate.Client, id string, payload any) error {
	_, err := c.Endpoints().Update(ctx, id, payload.(polycrate.EndpointRequest))
	return err
}

// Exists reads the endpoint.
func (EndpointAdapter) Exists(ctx context.Context, c *polycrate.Client, id string) (bool, error) {
	_, err := c.Endpoints().Get(ctx, id)
	if polycrate.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Delete deletes the endpoint.
func (EndpointAdapter) Delete(ctx context.Context, c *polycrate.Client, id string) error {
	return c.Endpoints().Delete(ctx, id)
}

// LiveIDs lists the workspace's endpoints (of the local cluster, when known).
func (EndpointAdapter) LiveIDs(ctx context.Context, c *polycrate.Client, snap *opconfig.Snapshot) (map[string]bool, error) {
	q := polycrate.Query()
	if snap.LocalClusterID != "" {
		q.Set("k8s_cluster", snap.LocalClusterID)
	}
	rows, err := c.Endpoints().List(ctx, q)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(rows))
	for _, r := range rows {
		ids[r.ID] = true
	}
	return ids, nil
}

// GetState reads the Endpoint's camelCase status.
func (EndpointAdapter) GetState(ep *v1.Endpoint) State {
	return State{Phase: ep.Status.Phase, APIID: ep.Status.APIID, ConfigHash: ep.Status.ConfigHash,
		LastSyncedAt: ep.Status.LastSyncedAt, Message: ep.Status.Message, Generation: ep.Status.ObservedGeneration}
}

// SetState writes it back.
func (EndpointAdapter) SetState(ep *v1.Endpoint, s State) {
	ep.Status.Phase, ep.Status.APIID, ep.Status.ConfigHash = s.Phase, s.APIID, s.ConfigHash
	ep.Status.LastSyncedAt, ep.Status.Message, ep.Status.ObservedGeneration = s.LastSyncedAt, s.Message, s.Generation
	ep.Status.K8sAppName = ep.Spec.K8sAppName
}

// Conditions are the Endpoint's conditions.
func (EndpointAdapter) Conditions(ep *v1.Endpoint) *[]metav1.Condition { return &ep.Status.Conditions }

// PhaseName: the Endpoint spells phases in lower case ("synced"), as the seed's example.
func (EndpointAdapter) PhaseName(phase string) string { return strings.ToLower(phase) }

// EndpointsClaiming maps a K8sApp to the Endpoints of its namespace that claim it.
func EndpointsClaiming(c client.Client) Related {
	return Related{Object: &v1.K8sApp{}, Map: func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &v1.EndpointList{}
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, ep := range list.Items {
			if ep.Spec.K8sAppName == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ep)})
			}
		}
		return out
	}}
}
