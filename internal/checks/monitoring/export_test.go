package monitoring

import (
	"context"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// WriteCheckState is the status writer's write of one check state to ep, a
// copy the caller read (it may be stale); it reports a conflict, after which
// the writer reads the CR fresh and writes again.
func WriteCheckState(ctx context.Context, d controller.Deps, ep *v1.Endpoint, mon v1.EndpointMonitoringStatus) (conflicted bool) {
	return newStatusWriter(d).writeOne(ctx, ep, &desired{mon: mon})
}

// MirrorName is the CR name of the mirror of API endpoint id named name.
func MirrorName(id, name string) string {
	return mirrorName(polycrate.AgentEndpoint{ID: id, Name: name})
}
