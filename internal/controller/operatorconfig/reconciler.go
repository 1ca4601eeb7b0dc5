// Package operatorconfig reconciles the OperatorConfig singleton: it publishes the
// live configuration snapshot, connects the operator to the Polycrate API with the
// token from its Secret, turns the health report's answer into the workspace
// resolution, registers the local cluster, reports the operator's own version,
// and says in conditions and events what is wrong.
package operatorconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/checks/agent"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/preflight"
)

// OperatorAppName is the operator's own K8s app in the API (seed 000).
const OperatorAppName = "polycrate-operator"

// Reconciler reconciles OperatorConfig objects.
type Reconciler struct {
	controller.Deps
	// Secrets reads Secrets of the operator namespace only (never cluster-wide);
	// SecretSource watches them (the token Secret wakes the singleton).
	Secrets      client.Reader
	SecretSource source.SyncingSource
	Namespace    string
	Health       *agent.State
	Reporter     *agent.Reporter
	// Version is the operator's version; KubernetesVersion the cluster's.
	Version           string
	KubernetesVersion string
	// Errors collects errors for the API's error report.
	Errors *agent.ErrorReporter
	// SetLogLevel applies the cluster record's operator_loglevel (1 Info, 2 Debug,
	// 3 Trace; 0 = back to the --zap-log-level flag's level). Nil: not applied.
	SetLogLevel func(level int)
	// CRDs is what the last CRD installation did — on start, or its retry
	// (nil: none ran).
	CRDs *crds.Retrier
	// Preflight runs the provided-cluster checklist (nil: not run).
	Preflight PreflightSource

	logLevel int
	// lastLocal is the local cluster this process last registered. A reconcile that
	// reads a status older than its own last write (the cache lags behind) finds it
	// here instead of "adopting" the cluster it just created.
	lastLocal *v1.LocalClusterStatus
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system
// +kubebuilder:rbac:groups="",namespace=polycrate,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=polycrate,resources=pods,verbs=list

// Reconcile runs the skeleton: get, validate the singleton, then the ordered steps,
// with one status patch at the end written only when something changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	oc := &v1.OperatorConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, oc); err != nil {
		if apierrors.IsNotFound(err) && req.Namespace == r.Namespace && req.Name == v1.DefaultOperatorConfigName {
			if r.Config.Get() != nil {
				log.Info("OperatorConfig deleted: the operator discovers nothing until one exists", "namespace", r.Namespace)
			}
			r.Config.Set(nil)
			r.Conn.Disconnect()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// No finalizer: the singleton owns nothing to clean up (the API keeps the
	// cluster and the agent when the operator goes).
	patcher := r.StatusPatcher(oc)
	res, err := r.reconcile(ctx, log, oc)
	r.specCurrent(log, oc)
	// observedGeneration is set by the publish step (see there), not on success.
	_, perr := patcher.Patch(ctx, oc)
	return res, errors.Join(err, perr)
}

func (r *Reconciler) reconcile(ctx context.Context, log logr.Logger, oc *v1.OperatorConfig) (ctrl.Result, error) {
	if oc.Namespace != r.Namespace {
		r.setCondition(oc, v1.ConditionReady, metav1.ConditionFalse, v1.ReasonNotSingleton,
			fmt.Sprintf("ignored: the operator reads only the OperatorConfig %q in its namespace %q", v1.DefaultOperatorConfigName, r.Namespace))
		return ctrl.Result{}, nil
	}
	spec := oc.Spec

	// 1. Publish the configuration (live: controllers read the newest snapshot).
	// observedGeneration says exactly this: the generation every controller now
	// reads. A reconcile elsewhere acts on the snapshot current when it starts, so
	// whoever changes the configuration and waits for observedGeneration knows
	// that every reconcile from then on sees the change.
	r.publish(oc, nil)
	oc.MarkObserved()
	r.crdCondition(oc)
	r.preflightStatus(oc)

	// 2. API sync off: nothing to connect.
	if !liveconfig.Enabled(spec.APISync.Enabled) {
		r.Conn.Disconnect()
		r.setCondition(oc, v1.ConditionAPIConnected, metav1.ConditionFalse, v1.ReasonDisabled, "api_sync.enabled is false")
		r.setCondition(oc, v1.ConditionReady, metav1.ConditionTrue, v1.ReasonDisabled, "configuration accepted; API sync is disabled")
		return ctrl.Result{}, nil
	}

	// 3. The token and the connection.
	if !r.connect(ctx, oc) {
		return ctrl.Result{}, nil // the Secret watch or a spec change brings us back
	}

	// 4. The health report's answer: connected, and which workspace.
	h := r.answered(oc)
	if h == nil {
		return ctrl.Result{}, nil // the reporter retries with backoff and tells us
	}
	r.resolveWorkspace(oc, h)

	// 5. The local cluster and the operator's own app.
	result, err := r.localCluster(ctx, log, oc)
	if err != nil {
		o := controller.Classify(err)
		if r.Errors != nil {
			r.Errors.Record("local_cluster", o.Message, false)
		}
		r.setCondition(oc, v1.ConditionLocalClusterRegistered, metav1.ConditionFalse, o.Reason, o.Message)
		if polycrate.IsCircuitOpen(err) {
			// Parked: the breaker's closing wakes the OperatorConfig (no backoff,
			// no error log per retry on top of the breaker's own line).
			return ctrl.Result{RequeueAfter: controller.RequeueCircuitOpen}, nil
		}
		return ctrl.Result{}, err
	}
	r.setCondition(oc, v1.ConditionReady, metav1.ConditionTrue, v1.ReasonConnected,
		fmt.Sprintf("connected as agent of workspace %s (organization %s)", h.WorkspaceName, ptr.Deref(h.OrganizationName, "-")))
	return result, nil
}

// connect configures the API connection from the spec and the token Secret;
// false when it cannot (API connected and Ready say why).
func (r *Reconciler) connect(ctx context.Context, oc *v1.OperatorConfig) bool {
	token, reason, msg := r.token(ctx, oc.Spec.APISync.CredentialsRef)
	if reason != "" {
		r.Conn.Disconnect()
		r.setCondition(oc, v1.ConditionAPIConnected, metav1.ConditionFalse, reason, msg)
		r.setCondition(oc, v1.ConditionReady, metav1.ConditionFalse, reason, msg)
		return false
	}
	changed, err := r.Conn.Configure(oc.Spec.APISync.APIURL, oc.Spec.APISync.CACertificate, token)
	if err != nil {
		reason := v1.ReasonInvalidSpec
		if errors.Is(err, polycrate.ErrInvalidCA) {
			reason = v1.ReasonInvalidCACertificate
		}
		r.Conn.Disconnect()
		r.setCondition(oc, v1.ConditionAPIConnected, metav1.ConditionFalse, reason, err.Error())
		r.setCondition(oc, v1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
		return false
	}
	r.circuitCondition(oc)
	if changed {
		r.Reporter.ReportNow()
		// Objects that found no connection (e.g. a deletion waiting to look up its
		// API object, in the moment between publish and this step) look again now
		// rather than after their recheck interval.
		r.Config.Notify()
	}
	return true
}

// answered is the last health report's answer: the API accepted the token
// (APIConnected True); nil before the first report or after a failed one
// (the conditions say which).
func (r *Reconciler) answered(oc *v1.OperatorConfig) *polycrate.HealthResponse {
	last := r.Health.Last()
	switch {
	case last == nil || last.At.IsZero():
		// After a restart the conditions of the previous run stand until the first
		// report says otherwise (seconds): setting them Unknown and back would be two
		// status writes and reset transition times on every restart.
		if c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionAPIConnected); c == nil || c.ObservedGeneration != oc.Generation {
			r.setCondition(oc, v1.ConditionAPIConnected, metav1.ConditionUnknown, v1.ReasonWaitingForHealthReport, "waiting for the first health report")
			r.setCondition(oc, v1.ConditionReady, metav1.ConditionUnknown, v1.ReasonWaitingForHealthReport, "waiting for the first health report")
		}
		return nil
	case last.Err != nil:
		o := controller.Classify(last.Err)
		r.setCondition(oc, v1.ConditionAPIConnected, metav1.ConditionFalse, o.Reason, o.Message)
		r.setCondition(oc, v1.ConditionReady, metav1.ConditionFalse, o.Reason, o.Message)
		if oc.Status.APISync == nil {
			r.setCondition(oc, v1.ConditionWorkspaceResolved, metav1.ConditionFalse, v1.ReasonWorkspaceNotResolved, "no health report accepted yet")
		}
		return nil
	}
	h := last.Response
	r.setCondition(oc, v1.ConditionAPIConnected, metav1.ConditionTrue, v1.ReasonConnected, "health reports are accepted by "+oc.Spec.APISync.APIURL)
	return h
}

// specCurrent says which deprecated fields the spec sets and that they are
// ignored (seed 002, "Migration von älteren Versionen": an OperatorConfig of a
// version before 0.29 may keep workspace_id and organization_id, and must
// still apply). A Warning event and one log line on the transition to False.
func (r *Reconciler) specCurrent(log logr.Logger, oc *v1.OperatorConfig) {
	var ignored []string
	resolved := oc.Status.APISync
	if id := oc.Spec.APISync.WorkspaceID; id != "" {
		msg := fmt.Sprintf("api_sync.workspace_id (%s) is ignored since 0.29; the workspace comes from the token", id)
		if resolved != nil && resolved.WorkspaceID != "" {
			msg += fmt.Sprintf(" (%s, %s)", resolved.WorkspaceName, resolved.WorkspaceID)
		}
		ignored = append(ignored, msg)
	}
	if id := oc.Spec.APISync.OrganizationID; id != "" {
		msg := fmt.Sprintf("api_sync.organization_id (%s) is ignored since 0.29; the organization comes from the token", id)
		if resolved != nil && resolved.OrganizationID != "" {
			msg += fmt.Sprintf(" (%s, %s)", resolved.OrganizationName, resolved.OrganizationID)
		}
		ignored = append(ignored, msg)
	}
	if len(ignored) == 0 {
		r.setCondition(oc, v1.ConditionSpecCurrent, metav1.ConditionTrue, v1.ReasonSpecCurrent, "no deprecated field is set")
		return
	}
	msg := strings.Join(ignored, "; ") + ": remove the field from the OperatorConfig"
	if c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionSpecCurrent); c == nil || c.Status != metav1.ConditionFalse {
		log.Info("the OperatorConfig sets deprecated fields, which are ignored", "detail", msg)
	}
	r.setCondition(oc, v1.ConditionSpecCurrent, metav1.ConditionFalse, v1.ReasonDeprecatedFieldIgnored, msg)
}

