package apisync

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// BlockLookupRetry is how long an unresolvable block link waits before the next
// lookup (when nothing about the app changed).
var BlockLookupRetry = 10 * time.Minute

// k8sApps is the K8sApp adapter: /api/v1/kubernetes/apps/ (docs/k8sapps.md).
// What differs from the generic resource: the pods' details are looked up from
// the Pod store, an app is found by namespace preference, and deletion retires.
type k8sApps struct {
	resource[*v1.K8sApp, polycrate.K8sApp, polycrate.K8sAppRow, polycrate.K8sAppRequest]
	// podDetails returns the API's pods_details for an app (from the Pod store).
	podDetails func(ctx context.Context, app *v1.K8sApp) any
}

func k8sAppAdapter(podDetails func(ctx context.Context, app *v1.K8sApp) any) k8sApps {
	return k8sApps{podDetails: podDetails, resource: resource[*v1.K8sApp, polycrate.K8sApp, polycrate.K8sAppRow, polycrate.K8sAppRequest]{
		api: (*polycrate.Client).K8sApps, clusterFilter: true, payload: k8sAppPayload,
		meta:  func(d *polycrate.K8sApp) *polycrate.Meta { return &d.Meta },
		rowID: func(r *polycrate.K8sAppRow) string { return r.ID },
	}}
}

// Lookup reads the pods' details from the Pod store.
func (a k8sApps) Lookup(ctx context.Context, app *v1.K8sApp) (polycrate.K8sAppRequest, error) {
	var req polycrate.K8sAppRequest
	if a.podDetails != nil {
		req.PodsDetails = a.podDetails(ctx, app)
	}
	return req, nil
}

// Payload is the generic one with the looked-up pods' details.
func (a k8sApps) Payload(app *v1.K8sApp, snap *liveconfig.Snapshot, looked polycrate.K8sAppRequest) (polycrate.K8sAppRequest, error) {
	req, err := a.resource.Payload(app, snap, looked)
	req.PodsDetails = looked.PodsDetails
	return req, err
}

// k8sAppPayload maps the CR to K8sAppRequest.
func k8sAppPayload(app *v1.K8sApp, cluster string) (polycrate.K8sAppRequest, error) {
	s, st := app.Spec, app.Status
	kind := s.Kind
	if kind == "" {
		kind = "external"
	}
	display := s.Block.DisplayName
	if display == "" {
		display = app.Name
	}
	ns, active := app.Namespace, true
	req := polycrate.K8sAppRequest{
		Name: names.K8sAppAPI(app.Name), Kind: kind, K8sCluster: &cluster, Namespace: &ns, Active: &active,
		BYOA:      s.BYOA && (s.DiscoverySource == "ingress" || s.DiscoverySource == "httproute"),
		Installed: st.Installed, InstallationRunning: st.InstallationRunning, InstallationFailed: st.InstallationFailed,
		Uninstalled: st.Uninstalled,
		PodsTotal:   int(st.PodsTotal), PodsReady: int(st.PodsReady), PodsAvailable: int(st.PodsAvailable),
		PodsUnavailable: int(st.PodsUnavailable), PodsRestartCountTotal: int(st.PodsRestarts),
		PodsRestartCountLastHr: int(st.PodsRestartsLastHour),
		CreatedByComponent:     "operator",
		Common: polycrate.Common{DisplayName: &display,
			Labels:      map[string]string{"polycrate_source_namespace": app.Namespace, "polycrate_source_name": app.Name},
			Annotations: map[string]string{APIAnnotationSource: app.Namespace + "/" + app.Name}},
	}
	if s.DiscoverySource != "" {
		src := s.DiscoverySource
		req.Source = &src
	}
	if app.Labels[v1.LabelDiscovered] == v1.LabelValueTrue {
		req.Labels[v1.LabelDiscovered] = v1.LabelValueTrue
	}
	if s.Block.Version != "" {
		v := s.Block.Version
		req.InstalledVersion = &v
	}
	if a := s.Action; a.Name == "install" && a.LastExecutedAt != nil {
		t := a.LastExecutedAt.UTC()
		req.LastInstallation = &t
	}
	if st.BlockID != "" {
		id := st.BlockID
		req.Block = &id
	}
	if st.PodsStatusHash != "" {
		h := st.PodsStatusHash
		req.PodsStatusHash = &h
	}
	if st.PodsStatusUpdatedAt != nil {
		t := st.PodsStatusUpdatedAt.UTC()
		req.PodsStatusUpdatedAt = &t
	}
	return req, nil
}

// Find adopts an app of the same name in the local cluster whose namespace is the
// CR's or not set (e.g. one the API created from a block instance).
func (k8sApps) Find(ctx context.Context, c *polycrate.Client, app *v1.K8sApp, req polycrate.K8sAppRequest) (string, error) {
	return findApp(ctx, c, req, func(d *polycrate.K8sApp) (bool, bool) {
		return d.Namespace != nil && *d.Namespace == app.Namespace, d.Namespace == nil || *d.Namespace == ""
	})
}

