package apisync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// The sync loop without envtest or emulator: a fake adapter whose "API" is a map,
// and controller-runtime's fake client. Fast enough to run on every save.

// fakePayload is what the fake adapter sends: the natural key and the content.
type fakePayload struct {
	Key, Path string
}

// fakeAPI is the fake adapter and its API.
type fakeAPI struct {
	objects map[string]fakePayload // id → payload
	seq     int
	calls   map[string]int
	// Knobs: the next create/update answers this error (then it is cleared), the
	// payload fails with this error.
	createErr, updateErr error
	conflictCommits      bool   // a 409 on create after committing it (a retried create)
	afterList            func() // runs once, after the next LiveIDs took its snapshot
	payloadErr           error
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{objects: map[string]fakePayload{}, calls: map[string]int{}}
}

func (f *fakeAPI) Lookup(context.Context, *v1.Endpoint) (fakePayload, error) {
	return fakePayload{}, nil
}

func (f *fakeAPI) Payload(ep *v1.Endpoint, _ *liveconfig.Snapshot, _ fakePayload) (fakePayload, error) {
	if f.payloadErr != nil {
		return fakePayload{}, f.payloadErr
	}
	return fakePayload{Key: ep.Namespace + "/" + ep.Spec.RemoteAddress, Path: ep.Spec.Path}, nil
}

func (f *fakeAPI) Find(_ context.Context, _ *polycrate.Client, _ *v1.Endpoint, payload fakePayload) (string, error) {
	f.calls["find"]++
	for id, p := range f.objects {
		if p.Key == payload.Key {
			return id, nil
		}
	}
	return "", nil
}

func (f *fakeAPI) Create(_ context.Context, _ *polycrate.Client, payload fakePayload) (string, error) {
	f.calls["create"]++
	if err := f.createErr; err != nil {
		f.createErr = nil
		if f.conflictCommits {
			f.seq++
			f.objects[fmt.Sprintf("id-%d", f.seq)] = payload
		}
		return "", err
	}
	f.seq++
	id := fmt.Sprintf("id-%d", f.seq)
	f.objects[id] = payload
	return id, nil
}

func (f *fakeAPI) Update(_ context.Context, _ *polycrate.Client, id string, payload fakePayload) error {
	f.calls["update"]++
	if err := f.updateErr; err != nil {
		f.updateErr = nil
		return err
	}
	if _, ok := f.objects[id]; !ok {
		return apiErr(http.StatusNotFound)
	}
	f.objects[id] = payload
	return nil
}

func (f *fakeAPI) Exists(_ context.Context, _ *polycrate.Client, id string) (bool, error) {
	f.calls["exists"]++
	_, ok := f.objects[id]
	return ok, nil
}

func (f *fakeAPI) Delete(_ context.Context, _ *polycrate.Client, id string) error {
	f.calls["delete"]++
	if _, ok := f.objects[id]; !ok {
		return apiErr(http.StatusNotFound)
	}
	delete(f.objects, id)
	return nil
}

func (f *fakeAPI) LiveIDs(context.Context, *polycrate.Client, *liveconfig.Snapshot) (map[string]bool, error) {
	f.calls["list"]++
	out := map[string]bool{}
	for id := range f.objects {
		out[id] = true
	}
	if hook := f.afterList; hook != nil {
		f.afterList = nil
		hook()
	}
	return out, nil
}

func (f *fakeAPI) apiCalls() int {
	n := 0
	for k, v := range f.calls {
		if k != "list" {
			n += v
		}
	}
	return n
}

func apiErr(status int) error {
	return polycrate.DecodeAPIError(http.MethodPost, "/api/v1/fake/", status, http.Header{},
		[]byte(`{"type":"client_error","errors":[{"code":"x","detail":"injected","attr":null}]}`))
}

// loop is one Reconciler on a fake client and a fake API.
type loop struct {
	t    *testing.T
	r    *Reconciler[*v1.Endpoint, fakePayload]
	api  *fakeAPI
	c    client.Client
	rec  *events.FakeRecorder
	conn *polycrate.Connection
}

func newLoop(t *testing.T) *loop {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.Endpoint{}).
		WithIndex(&v1.Endpoint{}, IndexAPIID, func(o client.Object) []string {
			if id := o.(*v1.Endpoint).Status.APIID; id != "" {
				return []string{id}
			}
			return nil
		}).Build()
	conn := polycrate.NewConnection(polycrate.Options{})
	// A client the fake adapter never uses: "connected".
	if _, err := conn.Configure("http://127.0.0.1:1", "", "t"); err != nil {
		t.Fatal(err)
	}
	store := &liveconfig.Store{}
	store.Set(&liveconfig.Snapshot{Namespace: "polycrate"})
	api := newFakeAPI()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler[*v1.Endpoint, fakePayload]{Deps: controller.Deps{Client: c, Config: store, Conn: conn, Recorder: rec, Log: logr.Discard()},
		waker: controller.NewWaker(),
		Kind: Kind[*v1.Endpoint, fakePayload]{Kind: "Endpoint", Finalizer: v1.FinalizerEndpointCleanup, Adapter: api,
			New: func() *v1.Endpoint { return &v1.Endpoint{} }, NewList: func() client.ObjectList { return &v1.EndpointList{} }}}
	return &loop{t: t, r: r, api: api, c: c, rec: rec, conn: conn}
}

