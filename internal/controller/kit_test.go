package controller

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestSetConditionReportsTransitions(t *testing.T) {
	var conds []metav1.Condition
	steps := []struct {
		status     metav1.ConditionStatus
		reason     string
		msg        string
		transition bool
		prevReason string
	}{
		{metav1.ConditionTrue, "Synced", "a", true, ""},
		{metav1.ConditionTrue, "Synced", "b", false, "Synced"}, // message only
		{metav1.ConditionFalse, "APIError", "c", true, "Synced"},
		{metav1.ConditionFalse, "APIError", "c", false, "APIError"},
		{metav1.ConditionFalse, "APIUnavailable", "d", true, "APIError"}, // reason only
		{metav1.ConditionTrue, "Synced", "e", true, "APIUnavailable"},
	}
	for i, s := range steps {
		prev, got := SetCondition(&conds, metav1.Condition{Type: "Ready", Status: s.status, Reason: s.reason, Message: s.msg})
		if got != s.transition {
			t.Fatalf("step %d (%s/%s): transition %v, want %v", i, s.status, s.reason, got, s.transition)
		}
		switch {
		case s.prevReason == "" && prev != nil:
			t.Fatalf("step %d: prev %+v, want nil", i, prev)
		case s.prevReason != "" && (prev == nil || prev.Reason != s.prevReason):
			t.Fatalf("step %d: prev %+v, want reason %s (a copy of the old condition, not the updated element)", i, prev, s.prevReason)
		}
	}
	if len(conds) != 1 || conds[0].Message != "e" {
		t.Fatalf("conditions %+v", conds)
	}
}

func newFake(t *testing.T, objs ...client.Object) (client.Client, *int) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.S3Bucket{}).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	return c, &patches
}

func TestFinalizerAndStatusPatcher(t *testing.T) {
	ctx := context.Background()
	b := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", Generation: 3}}
	c, patches := newFake(t, b)
	if added, err := EnsureFinalizer(ctx, c, b, "polycrate.io/test"); err != nil || !added {
		t.Fatalf("ensure: %v %v", added, err)
	}
	if added, _ := EnsureFinalizer(ctx, c, b, "polycrate.io/test"); added {
		t.Fatal("a second ensure patched again")
	}

	p := NewStatusPatcher(c, b)
	if wrote, err := p.Done(ctx, b, false); err != nil || wrote || *patches != 0 {
		t.Fatalf("nothing changed, yet wrote=%v patches=%d err=%v", wrote, *patches, err)
	}
	b.Status.Phase = "Error"
	if wrote, err := p.Done(ctx, b, false); err != nil || !wrote || *patches != 1 {
		t.Fatalf("a change was not written: %v %d %v", wrote, *patches, err)
	}
	got := &v1.S3Bucket{}
	_ = c.Get(ctx, client.ObjectKeyFromObject(b), got)
	if got.Status.Phase != "Error" || got.Status.ObservedGeneration != 0 {
		t.Fatalf("status %+v: observedGeneration must wait for a success", got.Status)
	}
	b.Status.Phase = "Ready"
	if _, err := p.Done(ctx, b, true); err != nil {
		t.Fatal(err)
	}
	_ = c.Get(ctx, client.ObjectKeyFromObject(b), got)
	if got.Status.ObservedGeneration != 3 || !slices.Contains(got.Finalizers, "polycrate.io/test") {
		t.Fatalf("after success: %+v %v", got.Status, got.Finalizers)
	}
	// The answer is metadata only; its resourceVersion is the object's now.
	if b.ResourceVersion == "" || b.ResourceVersion != got.ResourceVersion {
		t.Fatalf("resourceVersion after the patch: %q, the API's %q", b.ResourceVersion, got.ResourceVersion)
	}

	if err := RemoveFinalizer(ctx, c, b, "polycrate.io/test"); err != nil || len(b.Finalizers) != 0 {
		t.Fatalf("remove: %v %v", err, b.Finalizers)
	}
	_ = c.Delete(ctx, b)
	b.Status.Phase = "Pending"
	if _, err := p.Patch(ctx, b); err != nil {
		t.Fatalf("a gone object is no error: %v", err)
	}
}