// circuitCondition says whether the API connection's circuit breaker lets
// requests through.
func (r *Reconciler) circuitCondition(oc *v1.OperatorConfig) {
	st := r.Conn.Breaker().State()
	if !st.Open {
		r.setCondition(oc, v1.ConditionAPICircuitClosed, metav1.ConditionTrue, v1.ReasonCircuitClosed, "requests to the Polycrate API go through")
		return
	}
	r.setCondition(oc, v1.ConditionAPICircuitClosed, metav1.ConditionFalse, v1.ReasonCircuitOpen, fmt.Sprintf(
		"the Polycrate API failed %d times in a row (last: %s): since %s requests to it are held back and one probe at a time (at most one per %s) checks for its recovery; synced objects wait with reason %s and resume when it answers",
		st.Failures, st.Cause, st.Since.UTC().Format(time.RFC3339), polycrate.DefaultProbeMin, v1.ReasonCircuitOpen))
}

// crdCondition says what the CRD installation on start did.
func (r *Reconciler) crdCondition(oc *v1.OperatorConfig) {
	rep := r.CRDs.Report()
	switch {
	case rep == nil:
		return
	case rep.Err != nil:
		r.setCondition(oc, v1.ConditionCRDsInstalled, metav1.ConditionFalse, v1.ReasonCRDInstallFailed,
			"could not apply this operator's CRDs (running with the installed ones): "+rep.Err.Error())
	case len(rep.Skipped) > 0:
		r.setCondition(oc, v1.ConditionCRDsInstalled, metav1.ConditionFalse, v1.ReasonCRDsLeftAsInstalled,
			fmt.Sprintf("operator %s left %d CRD(s) as installed: %s", rep.Version, len(rep.Skipped), strings.Join(rep.Skipped, "; ")))
	default:
		r.setCondition(oc, v1.ConditionCRDsInstalled, metav1.ConditionTrue, v1.ReasonCRDsInstalled,
			fmt.Sprintf("applied by operator %s: %d created, %d updated, %d unchanged", rep.Version,
				rep.Counts[crds.Created], rep.Counts[crds.Updated], rep.Counts[crds.Unchanged]))
	}
}