// FindOwn finds only what this CR's create would have made: an active app of its
// name in its namespace (never one the API made with no namespace, which Find
// adopts but a deletion of a never-synced CR must not retire).
func (k8sApps) FindOwn(ctx context.Context, c *polycrate.Client, app *v1.K8sApp, req polycrate.K8sAppRequest) (string, error) {
	return findApp(ctx, c, req, func(d *polycrate.K8sApp) (bool, bool) {
		return d.Namespace != nil && *d.Namespace == app.Namespace && d.Active, false
	})
}

// findApp reads the apps of the request's name in its cluster (name_exact filters
// them: a list row shows the display name as its name) and returns the first that
// match calls exact, else the first it calls a fallback.
func findApp(ctx context.Context, c *polycrate.Client, req polycrate.K8sAppRequest, match func(*polycrate.K8sApp) (exact, fallback bool)) (string, error) {
	q := polycrate.Query("name_exact", req.Name)
	if req.K8sCluster != nil {
		q.Set("k8s_cluster", *req.K8sCluster)
	}
	rows, err := c.K8sApps().List(ctx, q)
	if err != nil {
		return "", err
	}
	fallback := ""
	for _, row := range rows {
		d, err := c.K8sApps().Get(ctx, row.ID)
		if polycrate.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		exact, fb := match(d)
		switch {
		case exact:
			return d.ID, nil
		case fb && fallback == "":
			fallback = d.ID
		}
	}
	return fallback, nil
}

// Delete retires the app: an agent token may not delete K8s apps in the API, so the
// app is marked uninstalled and inactive (its history, downtimes and links stay).
func (k8sApps) Delete(ctx context.Context, c *polycrate.Client, id string) error {
	_, err := c.K8sApps().Patch(ctx, id, map[string]any{
		"active": false, "installed": false, "uninstalled": true,
		"installation_running": false, "installation_failed": false,
		"pods_total": 0, "pods_ready": 0, "pods_available": 0, "pods_unavailable": 0,
	})
	return err
}

// NeedsSync: discovery writes the pod part and the installation state into status.
func (k8sApps) NeedsSync(old, app *v1.K8sApp) bool {
	o, n := old.Status, app.Status
	return o.PodsStatusHash != n.PodsStatusHash || o.Installed != n.Installed || o.InstallationRunning != n.InstallationRunning ||
		o.InstallationFailed != n.InstallationFailed || o.Uninstalled != n.Uninstalled || o.PodsTotal != n.PodsTotal ||
		o.PodsReady != n.PodsReady || o.PodsAvailable != n.PodsAvailable || o.PodsRestarts != n.PodsRestarts ||
		o.PodsRestartsLastHour != n.PodsRestartsLastHour ||
		!equality.Semantic.DeepEqual(o.PodsStatusUpdatedAt, n.PodsStatusUpdatedAt)
}

// Prepare resolves the block ID (seed 002 "Block-ID Verknüpfung"): the workspace
// by name and organization, then the block by name in it. The lookup runs when the
// block or workspace changes, and again after BlockLookupRetry while unresolved;
// an unresolvable link is a condition, and the app is synced without it.
func (k8sApps) Prepare(ctx context.Context, c *polycrate.Client, app *v1.K8sApp) error {
	s, st := app.Spec, &app.Status
	if s.DiscoverySource != "secret" || s.Block.Name == "" || s.Workspace.Name == "" {
		st.BlockID, st.BlockLookup = "", ""
		meta.RemoveStatusCondition(&st.Conditions, v1.ConditionBlockLinked)
		return nil
	}
	key := s.Workspace.Organization + "/" + s.Workspace.Name + "/" + s.Block.Name
	if st.BlockLookup == key {
		cond := meta.FindStatusCondition(st.Conditions, v1.ConditionBlockLinked)
		if st.BlockID != "" || (cond != nil && time.Since(cond.LastTransitionTime.Time) < BlockLookupRetry) {
			return nil
		}
	}
	if c == nil {
		return polycrate.ErrNotConnected
	}
	set := func(status metav1.ConditionStatus, reason, msg string) {
		controller.SetCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionBlockLinked, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: app.Generation})
	}
	ws, err := c.FindWorkspace(ctx, s.Workspace.Name, s.Workspace.Organization)
	if err != nil {
		return err
	}
	st.BlockLookup = key
	if ws == nil {
		st.BlockID = ""
		set(metav1.ConditionFalse, v1.ReasonWorkspaceMissing, fmt.Sprintf("workspace %q of organization %q is not visible to this agent; the app is synced without a block link",
			s.Workspace.Name, s.Workspace.Organization))
		return nil
	}
	blk, err := c.FindBlock(ctx, s.Block.Name, ws.ID)
	if err != nil {
		return err
	}
	if blk == nil {
		st.BlockID = ""
		set(metav1.ConditionFalse, v1.ReasonBlockMissing, fmt.Sprintf("block %q not found in workspace %q; the app is synced without a block link",
			s.Block.Name, s.Workspace.Name))
		return nil
	}
	st.BlockID = blk.ID
	set(metav1.ConditionTrue, v1.ReasonBlockResolved, fmt.Sprintf("linked to block %s (%s in workspace %s)", blk.ID, s.Block.Name, s.Workspace.Name))
	return nil
}