var uidSeq int

func (l *loop) create(ns, host string) *v1.Endpoint {
	l.t.Helper()
	uidSeq++
	ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(host, ".", "-"), UID: types.UID(fmt.Sprint("uid-", uidSeq)),
		Finalizers: []string{v1.FinalizerEndpointCleanup}}, Spec: v1.EndpointSpec{RemoteAddress: host, Path: "/"}}
	if err := l.c.Create(context.Background(), ep); err != nil {
		l.t.Fatal(err)
	}
	return ep
}

// delete deletes a CR (its finalizer keeps it until the loop releases it).
func (l *loop) delete(ep *v1.Endpoint) {
	l.t.Helper()
	if err := l.c.Delete(context.Background(), ep); err != nil {
		l.t.Fatal(err)
	}
}

func (l *loop) reconcile(ep *v1.Endpoint) (reconcile.Result, error, *v1.Endpoint) {
	l.t.Helper()
	res, err := l.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ep)})
	got := &v1.Endpoint{}
	if gerr := l.c.Get(context.Background(), client.ObjectKeyFromObject(ep), got); gerr != nil {
		got = nil
	}
	return res, err, got
}

func (l *loop) events() []string {
	var out []string
	for {
		select {
		case e := <-l.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func ready(ep *v1.Endpoint) (metav1.ConditionStatus, string) {
	if c := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionReady); c != nil {
		return c.Status, c.Reason
	}
	return "", ""
}

func hasEventWith(evs []string, s string) bool {
	for _, e := range evs {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

func TestLoopCreatesThenSkipsByHashThenUpdates(t *testing.T) {
	l := newLoop(t)
	ep := l.create("ns", "a.example.com")
	_, err, got := l.reconcile(ep)
	if err != nil || got.Status.APIID == "" || got.SyncState().Phase != v1.PhaseSynced || got.Status.ConfigHash == "" {
		t.Fatalf("first pass: %v %+v", err, got.Status)
	}
	if l.api.calls["find"] != 1 || l.api.calls["create"] != 1 {
		t.Fatalf("adopt-before-create: calls %v", l.api.calls)
	}
	before := l.api.apiCalls()
	if _, err, _ := l.reconcile(ep); err != nil || l.api.apiCalls() != before {
		t.Fatalf("an unchanged hash made API calls: %v %v", err, l.api.calls)
	}
	got.Spec.Path = "/v2"
	got.Generation++
	if err := l.c.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	_, err, got2 := l.reconcile(ep)
	if err != nil || l.api.calls["exists"] != 1 || l.api.calls["update"] != 1 || l.api.objects[got.Status.APIID].Path != "/v2" {
		t.Fatalf("update: %v %v %+v", err, l.api.calls, l.api.objects)
	}
	if got2.Status.ConfigHash == got.Status.ConfigHash || got2.Status.APIID != got.Status.APIID {
		t.Fatalf("status after update %+v", got2.Status)
	}
}

func TestLoopAdoptsByNaturalKeyAndOnConflict(t *testing.T) {
	l := newLoop(t)
	l.api.objects["pre"] = fakePayload{Key: "ns/a.example.com", Path: "/old"}
	_, err, got := l.reconcile(l.create("ns", "a.example.com"))
	if err != nil || got.Status.APIID != "pre" || l.api.calls["create"] != 0 || l.api.objects["pre"].Path != "/" {
		t.Fatalf("adopt by natural key: %v %+v %v", err, got.Status, l.api.calls)
	}
	if !hasEventWith(l.events(), v1.ReasonAdopted) {
		t.Fatal("no Adopted event")
	}

	// A 409 on create (the object was created concurrently): found and adopted.
	l.api.createErr, l.api.conflictCommits = apiErr(http.StatusConflict), true
	_, err, got = l.reconcile(l.create("ns", "b.example.com"))
	if err != nil || got.Status.APIID == "" || len(l.api.objects) != 2 {
		t.Fatalf("adopt on 409: %v %+v %v", err, got.Status, l.api.objects)
	}
}

func TestLoopRepairsAnObjectDeletedInTheAPI(t *testing.T) {
	l := newLoop(t)
	ep := l.create("ns", "a.example.com")
	_, _, got := l.reconcile(ep)
	delete(l.api.objects, got.Status.APIID)
	backdate(t, l, got)
	// An object synced while the listing paged is not in the listing, and not
	// missing: the pass must not wake it.
	l.api.afterList = func() { l.reconcile(l.create("ns", "during-the-list.example.com")) }
	l.r.Repair(context.Background())
	if l.r.waker.Queued() != 1 {
		t.Fatalf("the repair pass woke %d objects, want the one deleted in the API", l.r.waker.Queued())
	}
	_, err, again := l.reconcile(ep)
	if err != nil || again.Status.APIID == got.Status.APIID || again.Status.APIID == "" || len(l.api.objects) != 2 {
		t.Fatalf("recreate: %v %+v", err, again.Status)
	}
	if !hasEventWith(l.events(), v1.ReasonRecreated) {
		t.Fatal("no Recreated event")
	}
}

// backdate moves an object's last API write a minute back: synced before a
// repair pass's listing began.
func backdate(t *testing.T, l *loop, ep *v1.Endpoint) {
	t.Helper()
	ep.Status.LastSyncedAt = &metav1.Time{Time: time.Now().Add(-time.Minute)}
	if err := l.c.Status().Update(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
}

func TestWrittenBefore(t *testing.T) {
	listed := time.Date(2026, 12, 3, 7, 0, 0, 400_000_000, time.UTC)
	for _, c := range []struct {
		at   *metav1.Time
		want bool
	}{
		{nil, true},
		{&metav1.Time{Time: listed.Add(-time.Minute)}, true},
		{&metav1.Time{Time: listed.Add(-time.Second)}, true},
		{&metav1.Time{Time: listed.Truncate(time.Second)}, false}, // the same second, stored without its fraction
		{&metav1.Time{Time: listed.Add(time.Second)}, false},
	} {
		if got := writtenBefore(v1.SyncState{LastSyncedAt: c.at}, listed); got != c.want {
			t.Errorf("last synced %v, listing at %v: writtenBefore = %v", c.at, listed, got)
		}
	}
}

func TestLoopWaitsAndFailsByNature(t *testing.T) {
	for _, tc := range []struct {
		name        string
		setup       func(*loop)
		reason      string
		phase       string
		wantErr     bool
		requeue     bool
		apiCalls    bool
		warningSeen bool
	}{
		{"no local cluster", func(l *loop) { l.api.payloadErr = fmt.Errorf("x: %w", liveconfig.ErrNoLocalCluster) }, v1.ReasonWaitingForLocalCluster, v1.PhasePending, false, true, false, false},
		{"local cluster switched off", func(l *loop) { l.api.payloadErr = liveconfig.ErrLocalClusterDisabled }, v1.ReasonLocalClusterDisabled, v1.PhasePending, false, false, false, false},
		{"not connected", func(l *loop) { l.conn.Disconnect() }, v1.ReasonAPIUnavailable, v1.PhasePending, false, true, false, false},
		{"invalid payload", func(l *loop) { l.api.payloadErr = errors.New("bad") }, v1.ReasonInvalidSpec, v1.PhaseError, false, false, false, true},
		{"API refuses (400)", func(l *loop) { l.api.createErr = apiErr(http.StatusBadRequest) }, v1.ReasonAPIError, v1.PhaseError, false, false, true, true},
		{"API down (503)", func(l *loop) { l.api.createErr = apiErr(http.StatusServiceUnavailable) }, v1.ReasonAPIUnavailable, v1.PhaseError, true, false, true, true},
		{"token refused (401)", func(l *loop) { l.api.createErr = apiErr(http.StatusUnauthorized) }, v1.ReasonUnauthorized, v1.PhaseError, false, true, true, true},
		{"API redirects", func(l *loop) {
			l.api.createErr = &polycrate.RedirectError{Method: "POST", Path: "/api/v1/fake/", StatusCode: 301, Location: "https://elsewhere/"}
		}, v1.ReasonAPIRedirect, v1.PhaseError, false, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t)
			tc.setup(l)
			res, err, got := l.reconcile(l.create("ns", "a.example.com"))
			status, reason := ready(got)
			if status != metav1.ConditionFalse || reason != tc.reason || got.SyncState().Phase != tc.phase {
				t.Fatalf("Ready %s/%s, phase %s; want False/%s, %s", status, reason, got.SyncState().Phase, tc.reason, tc.phase)
			}
			if (err != nil) != tc.wantErr || (res.RequeueAfter > 0) != tc.requeue {
				t.Fatalf("result %+v, err %v: want err %v, requeue %v", res, err, tc.wantErr, tc.requeue)
			}
			if (l.api.apiCalls() > 0) != tc.apiCalls {
				t.Fatalf("API calls %v", l.api.calls)
			}
			if got.Status.APIID != "" {
				t.Fatalf("an id without a confirmed write: %q", got.Status.APIID)
			}
			evs := l.events()
			if hasEventWith(evs, "Warning "+tc.reason) != tc.warningSeen {
				t.Fatalf("events %v: want a Warning %s %v", evs, tc.reason, tc.warningSeen)
			}
			// The same failure again: no second event (one per transition, not per retry).
			tc.setup(l)
			_, _, _ = l.reconcile(got)
			if evs := l.events(); hasEventWith(evs, "Warning") {
				t.Fatalf("a retry repeated the event: %v", evs)
			}
		})
	}
}

func TestLoopRefusesAnObjectAnotherCRHolds(t *testing.T) {
	l := newLoop(t)
	_, _, first := l.reconcile(l.create("ns", "a.example.com"))
	// A second CR (another name) with the same natural key.
	uidSeq++
	second := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "by-hand", UID: types.UID(fmt.Sprint("uid-", uidSeq)),
		Finalizers: []string{v1.FinalizerEndpointCleanup}}, Spec: v1.EndpointSpec{RemoteAddress: "a.example.com", Path: "/mine"}}
	if err := l.c.Create(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	_, err, got := l.reconcile(second)
	if _, reason := ready(got); err != nil || reason != v1.ReasonNameCollision || l.api.objects[first.Status.APIID].Path != "/" {
		t.Fatalf("collision: %v %s %+v", err, reason, l.api.objects)
	}
	// Deleting the second never deletes the first's object.
	l.delete(got)
	if _, err, gone := l.reconcile(got); err != nil || gone != nil || len(l.api.objects) != 1 || l.api.calls["delete"] != 0 {
		t.Fatalf("delete: %v %v %v", err, gone, l.api.calls)
	}
}

func TestLoopDeletesByIDAndByNaturalKey(t *testing.T) {
	l := newLoop(t)
	ep := l.create("ns", "a.example.com")
	_, _, got := l.reconcile(ep)
	l.delete(got)
	if _, err, gone := l.reconcile(ep); err != nil || gone != nil || len(l.api.objects) != 0 {
		t.Fatalf("delete by id: %v %v %v", err, gone, l.api.objects)
	}

	// A create the API committed whose id never reached the status.
	l.api.objects["orphan"] = fakePayload{Key: "ns/b.example.com", Path: "/"}
	crashed := l.create("ns", "b.example.com")
	l.delete(crashed)
	if _, err, gone := l.reconcile(crashed); err != nil || gone != nil || len(l.api.objects) != 0 {
		t.Fatalf("delete by natural key: %v %v %v", err, gone, l.api.objects)
	}

	// Not connected while API sync is on: the deletion waits (it cannot look up).
	l.api.objects["orphan2"] = fakePayload{Key: "ns/c.example.com", Path: "/"}
	waiting := l.create("ns", "c.example.com")
	l.delete(waiting)
	l.conn.Disconnect()
	res, err, still := l.reconcile(waiting)
	if _, reason := ready(still); err != nil || still == nil || reason != v1.ReasonDeleting || res.RequeueAfter == 0 {
		t.Fatalf("waiting deletion: %v %+v %v", err, still, res)
	}
	// API sync switched off: released without an API call.
	off := false
	snap := *l.r.Config.Get()
	snap.Spec.APISync.Enabled = &off
	l.r.Config.Set(&snap)
	if _, err, gone := l.reconcile(waiting); err != nil || gone != nil {
		t.Fatalf("release with API sync off: %v %v", err, gone)
	}
	if _, ok := l.api.objects["orphan2"]; !ok {
		t.Fatal("an API call with API sync off")
	}
}

func TestLoopTransientDeleteFailureBacksOff(t *testing.T) {
	l := newLoop(t)
	ep := l.create("ns", "a.example.com")
	_, _, got := l.reconcile(ep)
	l.delete(got)
	fa := &failingDelete{fakeAPI: l.api, err: apiErr(http.StatusServiceUnavailable)}
	l.r.Kind.Adapter = fa
	if _, err, still := l.reconcile(ep); err == nil || still == nil {
		t.Fatalf("a transient delete failure must back off and keep the finalizer: %v %v", err, still)
	}
	fa.err = nil
	if _, err, gone := l.reconcile(ep); err != nil || gone != nil {
		t.Fatalf("after recovery: %v %v", err, gone)
	}
}

type failingDelete struct {
	*fakeAPI
	err error
}

func (f *failingDelete) Delete(ctx context.Context, c *polycrate.Client, id string) error {
	if f.err != nil {
		return f.err
	}
	return f.fakeAPI.Delete(ctx, c, id)
}