// publish stores a new snapshot when the configuration, the local cluster or the
// cluster record's ignore list changed; clusterIgnore nil keeps the current list.
func (r *Reconciler) publish(oc *v1.OperatorConfig, clusterIgnore []string) {
	cur := r.Config.Get()
	if clusterIgnore == nil && cur != nil {
		clusterIgnore = cur.ClusterIgnoreNamespaces
	}
	next := &liveconfig.Snapshot{Namespace: oc.Namespace, Generation: oc.Generation, Spec: *oc.Spec.DeepCopy(), ClusterIgnoreNamespaces: clusterIgnore}
	if st := oc.Status.LocalCluster; st != nil {
		next.LocalClusterID = st.ClusterID
	} else if cur != nil && r.lastLocal != nil && cur.LocalClusterID == r.lastLocal.ClusterID {
		// The cached status lags behind this process's own registration (its
		// status write was refused on a conflict, or not cached yet): keep the
		// cluster rather than withdraw it until step 5 confirms it. Withdrawing
		// would send every synced object to "waiting for the local cluster" and
		// back.
		next.LocalClusterID = cur.LocalClusterID
	}
	if cur != nil && cur.Generation == next.Generation && cur.LocalClusterID == next.LocalClusterID &&
		equality.Semantic.DeepEqual(cur.Spec, next.Spec) && slices.Equal(cur.ClusterIgnoreNamespaces, next.ClusterIgnoreNamespaces) {
		return
	}
	r.Config.Set(next)
}