func TestEventsAnnounceTransitionsOnly(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	e := Events{Recorder: rec, Action: "Test"}
	b := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	drain := func() (out []string) {
		for {
			select {
			case ev := <-rec.Events:
				out = append(out, ev)
			default:
				return out
			}
		}
	}
	steps := []struct {
		status   metav1.ConditionStatus
		reason   string
		announce bool
		want     string // the event's start, "" for none
	}{
		{metav1.ConditionFalse, "Waiting", false, ""}, // a wait is no failure
		{metav1.ConditionFalse, "APIError", true, "Warning APIError"},
		{metav1.ConditionFalse, "APIError", true, ""},           // a retry that changes nothing
		{metav1.ConditionTrue, "Synced", true, "Normal Synced"}, // a recovery
		{metav1.ConditionTrue, "Synced", true, ""},
	}
	for i, s := range steps {
		e.Ready(b, s.status, s.reason, "m", s.announce)
		got := drain()
		switch {
		case s.want == "" && len(got) != 0, s.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], s.want)):
			t.Fatalf("step %d: events %v, want %q", i, got, s.want)
		}
	}
	e.Condition(b, metav1.Condition{Type: "APIConnected", Status: metav1.ConditionFalse, Reason: "Unreachable", Message: "down"}, true)
	if got := drain(); len(got) != 1 || !strings.Contains(got[0], "APIConnected: down") {
		t.Fatalf("a non-Ready condition's event names its type: %v", got)
	}
}

