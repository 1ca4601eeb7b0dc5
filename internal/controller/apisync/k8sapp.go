package apisync

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/opconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// +kubebuilder:rbac:groups=polycrate.io,resources=k8sapps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=polycrate.io,resources=k8sapps/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=polycrate.io,resources=k8sapps/finalizers,verbs=update

// Conditions and reasons of the block link.
const (
	ConditionBlockLinked   = "BlockLinked"
	ReasonBlockResolved    = "BlockResolved"
	ReasonWorkspaceMissing = "WorkspaceNotFound"
	ReasonBlockMissing     = "BlockNotFound"
)

// BlockLookupRetry is how long an unresolvable block link waits before the next
// lookup (when nothing about the app changed).
var BlockLookupRetry = 10 * time.Minute

// K8sAppAdapter syncs K8sApp CRs to /api/v1/kubernetes/apps/ (docs/k8sapps.md).
type K8sAppAdapter struct {
	// PodDetails returns the API's pods_details for an app (from the Pod cache).
	PodDetails func(ctx context.Context, app *v1.K8sApp) any
}

// Name is the kind.
func (K8sAppAdapter) Name() string { return "k8sapp" }

// New returns an empty K8sApp.
func (K8sAppAdapter) New() *v1.K8sApp { return &v1.K8sApp{} }

// List lists every K8sApp.
func (K8sAppAdapter) List(ctx context.Context, c client.Client) ([]*v1.K8sApp, error) {
	list := &v1.K8sAppList{}
	err := c.List(ctx, list)
	return ptrs(list.Items), err
}

// Finalizer retires the API app.
func (K8sAppAdapter) Finalizer() string { return v1.FinalizerK8sAppCleanup }

// Payload maps the CR to K8sAppRequest.
func (a K8sAppAdapter) Payload(app *v1.K8sApp, snap *opconfig.Snapshot) (any, error) {
	cluster, err := snap.LocalCluster()
	if err != nil {
		return nil, err
	}
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
		CreatedByComponent: "operator",
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
	if a.PodDetails != nil {
		req.PodsDetails = a.PodDetails(context.Background(), app)
	}
	return req, nil
}

// Find adopts an app of the same name in the local cluster whose namespace is the
// CR's or not set (e.g. one the API created from a block instance).
func (K8sAppAdapter) Find(ctx context.Context, c *polycrate.Client, app *v1.K8sApp, payload any) (string, error) {
	return findApp(ctx, c, payload.(polycrate.K8sAppRequest), func(d *polycrate.K8sApp) (bool, bool) {
		return d.Namespace != nil && *d.Namespace == app.Namespace, d.Namespace == nil || *d.Namespace == ""
	})
}