// token reads the agent token; a non-empty reason says why there is none. The
// message never contains the token.
func (r *Reconciler) token(ctx context.Context, ref v1.CredentialsReference) (token, reason, msg string) {
	return readToken(ctx, r.Secrets, r.Namespace, ref)
}

// readToken reads the agent token from its Secret in namespace.
func readToken(ctx context.Context, secrets client.Reader, namespace string, ref v1.CredentialsReference) (token, reason, msg string) {
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.SecretName}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", v1.ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s with the agent token does not exist (api_sync.credentials_ref.secret_name)", namespace, ref.SecretName)
		}
		return "", v1.ReasonSecretNotFound, fmt.Sprintf("cannot read Secret %s/%s: %v", namespace, ref.SecretName, err)
	}
	v, ok := s.Data[ref.TokenKey]
	if !ok {
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return "", v1.ReasonSecretKeyMissing, fmt.Sprintf("Secret %s/%s has no key %q (api_sync.credentials_ref.token_key); its keys: %s",
			namespace, ref.SecretName, ref.TokenKey, strings.Join(keys, ", "))
	}
	t := strings.TrimSpace(string(v))
	if t == "" {
		return "", v1.ReasonTokenEmpty, fmt.Sprintf("key %q of Secret %s/%s is empty", ref.TokenKey, namespace, ref.SecretName)
	}
	return t, "", ""
}

