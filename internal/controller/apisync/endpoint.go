package apisync

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Annotations on API endpoints for seed-only data (docs/api-contract.md).
const (
	APIAnnotationExpectedBody = "polycrate.io/expected-body"
	APIAnnotationK8sApp       = "polycrate.io/k8sapp-name"
	APIAnnotationSource       = "polycrate.io/source"
)

// endpoints is the Endpoint adapter: /api/v1/endpoints/, found by name (one
// request); the claimed K8sApp's API id is looked up from its CR.
type endpoints struct {
	resource[*v1.Endpoint, polycrate.Endpoint, polycrate.EndpointRow, polycrate.EndpointRequest]
	reader client.Reader
}

func endpointAdapter(reader client.Reader) endpoints {
	return endpoints{reader: reader, resource: resource[*v1.Endpoint, polycrate.Endpoint, polycrate.EndpointRow, polycrate.EndpointRequest]{
		api: (*polycrate.Client).Endpoints, clusterFilter: true,
		meta:  func(d *polycrate.Endpoint) *polycrate.Meta { return &d.Meta },
		rowID: func(r *polycrate.EndpointRow) string { return r.ID },
		query: func(req polycrate.EndpointRequest) url.Values { return polycrate.Query("name_exact", req.Name) },
	}}
}

// Lookup reads the claimed K8sApp: once it is synced (status.api_id) the
// endpoint links to it in the API; until then the endpoint is synced unclaimed
// and synced again when the app is (endpointsClaiming).
func (a endpoints) Lookup(ctx context.Context, ep *v1.Endpoint) (polycrate.EndpointRequest, error) {
	var req polycrate.EndpointRequest
	if ep.Spec.K8sAppName == "" || a.reader == nil {
		return req, nil
	}
	app := &v1.K8sApp{}
	err := a.reader.Get(ctx, client.ObjectKey{Namespace: ep.Namespace, Name: ep.Spec.K8sAppName}, app)
	if err != nil {
		return req, client.IgnoreNotFound(err)
	}
	if app.Status.APIID != "" {
		id := app.Status.APIID
		req.K8sApp = &id
	}
	return req, nil
}

// Payload maps the CR to EndpointRequest (docs/annotations.md "How the check
// reaches the API"); the local cluster is linked when known.
func (a endpoints) Payload(ep *v1.Endpoint, snap *liveconfig.Snapshot, looked polycrate.EndpointRequest) (polycrate.EndpointRequest, error) {
	s := ep.Spec
	if s.RemoteAddress == "" {
		return looked, errors.New("spec.remoteAddress is empty")
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
		req.K8sApp = looked.K8sApp
	}
	if snap != nil && snap.LocalClusterID != "" {
		id := snap.LocalClusterID
		req.K8sCluster = &id
	}
	return req, nil
}

// endpointsClaiming maps a K8sApp to the Endpoints of its namespace that claim it.
var endpointsClaiming = Related{Object: &v1.K8sApp{}, Map: func(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
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
	}
}}
