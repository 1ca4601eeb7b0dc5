package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// watchStream is a watch response as the API server writes it: one JSON event
// per line. Between them: every field an Endpoint has (and one a newer server
// might add), a deletion, the streaming list's closing bookmark, and the 410 an
// expired resource version ends a watch with.
func watchStream() []byte {
	full := `{"apiVersion":"polycrate.io/v1alpha1","kind":"Endpoint","metadata":{"name":"shop-api","namespace":"shop","uid":"5b1c","resourceVersion":"77",` +
		`"generation":3,"creationTimestamp":"2026-12-02T13:00:00Z","deletionTimestamp":"2026-12-02T14:00:00Z","deletionGracePeriodSeconds":0,` +
		`"labels":{"polycrate.io/discovered":"true"},"annotations":{"a":"b"},"finalizers":["polycrate.io/endpoint-cleanup"],` +
		`"ownerReferences":[{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","name":"shop","uid":"9f","controller":true,"blockOwnerDeletion":true}],` +
		`"managedFields":[{"manager":"polycrate-operator","operation":"Apply","apiVersion":"polycrate.io/v1alpha1","time":"2026-12-02T13:00:00Z",` +
		`"fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:path":{}}}}]},` +
		`"spec":{"displayName":"Shop","remoteAddress":"api.shop.example","remotePort":8443,"kind":"http","tls":false,"path":"/health","timeout":10,` +
		`"interval":30,"expectedStatusCodes":[200,204],"expectedBody":"ok","k8sAppName":"shop","fromANewerServer":{"x":[1,2.5]}},` +
		`"status":{"phase":"Synced","apiID":"e-1","configHash":"abc","lastSyncedAt":"2026-12-02T13:00:01Z","observedGeneration":3,"message":"m",` +
		`"conditions":[{"type":"Ready","status":"True","reason":"Synced","message":"ok","lastTransitionTime":"2026-12-02T13:00:01Z","observedGeneration":3}]}}`
	var b bytes.Buffer
	for i := range 3 {
		fmt.Fprintf(&b, `{"type":"ADDED","object":%s}`+"\n", endpointJSON(i))
	}
	fmt.Fprintf(&b, `{"type":"MODIFIED","object":%s}`+"\n", full)
	b.WriteString(`{"type":"BOOKMARK","object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","metadata":{"resourceVersion":"80",` +
		`"creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"remoteAddress":""},"status":{}}}` + "\n")
	fmt.Fprintf(&b, `{"type":"DELETED","object":%s}`+"\n", endpointJSON(1))
	b.WriteString(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"too old resource version: 1 (80)","reason":"Expired","details":{"causes":[{"message":"c"}]},"code":410}}` + "\n")
	return b.Bytes()
}

// drain collects a watch's events until it ends.
func drain(w watch.Interface) []watch.Event {
	var out []watch.Event
	for ev := range w.ResultChan() {
		out = append(out, ev)
	}
	return out
}

// serveWatch answers every request with body, as the API server answers a watch.
func serveWatch(t *testing.T, body []byte) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" || !strings.HasSuffix(r.URL.Path, "/apis/polycrate.io/v1alpha1/endpoints") {
			http.Error(w, "not a watch of endpoints: "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// The one-pass watch returns, over HTTP, what client-go's watch (as
// controller-runtime's cache makes it) returns for the same stream: the same
// events, the same objects to the last field.
func TestEndpointWatchMatchesClientGo(t *testing.T) {
	cfg := serveWatch(t, watchStream())
	scheme := NewScheme()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := apiutil.RESTClientForGVK(v1.GroupVersion.WithKind("Endpoint"), false, false, cfg, serializer.NewCodecFactory(scheme), hc)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.ListOptions{Watch: true, AllowWatchBookmarks: true}
	theirs, err := rc.Get().Resource("endpoints").VersionedParams(&opts, metav1.ParameterCodec).Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lw := &endpointListWatch{list: toolscache.ToListerWatcherWithContext(&toolscache.ListWatch{}), rest: func() (rest.Interface, error) { return rc, nil }}
	ours, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, got := drain(theirs), drain(ours)
	if len(want) != 7 || len(got) != len(want) {
		t.Fatalf("client-go decoded %d events, the one-pass watch %d; want 7 of each", len(want), len(got))
	}
	for i := range want {
		if want[i].Type != got[i].Type {
			t.Fatalf("event %d: type %s, want %s", i, got[i].Type, want[i].Type)
		}
		if want[i].Type == watch.Error {
			w, g := want[i].Object.(*metav1.Status), got[i].Object.(*metav1.Status)
			if w.Code != g.Code || w.Reason != g.Reason || w.Message != g.Message || !reflect.DeepEqual(w.Details, g.Details) || w.Status != g.Status {
				t.Fatalf("ERROR event: %+v, want %+v", g, w)
			}
			if err := apierrors.FromObject(g); !apierrors.IsResourceExpired(err) {
				t.Fatalf("the reflector would not see an expired resource version in %v", err)
			}
			continue
		}
		if !reflect.DeepEqual(withoutManagedFields(want[i].Object), got[i].Object) {
			t.Fatalf("event %d (%s):\n got  %#v\n want %#v", i, want[i].Type, got[i].Object, want[i].Object)
		}
	}
	ep := got[3].Object.(*v1.Endpoint)
	if ep.Spec.RemotePort != 8443 || ep.Status.Conditions[0].Reason != "Synced" || ep.DeletionTimestamp == nil || ep.Annotations["a"] != "b" {
		t.Fatalf("the full Endpoint lost fields: %+v", ep)
	}
	// The stream has them; the one-pass decoder skips them (the cache's
	// transform would drop them).
	if len(want[0].Object.(*v1.Endpoint).ManagedFields) != 2 || len(want[3].Object.(*v1.Endpoint).ManagedFields) != 1 || ep.ManagedFields != nil {
		t.Fatalf("managedFields: client-go %v, one-pass %v; want some and none", want[3].Object.(*v1.Endpoint).ManagedFields, ep.ManagedFields)
	}
	if got[4].Object.(*v1.Endpoint).Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("the bookmark lost the end of the initial events: %+v", got[4].Object)
	}
}

// withoutManagedFields is what client-go decoded, without the managedFields the
// one-pass decoder skips.
func withoutManagedFields(o runtime.Object) runtime.Object {
	ep, ok := o.(*v1.Endpoint)
	if !ok {
		return o
	}
	ep = ep.DeepCopy()
	ep.ManagedFields = nil
	return ep
}

// fullEvent is an event decoded by the one-pass decoder's JSON decoder into
// the Endpoint type itself, managedFields included.
type fullEvent struct {
	Type   watch.EventType `json:"type"`
	Object v1.Endpoint     `json:"object"`
}

// clientGoDecoder is client-go's watch decoder for an Endpoint response
// (rest.Request's newStreamWatcher with the rest client's negotiator).
func clientGoDecoder(body io.ReadCloser) watch.Decoder {
	ns := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(NewScheme())}
	info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	return restclientwatch.NewDecoder(streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(body), info.StreamSerializer.Serializer),
		ns.DecoderToVersion(info.Serializer, v1.GroupVersion))
}

// FuzzEndpointDecoder: on any bytes, wherever client-go's decoder returns an
// Endpoint the one-pass decoder returns the same one (without its
// managedFields), and an ERROR's Status the same code, reason and message;
// where client-go fails (or returns another kind for a non-ERROR event, which
// the reflector refuses), the one-pass decoder fails too (or, for an ERROR
// event, returns a Status) — unless what fails is in the managedFields it
// skips. It takes the kind only from the keys "apiVersion" and "kind", as the
// API server writes them (client-go's kind lookup ignores their case). It
// never panics.
func FuzzEndpointDecoder(f *testing.F) {
	f.Add(watchStream())
	f.Add([]byte(`{"type":"ADDED","object":null}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Status","apiVersion":"v1","status":"Failure"}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"spec":{"remoteAddress":"x"}}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","Spec":{"remotePort":1}}}`))
	f.Add([]byte(`{"type":"NOPE","object":{}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","metadata":{"name":"a","managedFields":"x"}}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","metadata":{"name":"a"},"code":"x","details":1}}`))
	// The envelope in another order, twice a key, odd strings.
	f.Add([]byte(`{"object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","metadata":{"name":"a"}},"type":"ADDED"}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","metadata":{"name":"a"}},"object":{"kind":"Endpoint","apiVersion":"polycrate.io/v1alpha1","metadata":{"name":"b"}}}`))
	f.Add([]byte("{\"type\":\"ADDED\",\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Endpoint\",\"apiVersion\":\"polycrate.io/v1alpha1\"," +
		"\"metadata\":{\"name\":\"a\",\"name\":\"b\",\"labels\":{\"x\":\"1\",\"x\":\"\\ud800\xff\"}}}}"))
	f.Add([]byte(`{"object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"},"type":"ERROR"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		theirs := clientGoDecoder(io.NopCloser(bytes.NewReader(data)))
		ours := newEndpointDecoder(io.NopCloser(bytes.NewReader(data)))
		full := kjson.NewDecoderCaseSensitivePreserveInts(bytes.NewReader(data))
		for i := 0; i < 64; i++ {
			wt, wo, werr := theirs.Decode()
			gt, gogot, gerr := ours.Decode()
			var fe fullEvent
			ferr := full.Decode(&fe)
			wantEndpoint, isEndpoint := wo.(*v1.Endpoint)
			switch {
			case werr == nil && wt != watch.Error && isEndpoint && ferr == nil &&
				(fe.Object.APIVersion != endpointAPIVersion || fe.Object.Kind != "Endpoint"):
				// client-go finds the kind with a case-insensitive decode
				// ("ApiVersion" does); the one-pass decoder takes only the keys
				// the API server writes, and fails.
				if gerr == nil {
					t.Fatalf("event %d: no apiVersion and kind of an Endpoint, and the one-pass decoder returned %s %#v", i, gt, gogot)
				}
				return
			case werr == nil && wt != watch.Error && isEndpoint:
				if gerr != nil || gt != wt || !reflect.DeepEqual(gogot, withoutManagedFields(wantEndpoint)) {
					t.Fatalf("event %d: client-go %s %#v; one-pass %s %#v (%v)", i, wt, wo, gt, gogot, gerr)
				}
				continue
			case werr == nil && wt == watch.Error && errors.Is(gerr, errErrorAfterObject):
				return // a second "type", ERROR, after the object (errErrorAfterObject)
			case werr == nil && wt == watch.Error:
				if ws, ok := wo.(*metav1.Status); ok {
					gs, ok := gogot.(*metav1.Status)
					if gerr != nil || !ok || gs.Code != ws.Code || gs.Reason != ws.Reason || gs.Message != ws.Message {
						t.Fatalf("event %d: client-go ERROR %#v; one-pass %#v (%v)", i, ws, gogot, gerr)
					}
				}
				return // the reflector ends the watch on an ERROR
			case gerr == nil && gt != watch.Error && ferr == nil:
				// What client-go refused is not in the managedFields the
				// one-pass decoder skips: the same event with them decoded
				// decodes too.
				t.Fatalf("event %d: client-go refused it (%v, %T), the one-pass decoder returned %s %#v", i, werr, wo, gt, gogot)
			}
			return
		}
	})
}

// BenchmarkEndpointDecoder decodes a streaming list of 1,000 synced Endpoints
// as the operator leaves them, as the Endpoint informer's watch does (one op:
// the whole stream).
func BenchmarkEndpointDecoder(b *testing.B) {
	var stream bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&stream, `{"type":"ADDED","object":%s}`+"\n", endpointJSON(i))
	}
	data := stream.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		d := newEndpointDecoder(io.NopCloser(bytes.NewReader(data)))
		for range 1000 {
			if _, _, err := d.Decode(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestEndpointWatchCutMidEvent: a watch whose connection drops in the middle of
// an event (a kube-apiserver restart) ends as client-go's own watch ends there:
// without an ERROR event, so the reflector resumes from the last resource
// version instead of relisting every Endpoint.
func TestEndpointWatchCutMidEvent(t *testing.T) {
	stream := watchStream()
	whole := bytes.IndexByte(stream, '\n') + 1 // one whole event
	for _, cut := range []int{whole + 1, whole + 40, whole + bytes.IndexByte(stream[whole:], '\n') - 1} {
		for name, dec := range map[string]func(io.ReadCloser) watch.Decoder{
			"one-pass":  func(b io.ReadCloser) watch.Decoder { return newEndpointDecoder(b) },
			"client-go": func(b io.ReadCloser) watch.Decoder { return clientGoDecoder(b) },
		} {
			w := watch.NewStreamWatcher(dec(io.NopCloser(bytes.NewReader(stream[:cut]))), apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding"))
			events := drain(w)
			if len(events) != 1 || events[0].Type != watch.Added {
				t.Fatalf("%s, cut at byte %d: %d events %v; want the whole event and no ERROR", name, cut, len(events), types(events))
			}
		}
	}
	// The decoder itself returns what client-go's does at a cut: the bare errors.
	d := newEndpointDecoder(io.NopCloser(bytes.NewReader(stream[:whole+10])))
	if _, _, err := d.Decode(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Decode(); err != io.ErrUnexpectedEOF { //nolint:errorlint // client-go compares by equality
		t.Fatalf("a cut mid-event: %#v, want the bare io.ErrUnexpectedEOF", err)
	}
	d = newEndpointDecoder(io.NopCloser(bytes.NewReader(stream[:whole])))
	_, _, _ = d.Decode()
	if _, _, err := d.Decode(); err != io.EOF { //nolint:errorlint // client-go compares by equality
		t.Fatalf("a cut between events: %#v, want io.EOF", err)
	}
}

func types(events []watch.Event) []watch.EventType {
	var out []watch.EventType
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}