func (r *Reconciler) resolveWorkspace(oc *v1.OperatorConfig, h *polycrate.HealthResponse) {
	oc.Status.Agent = &v1.AgentStatus{AgentID: h.AgentID, PopName: h.PopName, PopID: ptr.Deref(h.PopID, ""),
		EndpointMonitoringMode: h.EndpointMonitoringMode}
	st := &v1.APISyncStatus{WorkspaceID: h.WorkspaceID, WorkspaceName: h.WorkspaceName,
		OrganizationID: ptr.Deref(h.OrganizationID, ""), OrganizationName: ptr.Deref(h.OrganizationName, "")}
	if cur := oc.Status.APISync; cur != nil && cur.ResolvedAt != nil {
		same := *cur
		same.ResolvedAt = nil
		if equality.Semantic.DeepEqual(&same, st) {
			st.ResolvedAt = cur.ResolvedAt // unchanged: keep the time of resolution, write nothing
		}
	}
	if st.ResolvedAt == nil {
		now := metav1.Now()
		st.ResolvedAt = &now
	}
	oc.Status.APISync = st
	r.setCondition(oc, v1.ConditionWorkspaceResolved, metav1.ConditionTrue, v1.ReasonResolved,
		fmt.Sprintf("workspace %s of organization %s, from the agent token", h.WorkspaceName, ptr.Deref(h.OrganizationName, "-")))
}

// localCluster registers the local cluster with the seed's idempotency rules: the
// workspace's API cluster wins; otherwise create one only when cluster_name is
// set. It then reads the cluster record's operator settings and reports the
// operator's own app.
func (r *Reconciler) localCluster(ctx context.Context, log logr.Logger, oc *v1.OperatorConfig) (ctrl.Result, error) {
	spec := oc.Spec.LocalCluster
	if !liveconfig.Enabled(spec.Enabled) {
		r.setCondition(oc, v1.ConditionLocalClusterRegistered, metav1.ConditionFalse, v1.ReasonDisabled,
			"local_cluster.enabled is false: no cluster is registered, the operator does not report its own app, and objects that belong to a cluster (K8s apps, hosts, volumes, backups, schedules, certificates) are not synced (their reason: LocalClusterDisabled)")
		return ctrl.Result{}, nil
	}
	c := r.Conn.Client()
	cluster, err := r.knownCluster(ctx, log, c, oc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cluster == nil {
		if cluster, err = r.registerCluster(ctx, log, c, oc); err != nil {
			return ctrl.Result{}, err
		}
		if cluster == nil { // none to adopt, no name to create one with
			return ctrl.Result{RequeueAfter: controller.RequeueResync}, nil
		}
	}
	r.lastLocal = oc.Status.LocalCluster.DeepCopy()
	r.setCondition(oc, v1.ConditionLocalClusterRegistered, metav1.ConditionTrue, v1.ReasonLocalClusterRegistered,
		fmt.Sprintf("registered as API cluster %s (%s)", cluster.Name, oc.Status.LocalCluster.Source))

	// The cluster record's operator settings join every discovery's ignore list and
	// set the log level.
	r.publish(oc, ignoreList(cluster.OperatorIgnoreNamespaces, cluster.DiscoveryIgnoredNamespaces))
	if lvl := logLevel(cluster.OperatorLoglevel); lvl != r.logLevel && r.SetLogLevel != nil {
		log.Info("log level from the API's cluster record", "operator_loglevel", lvl)
		r.SetLogLevel(lvl)
		r.logLevel = lvl
	}

	if err := r.operatorApp(ctx, oc, cluster.ID); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reportPreflight(ctx, log, c, cluster); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: controller.RequeueResync}, nil
}