func TestClassify(t *testing.T) {
	apiErr := func(status int) error {
		return polycrate.DecodeAPIError(http.MethodPost, "/api/v1/x/", status, http.Header{"Retry-After": []string{"7"}},
			[]byte(`{"type":"client_error","errors":[{"code":"x","detail":"d","attr":null}]}`))
	}
	for _, tc := range []struct {
		name    string
		err     error
		reason  string
		failed  bool
		backoff bool
		after   time.Duration
	}{
		{"waiting", Waiting("WaitingForLocalCluster", "m", RequeueLocalCluster), "WaitingForLocalCluster", false, false, RequeueLocalCluster},
		{"permanent", Permanent("InvalidSpec", "m"), "InvalidSpec", true, false, 0},
		{"503", apiErr(503), v1.ReasonAPIUnavailable, true, false, 7 * time.Second}, // the Retry-After
		{"400", apiErr(400), v1.ReasonAPIError, true, false, 0},
		{"401", apiErr(401), v1.ReasonUnauthorized, true, false, RequeueResync},
		{"403", apiErr(403), v1.ReasonForbidden, true, false, RequeueResync},
		{"redirect", &polycrate.RedirectError{Method: "GET", Path: "/", StatusCode: 301, Location: "x"}, v1.ReasonAPIRedirect, true, false, 0},
		{"no answer", &polycrate.TransportError{Err: errors.New("refused")}, v1.ReasonUnreachable, true, true, 0},
		{"an untrusted certificate", &polycrate.TransportError{Err: &url.Error{Op: "Get", URL: "https://x", Err: x509.UnknownAuthorityError{}}}, v1.ReasonInvalidCACertificate, true, false, 0},
		{"a remote's 401", Remote("the cluster", "spec.caCertificate", apierrors.NewUnauthorized("no")), v1.ReasonUnauthorized, true, false, RequeueResync},
		{"a remote's 403", Remote("the cluster", "spec.caCertificate", apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no"))), v1.ReasonForbidden, true, false, RequeueResync},
		{"a remote not answering", Remote("the cluster", "spec.caCertificate", &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}), v1.ReasonUnreachable, true, true, 0},
		{"a remote's certificate", Remote("the cluster", "spec.caCertificate", errors.New("Get https://x: tls: failed to verify certificate: x509: certificate signed by unknown authority")), v1.ReasonInvalidCACertificate, true, false, 0},
		{"a local Kubernetes 403 is no API credential", apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no")), v1.ReasonAPIError, true, true, 0},
		{"a local Kubernetes dial error is not the API unreachable", &url.Error{Op: "Get", URL: "https://10.0.0.1", Err: errors.New("refused")}, v1.ReasonAPIError, true, true, 0},
		{"wrapped permanent", fmt.Errorf("step: %w", Permanent("NameCollision", "m")), "NameCollision", true, false, 0},
		{"a Kubernetes read", errors.New("etcd timeout"), v1.ReasonAPIError, true, true, 0},
	} {
		o := Classify(tc.err)
		if o.Reason != tc.reason || o.Failed != tc.failed || (o.Err != nil) != tc.backoff || o.Result.RequeueAfter != tc.after {
			t.Errorf("%s: %+v", tc.name, o)
		}
		// The message names the peer: the cluster for a remote's failure, the
		// API for the API's connection and credentials.
		switch {
		case strings.HasPrefix(tc.name, "a remote"):
			if !strings.HasPrefix(o.Message, "the cluster") {
				t.Errorf("%s: message %q does not name the cluster", tc.name, o.Message)
			}
			if tc.reason == v1.ReasonInvalidCACertificate && !strings.Contains(o.Message, "spec.caCertificate") {
				t.Errorf("%s: message %q does not say where the CA goes", tc.name, o.Message)
			}
		case tc.reason == v1.ReasonUnreachable || tc.reason == v1.ReasonForbidden || tc.reason == v1.ReasonInvalidCACertificate:
			if !strings.HasPrefix(o.Message, "the Polycrate API") {
				t.Errorf("%s: message %q does not name the API", tc.name, o.Message)
			}
		}
	}
}

func TestSnapshotWaits(t *testing.T) {
	store := &liveconfig.Store{}
	d := Deps{Config: store}
	enabled := func(s *liveconfig.Snapshot) *bool { return s.Spec.APISync.Enabled }
	reason := func() string {
		_, err := d.Snapshot("api_sync", enabled, "nothing happens")
		if err == nil {
			return "acts"
		}
		return Classify(err).Reason
	}
	if got := reason(); got != "" {
		t.Fatalf("just started: %q, want a silent wait", got)
	}
	store.MarkLoaded()
	if got := reason(); got != v1.ReasonOperatorConfigMissing {
		t.Fatalf("no OperatorConfig: %q", got)
	}
	off := false
	snap := &liveconfig.Snapshot{}
	snap.Spec.APISync.Enabled = &off
	store.Set(snap)
	if got := reason(); got != v1.ReasonDisabled {
		t.Fatalf("switched off: %q", got)
	}
	snap2 := *snap
	snap2.Spec.APISync.Enabled = nil // the default is on
	store.Set(&snap2)
	if got := reason(); got != "acts" {
		t.Fatalf("on: %q", got)
	}
}

func TestFailureIsLoggedAndCountedOnce(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	e := Events{Recorder: events.NewFakeRecorder(10), Action: "Test", Log: log}
	b := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "counted"}}
	count := func() float64 { return promtestutil.ToFloat64(failures.WithLabelValues("S3Bucket", "QuotaExceeded")) }
	before := count()
	e.Ready(b, metav1.ConditionFalse, "QuotaExceeded", "no room", true)
	e.Ready(b, metav1.ConditionFalse, "QuotaExceeded", "no room", true) // a retry
	if got := count() - before; got != 1 {
		t.Fatalf("counted %v failures, want 1 (a transition, not a retry)", got)
	}
	// One error-level line (funcr: an "error" field, no "level"), once.
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg"="S3Bucket test failed"`) || !strings.Contains(lines[0], `"error"="no room"`) ||
		strings.Contains(lines[0], `"level"=`) || !strings.Contains(lines[0], `"kind"="S3Bucket"`) ||
		!strings.Contains(lines[0], `"name"="counted"`) || !strings.Contains(lines[0], `"reason"="QuotaExceeded"`) {
		t.Fatalf("log lines %q", lines)
	}
	e.Ready(b, metav1.ConditionTrue, "Ready", "ok", true)
	if len(lines) != 2 || !strings.Contains(lines[1], `"msg"="recovered"`) {
		t.Fatalf("no recovery line: %q", lines)
	}
	if got := count() - before; got != 1 {
		t.Fatalf("a recovery counted as a failure: %v", got)
	}
}