// FindOwn finds only what this CR's create would have made: an active app of its
// name in its namespace (never one the API made with no namespace, which Find
// adopts but a deletion of a never-synced CR must not retire).
func (K8sAppAdapter) FindOwn(ctx context.Context, c *polycrate.Client, app *v1.K8sApp, payload any) (string, error) {
	return findApp(ctx, c, payload.(polycrate.K8sAppRequest), func(d *polycrate.K8sApp) (bool, bool) {
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

// Create creates the app.
func (K8sAppAdapter) Create(ctx context.Context, c *polycrate.Client, payload any) (string, error) {
	app, err := c.K8sApps().Create(ctx, payload.(polycrate.K8sAppRequest))
	if err != nil {
		return "", err
	}
	return app.ID, nil
}

// Update replaces the app's writable fields.
func (K8sAppAdapter) Update(ctx context.Context, c *polycrate.Client, id string, payload any) error {
	_, err := c.K8sApps().Update(ctx, id, payload.(polycrate.K8sAppRequest))
	return err
}

// Exists reads the app.
func (K8sAppAdapter) Exists(ctx context.Context, c *polycrate.Client, id string) (bool, error) {
	app, err := c.K8sApps().Get(ctx, id)
	if polycrate.IsNotFound(err) {
		return false, nil
	}
	return err == nil && !app.IsDeleted, err
}

// Delete retires the app: an agent token may not delete K8s apps in the API, so the
// app is marked uninstalled and inactive (its history, downtimes and links stay).
func (K8sAppAdapter) Delete(ctx context.Context, c *polycrate.Client, id string) error {
	_, err := c.K8sApps().Patch(ctx, id, map[string]any{
		"active": false, "installed": false, "uninstalled": true,
		"installation_running": false, "installation_failed": false,
		"pods_total": 0, "pods_ready": 0, "pods_available": 0, "pods_unavailable": 0,
	})
	return err
}

// LiveIDs lists the local cluster's apps.
func (K8sAppAdapter) LiveIDs(ctx context.Context, c *polycrate.Client, snap *opconfig.Snapshot) (map[string]bool, error) {
	q := polycrate.Query()
	if snap.LocalClusterID != "" {
		q.Set("k8s_cluster", snap.LocalClusterID)
	}
	rows, err := c.K8sApps().List(ctx, q)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(rows))
	for _, r := range rows {
		ids[r.ID] = true
	}
	return ids, nil
}

// GetState reads the K8sApp's status.
func (K8sAppAdapter) GetState(app *v1.K8sApp) State {
	s := app.Status.SyncStatus
	return State{Phase: s.Phase, APIID: s.APIID, ConfigHash: s.ConfigHash, LastSyncedAt: s.LastSyncedAt,
		Message: s.Message, Generation: s.ObservedGeneration}
}

// SetState writes it back.
func (K8sAppAdapter) SetState(app *v1.K8sApp, st State) {
	s := &app.Status.SyncStatus
	s.Phase, s.APIID, s.ConfigHash, s.LastSyncedAt, s.Message, s.ObservedGeneration =
		st.Phase, st.APIID, st.ConfigHash, st.LastSyncedAt, st.Message, st.Generation
	s.SyncStatus = strings.ToLower(st.Phase)
}

// Conditions are the K8sApp's conditions.
func (K8sAppAdapter) Conditions(app *v1.K8sApp) *[]metav1.Condition { return &app.Status.Conditions }

// PhaseName: Pending, Synced, Error as in the seed's example.
func (K8sAppAdapter) PhaseName(phase string) string { return phase }

// NeedsSync: discovery writes the pod part and the installation state into status.
func (K8sAppAdapter) NeedsSync(old, app *v1.K8sApp) bool {
	o, n := old.Status, app.Status
	return o.PodsStatusHash != n.PodsStatusHash || o.Installed != n.Installed || o.InstallationRunning != n.InstallationRunning ||
		o.InstallationFailed != n.InstallationFailed || o.Uninstalled != n.Uninstalled || o.PodsTotal != n.PodsTotal ||
		o.PodsReady != n.PodsReady || o.PodsAvailable != n.PodsAvailable || o.PodsRestarts != n.PodsRestarts ||
		!equality.Semantic.DeepEqual(o.PodsStatusUpdatedAt, n.PodsStatusUpdatedAt)
}

// Prepare resolves the block ID (seed 002 "Block-ID Verknüpfung"): the workspace
// by name and organization, then the block by name in it. The lookup runs when the
// block or workspace changes, and again after BlockLookupRetry while unresolved;
// an unresolvable link is a condition, and the app is synced without it.
func (K8sAppAdapter) Prepare(ctx context.Context, c *polycrate.Client, app *v1.K8sApp) error {
	s, st := app.Spec, &app.Status
	if s.DiscoverySource != "secret" || s.Block.Name == "" || s.Workspace.Name == "" {
		st.BlockID, st.BlockLookup = "", ""
		meta.RemoveStatusCondition(&st.Conditions, ConditionBlockLinked)
		return nil
	}
	key := s.Workspace.Organization + "/" + s.Workspace.Name + "/" + s.Block.Name
	if st.BlockLookup == key {
		cond := meta.FindStatusCondition(st.Conditions, ConditionBlockLinked)
		if st.BlockID != "" || (cond != nil && time.Since(cond.LastTransitionTime.Time) < BlockLookupRetry) {
			return nil
		}
	}
	if c == nil {
		return ErrNotConnected
	}
	set := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionBlockLinked, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: app.Generation})
	}
	ws, err := c.FindWorkspace(ctx, s.Workspace.Name, s.Workspace.Organization)
	if err != nil {
		return err
	}
	st.BlockLookup = key
	if ws == nil {
		st.BlockID = ""
		set(metav1.ConditionFalse, ReasonWorkspaceMissing, fmt.Sprintf("workspace %q of organization %q is not visible to this agent; the app is synced without a block link",
			s.Workspace.Name, s.Workspace.Organization))
		return nil
	}
	blk, err := c.FindBlock(ctx, s.Block.Name, ws.ID)
	if err != nil {
		return err
	}
	if blk == nil {
		st.BlockID = ""
		set(metav1.ConditionFalse, ReasonBlockMissing, fmt.Sprintf("block %q not found in workspace %q; the app is synced without a block link",
			s.Block.Name, s.Workspace.Name))
		return nil
	}
	st.BlockID = blk.ID
	set(metav1.ConditionTrue, ReasonBlockResolved, fmt.Sprintf("linked to block %s (%s in workspace %s)", blk.ID, s.Block.Name, s.Workspace.Name))
	return nil
}