// knownCluster is the API cluster the operator registered before (its status,
// else the last one this process saw: a status lost with a recreated
// OperatorConfig); nil when there is none or it is gone from the API.
func (r *Reconciler) knownCluster(ctx context.Context, log logr.Logger, c *polycrate.Client, oc *v1.OperatorConfig) (*polycrate.K8sCluster, error) {
	var cluster *polycrate.K8sCluster
	if st := oc.Status.LocalCluster; st != nil && st.ClusterID != "" {
		got, err := c.K8sClusters().Get(ctx, st.ClusterID)
		switch {
		case err == nil:
			cluster = got
		case polycrate.IsNotFound(err):
			log.Info("the registered cluster is gone from the API; resolving again", "clusterID", st.ClusterID)
			oc.Status.LocalCluster = nil
		default:
			return nil, err
		}
	}
	if cluster == nil && r.lastLocal != nil {
		got, err := c.K8sClusters().Get(ctx, r.lastLocal.ClusterID)
		switch {
		case err == nil:
			cluster = got
			oc.Status.LocalCluster = r.lastLocal.DeepCopy()
		case polycrate.IsNotFound(err): // gone, or another workspace after a token rotation
			r.lastLocal = nil
		default:
			return nil, err
		}
	}
	return cluster, nil
}