// The status patch is the difference of the status stanzas only: a field that
// changed, a field that went (null), nothing of metadata or spec; a status that
// did not change is no patch at all, whatever else changed.
func TestStatusPatchCarriesTheStatusOnly(t *testing.T) {
	before := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", Labels: map[string]string{"a": "1"}}}
	before.Status.Phase, before.Status.Message = "Pending", "waiting for the API"
	after := before.DeepCopy()
	after.Labels["a"] = "2"
	after.Spec.Region = "eu-central-1"
	if _, changed, err := statusPatch(copyStatus(before), after); err != nil || changed {
		t.Fatalf("status unchanged, yet changed=%v (%v)", changed, err)
	}
	after.Status.Phase, after.Status.Message = "Synced", ""
	patch, changed, err := statusPatch(copyStatus(before), after)
	if err != nil || !changed {
		t.Fatalf("a status change was not seen: %v", err)
	}
	data, err := patch.Data(after)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"status": map[string]any{"phase": "Synced", "message": nil}}
	if !reflect.DeepEqual(got, want) || patch.Type() != types.MergePatchType {
		t.Fatalf("patch %s (%s), want %v", data, patch.Type(), want)
	}
}

// The patcher keeps a deep copy of the status only: a change made in place
// (a condition's message in its slice, a time behind a pointer) is a change,
// and a kind without a Status field is compared whole.
func TestStatusCopyIsDeep(t *testing.T) {
	now := metav1.Now()
	ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}}
	ep.Status = v1.EndpointStatus{Phase: v1.PhaseSynced, LastSyncedAt: &now,
		Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonSynced, Message: "synced"}}}
	for name, change := range map[string]func(*v1.Endpoint){
		"a condition in place":    func(e *v1.Endpoint) { e.Status.Conditions[0].Message = "changed" },
		"a time behind a pointer": func(e *v1.Endpoint) { e.Status.LastSyncedAt.Time = e.Status.LastSyncedAt.Add(time.Hour) },
		"a scalar":                func(e *v1.Endpoint) { e.Status.Phase = v1.PhaseError },
	} {
		obj := ep.DeepCopy()
		before := copyStatus(obj)
		if before.whole != nil || !before.status.IsValid() {
			t.Fatalf("%s: the Endpoint's status was not copied on its own", name)
		}
		if _, changed, err := statusPatch(before, obj); err != nil || changed {
			t.Fatalf("%s: unchanged, yet changed=%v (%v)", name, changed, err)
		}
		change(obj)
		if _, changed, err := statusPatch(before, obj); err != nil || !changed {
			t.Fatalf("%s: the change was not seen (%v)", name, err)
		}
	}

	// A kind without a Status field: the whole object.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"a": "1"}}
	before := copyStatus(cm)
	if before.whole == nil {
		t.Fatal("a ConfigMap has no status to copy, yet the whole object was not kept")
	}
	cm.Data["a"] = "2"
	if _, changed, err := statusPatch(before, cm); err != nil || !changed {
		t.Fatalf("a change of a kind without status was not seen (%v)", err)
	}
}

// BenchmarkStatusPatcherUnchanged is an unchanged Endpoint's status check, as
// each of the 40,000 syncs of a restart at scale makes it.
func BenchmarkStatusPatcherUnchanged(b *testing.B) {
	ep := benchEP()
	c := fake.NewClientBuilder().Build()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p := NewStatusPatcher(c, ep)
		if wrote, err := p.Patch(ctx, ep); wrote || err != nil {
			b.Fatal(wrote, err)
		}
	}
}

func benchEP() *v1.Endpoint {
	now := metav1.Now()
	ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "perf", Name: "h0-app-00001", Labels: map[string]string{v1.LabelDiscovered: "true"},
		Finalizers: []string{v1.FinalizerEndpointCleanup}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "app-00001", UID: "u"}}},
		Spec: v1.EndpointSpec{DisplayName: "h0.app-00001.example.com", RemoteAddress: "h0.app-00001.example.com", RemotePort: 443, Kind: "http", Path: "/", Timeout: 5, Interval: 60, ExpectedStatusCodes: []int32{200}},
		Status: v1.EndpointStatus{Phase: v1.PhaseSynced, APIID: "00000000-0000-4000-8000-000000000001", ConfigHash: "0123456789abcdef", LastSyncedAt: &now, ObservedGeneration: 1,
			Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonSynced, Message: "synced to the Polycrate API as 00000000-0000-4000-8000-000000000001", LastTransitionTime: now, ObservedGeneration: 1}}}}
	return ep
}

