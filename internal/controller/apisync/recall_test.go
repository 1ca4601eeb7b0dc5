package apisync

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// laggingClient answers Gets with the objects as they were when lag was taken:
// a cache that has not seen the last status patch yet.
type laggingClient struct {
	client.Client
	lag map[types.NamespacedName]client.Object
}

func (l *laggingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if old, ok := l.lag[key]; ok {
		old.DeepCopyObject().(*v1.Endpoint).DeepCopyInto(obj.(*v1.Endpoint))
		return nil
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// An event that arrives before the cache holds the status patch just made must
// not "adopt" the object this process just created (a false Adopted event, a GET
// and a PUT per object — 6 of 400 endpoints in a fault-injection run).
func TestAStaleCacheNeitherAdoptsNorWrites(t *testing.T) {
	srv, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tlsOn := true
	ep := &v1.Endpoint{}
	ep.Namespace, ep.Name, ep.UID, ep.Generation = "shop", "a-example-com", "uid-a", 1
	ep.Finalizers = []string{v1.FinalizerEndpointCleanup}
	ep.Spec = v1.EndpointSpec{RemoteAddress: "a.example.com", RemotePort: 443, Kind: "http", TLS: &tlsOn, Path: "/", Timeout: 5,
		Interval: 60, ExpectedStatusCodes: []int32{200}}
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.Endpoint{}).WithObjects(ep).
		WithIndex(&v1.Endpoint{}, IndexAPIID, func(o client.Object) []string {
			if id := o.(*v1.Endpoint).Status.APIID; id != "" {
				return []string{id}
			}
			return nil
		}).Build()
	c := &laggingClient{Client: base, lag: map[types.NamespacedName]client.Object{}}
	conn := polycrate.NewConnection(polycrate.Options{})
	if _, err := conn.Configure(ts.URL, "", emulator.DevAgentToken); err != nil {
		t.Fatal(err)
	}
	store := &liveconfig.Store{}
	store.Set(&liveconfig.Snapshot{Namespace: "polycrate"})
	rec := events.NewFakeRecorder(10)
	r := &Reconciler[*v1.Endpoint, polycrate.EndpointRequest]{Kind: Kinds(Deps{Reader: c})[0].(Kind[*v1.Endpoint, polycrate.EndpointRequest]),
		Deps: controller.Deps{Client: c, APIReader: base, Config: store, Conn: conn, Recorder: rec, Log: logr.Discard()}}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ep)}

	stale := &v1.Endpoint{}
	if err := base.Get(context.Background(), req.NamespacedName, stale); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := &v1.Endpoint{}
	if err := base.Get(context.Background(), req.NamespacedName, got); err != nil || got.Status.APIID == "" {
		t.Fatalf("first pass: id %q, err %v", got.Status.APIID, err)
	}

	c.lag[req.NamespacedName] = stale // the cache still shows the object without its status
	before := srv.Counters()["endpoints"]
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	after := srv.Counters()["endpoints"]
	if after.Reads != before.Reads || after.Writes != before.Writes {
		t.Fatalf("a stale cache cost API calls: reads %d→%d, writes %d→%d", before.Reads, after.Reads, before.Writes, after.Writes)
	}
	drain := func() (all []string) {
		for {
			select {
			case e := <-rec.Events:
				all = append(all, e)
			default:
				return all
			}
		}
	}
	for _, e := range drain() {
		if strings.Contains(e, v1.ReasonAdopted) {
			t.Fatalf("a false %s event: %s", v1.ReasonAdopted, e)
		}
	}
	if err := base.Get(context.Background(), req.NamespacedName, got); err != nil || got.Status.APIID == "" {
		t.Fatalf("the status lost its id: %q %v", got.Status.APIID, err)
	}

	// What happened without the memory: an adoption of its own object.
	r.recent.forget(ep.UID)
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	adopted := false
	for _, e := range drain() {
		adopted = adopted || strings.Contains(e, v1.ReasonAdopted)
	}
	if !adopted || srv.Counters()["endpoints"].Reads == after.Reads {
		t.Fatal("the control case did not adopt: the test no longer shows the cache lag")
	}
	if len(srv.Collisions()) != 0 {
		t.Fatalf("collisions: %v", srv.Collisions())
	}
}

func TestRecentWritesExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := recentWrites{clock: clk}
	w.put("a", write{id: "1", hash: "h"})
	if _, ok := w.get("a"); !ok {
		t.Fatal("just written, not remembered")
	}
	clk.Step(recentTTL + time.Second)
	if _, ok := w.get("a"); ok {
		t.Fatal("an old write still stands in for the cache")
	}
	for i := range 2048 {
		w.put(types.UID(strconv.Itoa(i)), write{id: "x"})
		clk.Step(recentTTL / 1000)
	}
	if n := w.cache().Len(); n > 1100 {
		t.Fatalf("%d entries: the sweep does not bound the memory", n)
	}
}

// Two API objects with one natural key (the emulator lets a test make them): the
// lookup is an error, never a guess which one to adopt or delete.
func TestFindRefusesAmbiguity(t *testing.T) {
	srv, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := polycrate.EndpointRequest{Name: "dup", RemoteAddress: "d.example.com", Kind: "http"}
	a := endpointAdapter(nil)
	if id, err := a.Find(ctx, c, &v1.Endpoint{}, req); err != nil || id != "" {
		t.Fatalf("none: %q %v", id, err)
	}
	first, err := a.Create(ctx, c, req)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.Find(ctx, c, &v1.Endpoint{}, req); err != nil || id != first {
		t.Fatalf("one: %q %v", id, err)
	}
	if _, err := a.Create(ctx, c, req); err != nil {
		t.Fatal(err)
	}
	if id, err := a.Find(ctx, c, &v1.Endpoint{}, req); err == nil || !strings.Contains(err.Error(), "2 API objects match one natural key") {
		t.Fatalf("two: %q %v", id, err)
	}
}