// registerCluster adopts the workspace's cluster or creates one named
// local_cluster.cluster_name (a concurrent create is adopted); nil, nil when
// there is none and no name to create one with (the condition says so).
func (r *Reconciler) registerCluster(ctx context.Context, log logr.Logger, c *polycrate.Client, oc *v1.OperatorConfig) (*polycrate.K8sCluster, error) {
	spec := oc.Spec.LocalCluster
	var cluster *polycrate.K8sCluster
	rows, err := c.K8sClusters().List(ctx, nil)
	if err != nil {
		return nil, err
	}
	source := "adopted"
	switch {
	case len(rows) > 0:
		cluster, err = c.K8sClusters().Get(ctx, rows[0].ID)
	case spec.ClusterName == "":
		r.setCondition(oc, v1.ConditionLocalClusterRegistered, metav1.ConditionFalse, v1.ReasonLocalClusterNotCreated,
			"the workspace has no cluster in the API and local_cluster.cluster_name is not set: none is created")
		return nil, nil
	default:
		source = "created"
		cluster, err = c.K8sClusters().Create(ctx, polycrate.K8sClusterRequest{Kind: "generic", Name: spec.ClusterName,
			KubernetesVersion: polycrate.Ptr(r.KubernetesVersion)})
		if polycrate.IsConflict(err) { // created concurrently: adopt it
			source = "adopted"
			var again []polycrate.K8sClusterRow
			if again, err = c.K8sClusters().List(ctx, nil); err == nil && len(again) > 0 {
				cluster, err = c.K8sClusters().Get(ctx, again[0].ID)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	oc.Status.LocalCluster = &v1.LocalClusterStatus{ClusterID: cluster.ID, ClusterName: cluster.Name, Source: source, RegisteredAt: &now}
	log.Info("local cluster "+source, "clusterID", cluster.ID, "name", cluster.Name)
	reason := v1.ReasonLocalClusterAdopted
	if source == "created" {
		reason = v1.ReasonLocalClusterRegistered
	}
	r.event(oc, corev1.EventTypeNormal, reason, fmt.Sprintf("local cluster %s %s (%s)", cluster.Name, source, cluster.ID))
	return cluster, nil
}

// PreflightSource is the checklist runner as the controller reads it.
type PreflightSource interface {
	Last() *preflight.Report
	Changed() <-chan struct{}
}

// preflightStatus shows the last checklist run: status.preflight and the
// condition PreflightPassed.
func (r *Reconciler) preflightStatus(oc *v1.OperatorConfig) {
	if r.Preflight == nil {
		return
	}
	rep := r.Preflight.Last()
	if rep == nil {
		return
	}
	st := &v1.PreflightStatus{Summary: rep.Summary, CheckedAt: metav1.NewTime(rep.CheckedAt), Failed: rep.Failed()}
	for _, row := range rep.Rows {
		if row.Verdict != preflight.OK {
			st.Problems = append(st.Problems, v1.PreflightProblem{Topic: row.Topic, Verdict: string(row.Verdict), Found: row.Found})
		}
	}
	oc.Status.Preflight = st
	if st.Failed {
		r.setCondition(oc, v1.ConditionPreflightPassed, metav1.ConditionFalse, v1.ReasonPreflightMissing, rep.Summary)
	} else {
		r.setCondition(oc, v1.ConditionPreflightPassed, metav1.ConditionTrue, v1.ReasonPreflightPassed, rep.Summary)
	}
}

// reportPreflight writes the checklist's summary into the API's cluster record
// (its annotations: the published cluster model has no field for it), when it
// changed.
func (r *Reconciler) reportPreflight(ctx context.Context, log logr.Logger, c *polycrate.Client, cluster *polycrate.K8sCluster) error {
	if r.Preflight == nil {
		return nil
	}
	rep := r.Preflight.Last()
	if rep == nil {
		return nil
	}
	if cur, _ := cluster.Annotations[v1.AnnotationPreflight].(string); cur == rep.Summary {
		return nil
	}
	ann := map[string]any{}
	for k, v := range cluster.Annotations {
		ann[k] = v
	}
	ann[v1.AnnotationPreflight] = rep.Summary
	ann[v1.AnnotationPreflightCheckedAt] = rep.CheckedAt.Format(time.RFC3339)
	if _, err := c.K8sClusters().Patch(ctx, cluster.ID, map[string]any{"annotations": ann}); err != nil {
		return fmt.Errorf("reporting the preflight checklist to the cluster record: %w", err)
	}
	log.Info("preflight checklist reported to the API's cluster record", "summary", rep.Summary)
	return nil
}

// OperatorPodLabel selects the operator's own Pods (the Deployment's label).
const OperatorPodLabel = "app.kubernetes.io/name"

// operatorApp reports the operator itself as the K8s app polycrate-operator with
// installed_version and its pod counts (seed 000), adopting the app where it
// exists and writing only what changed, and shows the desired version where the
// API offers one.
func (r *Reconciler) operatorApp(ctx context.Context, oc *v1.OperatorConfig, clusterID string) error {
	pods := r.podCounts(ctx)
	c := r.Conn.Client()
	row, err := c.FindK8sApp(ctx, OperatorAppName, clusterID)
	if err != nil {
		return err
	}
	var app *polycrate.K8sApp
	if row == nil {
		req := polycrate.K8sAppRequest{Name: OperatorAppName, Kind: "polycrate", K8sCluster: &clusterID,
			Namespace: polycrate.Ptr(r.Namespace), InstalledVersion: polycrate.Ptr(r.Version), Installed: true, CreatedByComponent: "operator",
			PodsTotal: pods.total, PodsReady: pods.ready, PodsAvailable: pods.ready, PodsUnavailable: pods.total - pods.ready,
			PodsRestartCountTotal: pods.restarts}
		app, err = c.K8sApps().Create(ctx, req)
	} else {
		app, err = c.K8sApps().Get(ctx, row.ID)
		if err == nil {
			patch := map[string]any{}
			if ptr.Deref(app.InstalledVersion, "") != r.Version || !app.Installed {
				patch["installed_version"], patch["installed"] = r.Version, true
			}
			if app.PodsTotal != pods.total || app.PodsReady != pods.ready || app.PodsRestartCountTotal != pods.restarts {
				patch["pods_total"], patch["pods_ready"] = pods.total, pods.ready
				patch["pods_available"], patch["pods_unavailable"] = pods.ready, pods.total-pods.ready
				patch["pods_restart_count_total"] = pods.restarts
			}
			if len(patch) > 0 {
				app, err = c.K8sApps().Patch(ctx, row.ID, patch)
			}
		}
	}
	if err != nil {
		return err
	}
	oc.Status.OperatorVersion = &v1.OperatorVersionStatus{Installed: r.Version, Desired: ptr.Deref(app.DesiredVersion, "")}
	return nil
}

type podCounts struct{ total, ready, restarts int }

// podCounts counts the operator's own Pods (uncached: a handful, read every few minutes).
func (r *Reconciler) podCounts(ctx context.Context) podCounts {
	var out podCounts
	if r.APIReader == nil {
		return out
	}
	list := &corev1.PodList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabels{OperatorPodLabel: OperatorAppName}); err != nil {
		return out
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out.total++
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out.ready++
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			out.restarts += int(cs.RestartCount)
		}
	}
	return out
}

// logLevel reads operator_loglevel (a number, or a numeric string): 1 Info, 2 Debug,
// 3 Trace; null or anything else is 0 (the flag's level).
func logLevel(v any) int {
	var n float64
	switch t := v.(type) {
	case float64:
		n = t
	case string:
		if _, err := fmt.Sscan(t, &n); err != nil {
			return 0
		}
	default:
		return 0
	}
	if n >= 1 && n <= 3 && n == float64(int(n)) {
		return int(n)
	}
	return 0
}

func ignoreList(values ...any) []string {
	out := []string{}
	for _, v := range values {
		items, _ := v.([]any)
		for _, it := range items {
			if s, ok := it.(string); ok && s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// setCondition sets a condition and emits an event when it changes: Warning for a
// failure (a switched-off part is none), Normal for a recovery.
//
// Ready repeats the failing condition's reason and message: that failure was
// announced once already (one Warning event, one error line), not twice.
func (r *Reconciler) setCondition(oc *v1.OperatorConfig, typ string, status metav1.ConditionStatus, reason, msg string) {
	announce := reason != v1.ReasonDisabled && reason != v1.ReasonLocalClusterNotCreated
	if typ == v1.ConditionReady && status == metav1.ConditionFalse {
		for _, c := range oc.Status.Conditions {
			if c.Type != v1.ConditionReady && c.Status == metav1.ConditionFalse && c.Reason == reason && c.Message == msg {
				announce = false
			}
		}
	}
	r.events().Condition(oc, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}, announce)
}

func (r *Reconciler) events() controller.Events { return r.Events("Reconcile") }

func (r *Reconciler) event(oc *v1.OperatorConfig, typ, reason, msg string) {
	r.events().Event(oc, typ, reason, msg)
}

// SetupWithManager wires the reconciler: OperatorConfigs, the token Secret (from
// the operator namespace's own cache), and the health reporter's changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// The health reporter's changes wake the singleton (a manager runnable: the
	// forwarder ends with the manager instead of outliving it).
	waker := controller.NewWaker()
	singleton := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: v1.DefaultOperatorConfigName}}
	if err := controller.OnSignal(mgr, r.Conn.Breaker().Subscribe(), func(ctx context.Context) { waker.Wake(ctx, singleton) }); err != nil {
		return err
	}
	if err := controller.OnSignal(mgr, r.Health.Changed(), func(ctx context.Context) { waker.Wake(ctx, singleton) }); err != nil {
		return err
	}
	if r.CRDs != nil {
		if err := mgr.Add(r.CRDs); err != nil {
			return err
		}
		if err := controller.OnSignal(mgr, r.CRDs.Changed(), func(ctx context.Context) { waker.Wake(ctx, singleton) }); err != nil {
			return err
		}
	}
	if r.Preflight != nil {
		if err := controller.OnSignal(mgr, r.Preflight.Changed(), func(ctx context.Context) { waker.Wake(ctx, singleton) }); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("operatorconfig").
		For(&v1.OperatorConfig{}).
		WatchesRawSource(r.SecretSource).
		WatchesRawSource(waker.Source()).
		WithOptions(r.Options()).
		Complete(r)
}