func TestRebaseConditions(t *testing.T) {
	c := func(typ, status string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: "R" + status}
	}
	for _, tc := range []struct {
		name                      string
		before, mine, fresh, want []metav1.Condition
	}{
		{"a changed type over another writer's new one",
			[]metav1.Condition{c("Ready", "False")}, []metav1.Condition{c("Ready", "True")},
			[]metav1.Condition{c("Ready", "False"), c("Available", "True")},
			[]metav1.Condition{c("Ready", "True"), c("Available", "True")}},
		{"a new type appended",
			nil, []metav1.Condition{c("Ready", "True")}, []metav1.Condition{c("Available", "False")},
			[]metav1.Condition{c("Available", "False"), c("Ready", "True")}},
		{"a removed type removed, the other's kept",
			[]metav1.Condition{c("Ready", "True")}, nil, []metav1.Condition{c("Ready", "True"), c("Available", "True")},
			[]metav1.Condition{c("Available", "True")}},
		{"an untouched type is the fresh one's, not the stale copy's",
			[]metav1.Condition{c("Ready", "True"), c("Available", "True")},
			[]metav1.Condition{c("Ready", "False"), c("Available", "True")},
			[]metav1.Condition{c("Ready", "True"), c("Available", "False")},
			[]metav1.Condition{c("Ready", "False"), c("Available", "False")}},
		{"another writer removed a type this one left alone",
			[]metav1.Condition{c("Ready", "True"), c("Available", "True")},
			[]metav1.Condition{c("Ready", "False"), c("Available", "True")},
			[]metav1.Condition{c("Ready", "True")},
			[]metav1.Condition{c("Ready", "False")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rebaseConditions(tc.before, tc.mine, tc.fresh)
			if !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStatusPatcherLocksConditionChanges: a status write that changes the
// conditions carries the resourceVersion it was computed from (and is laid over
// a fresh read after a conflict); one that leaves them alone carries none (a
// merge of fields only this writer owns cannot erase another's).
func TestStatusPatcherLocksConditionChanges(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}}
	var bodies []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.Endpoint{}).WithObjects(ep).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			data, _ := p.Data(obj)
			bodies = append(bodies, string(data))
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	stale := &v1.Endpoint{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ep), stale); err != nil {
		t.Fatal(err)
	}
	// Another writer sets Available.
	other := stale.DeepCopy()
	other.Status.Conditions = []metav1.Condition{{Type: v1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "CheckSucceeded", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	// This writer, from the stale copy: a field of its own only.
	mine := stale.DeepCopy()
	p := Deps{Client: c}.StatusPatcher(mine)
	mine.Status.Message = "m"
	if _, err := p.Patch(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(bodies[len(bodies)-1], "resourceVersion") || strings.Contains(bodies[len(bodies)-1], "conditions") {
		t.Fatalf("a write of a field of its own carried %s", bodies[len(bodies)-1])
	}
	// And Ready, still from the stale copy's conditions.
	SetCondition(&mine.Status.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced"})
	if _, err := p.Patch(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bodies[len(bodies)-2], `"resourceVersion"`) {
		t.Fatalf("a change of the conditions was written without a precondition: %s", bodies[len(bodies)-2])
	}
	got := &v1.Endpoint{}
	_ = c.Get(ctx, client.ObjectKeyFromObject(ep), got)
	if len(got.Status.Conditions) != 2 || got.Status.Message != "m" {
		t.Fatalf("after the rebase: %+v (writes %q)", got.Status, bodies)
	}
	if len(mine.Status.Conditions) != 2 || mine.ResourceVersion != got.ResourceVersion {
		t.Fatalf("the writer's copy is not what it wrote: %+v rv %s/%s", mine.Status.Conditions, mine.ResourceVersion, got.ResourceVersion)
	}
}
