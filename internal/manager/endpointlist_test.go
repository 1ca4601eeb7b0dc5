package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// listBody is an Endpoint list as the API server writes it: the list's kind
// and metadata first (its streaming encoding of collections), then the items —
// the full Endpoint of watchStream among synced ones.
func listBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","metadata":{"resourceVersion":"80","continue":"c2","remainingItemCount":7},"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(endpointJSON(i))
	}
	// The full Endpoint of the watch stream (its MODIFIED event's object).
	ev := bytes.Split(watchStream(), []byte("\n"))[3]
	full := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte(`{"type":"MODIFIED","object":`)), []byte("}"))
	b.WriteByte(',')
	b.Write(full)
	b.WriteString("]}\n")
	return b.Bytes()
}

// apiLog records the requests a fake API server answered.
type apiLog struct {
	mu   sync.Mutex
	reqs []url.Values
}

func (l *apiLog) add(q url.Values) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, q)
}

func (l *apiLog) all() []url.Values {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]url.Values(nil), l.reqs...)
}

// serveEndpoints answers a LIST of Endpoints with list (and status) — its next
// page, after listBody's continue token, with one Endpoint more — and holds a
// watch open until the client goes.
func serveEndpoints(t *testing.T, status int, list []byte) (*rest.Config, *apiLog) {
	t.Helper()
	log := &apiLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r.URL.Query())
		if !strings.HasSuffix(r.URL.Path, "/apis/polycrate.io/v1alpha1/endpoints") {
			http.Error(w, "not endpoints: "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.WriteHeader(status)
		if r.URL.Query().Get("continue") == "c2" {
			// The page after listBody's.
			_, _ = fmt.Fprintf(w, `{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","metadata":{"resourceVersion":"80"},"items":[%s]}`, endpointJSON(1000))
			return
		}
		_, _ = w.Write(list)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, log
}

// restFor is the Endpoint REST client the informer's ListerWatcher uses.
func restFor(t *testing.T, cfg *rest.Config) rest.Interface {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := apiutil.RESTClientForGVK(v1.GroupVersion.WithKind("Endpoint"), false, false, cfg, serializer.NewCodecFactory(NewScheme()), hc)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// The one-pass LIST returns, over HTTP, what client-go's LIST returns for the
// same answer: the same list metadata, the same objects to the last field but
// the managedFields it skips.
func TestEndpointListMatchesClientGo(t *testing.T) {
	cfg, _ := serveEndpoints(t, http.StatusOK, listBody(3))
	rc := restFor(t, cfg)
	var theirs v1.EndpointList
	if err := rc.Get().Resource("endpoints").Do(context.Background()).Into(&theirs); err != nil {
		t.Fatal(err)
	}
	lw := &endpointListWatch{rest: func() (rest.Interface, error) { return rc, nil }}
	obj, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := listItems(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs.Items) != 4 || len(ours) != len(theirs.Items) {
		t.Fatalf("client-go decoded %d items, the one-pass LIST %d; want 4 of each", len(theirs.Items), len(ours))
	}
	for i := range theirs.Items {
		if !reflect.DeepEqual(withoutManagedFields(&theirs.Items[i]), ours[i]) {
			t.Fatalf("item %d:\n got  %#v\n want %#v", i, ours[i], &theirs.Items[i])
		}
	}
	if len(theirs.Items[0].ManagedFields) != 2 || ours[0].(*v1.Endpoint).ManagedFields != nil {
		t.Fatal("the answer has managedFields; the one-pass LIST must skip them")
	}
	if full := ours[3].(*v1.Endpoint); full.Spec.RemotePort != 8443 || full.Status.Conditions[0].Reason != "Synced" || full.Kind != "Endpoint" {
		t.Fatalf("the full Endpoint lost fields: %+v", full)
	}
	got, err := metaOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, theirs.ListMeta) {
		t.Fatalf("list metadata %+v, want %+v", got, theirs.ListMeta)
	}
}

// listItems reads a list's items as the reflector reads them.
func listItems(obj runtime.Object) ([]runtime.Object, error) {
	return meta.ExtractListWithAlloc(obj)
}

// metaOf is a list's metadata.
func metaOf(obj runtime.Object) (metav1.ListMeta, error) {
	l, ok := obj.(*metainternalversion.List)
	if !ok {
		return metav1.ListMeta{}, fmt.Errorf("a %T, not the pager's list", obj)
	}
	return l.ListMeta, nil
}

// An error answer is client-go's error (the reflector relists from scratch on
// an expired resource version), and an answer that is no Endpoint list is an
// error, never an empty list.
func TestEndpointListErrors(t *testing.T) {
	expired := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (80)","reason":"Expired","code":410}`)
	for _, tc := range []struct {
		name   string
		status int
		body   []byte
		want   func(error) bool
	}{
		{"410 expired", http.StatusGone, expired, apierrors.IsResourceExpired},
		{"500", http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd","code":500}`), apierrors.IsInternalError},
		{"another kind", http.StatusOK, []byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`), nil},
		{"no kind", http.StatusOK, []byte(`{"metadata":{},"items":[]}`), nil},
		{"cut short", http.StatusOK, listBody(2)[:900], nil},
		{"items not an array", http.StatusOK, []byte(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","items":{}}`), nil},
		{"items twice", http.StatusOK, []byte(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","items":[],"items":[]}`), func(err error) bool { return errors.Is(err, errListKeyTwice) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := serveEndpoints(t, tc.status, tc.body)
			rc := restFor(t, cfg)
			lw := &endpointListWatch{rest: func() (rest.Interface, error) { return rc, nil }}
			obj, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
			if err == nil {
				t.Fatalf("no error; got %#v", obj)
			}
			if tc.want != nil && !tc.want(err) {
				t.Fatalf("error %v is not of the expected kind", err)
			}
		})
	}
	// An empty list is a list.
	cfg, _ := serveEndpoints(t, http.StatusOK, []byte(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","metadata":{"resourceVersion":"9"},"items":null}`))
	rc := restFor(t, cfg)
	lw := &endpointListWatch{rest: func() (rest.Interface, error) { return rc, nil }}
	obj, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := metaOf(obj); m.ResourceVersion != "9" {
		t.Fatalf("resourceVersion %q, want 9", m.ResourceVersion)
	}
}

// The manager's Endpoint informer lists with the one-pass LIST: client-go's
// reflector asks a LIST at resourceVersion 0, never a streaming list, follows
// its pages, then watches from the list's resourceVersion; its store holds the
// Endpoints of both pages, without managedFields. With stream, it asks the
// streaming list.
func TestEndpointInformerLists(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			cfg, log := serveEndpoints(t, http.StatusOK, listBody(3))
			inf := endpointInformers(cfg, NewScheme(), func() *http.Client { return nil }, stream, false, nil)(
				&toolscache.ListWatch{}, &v1.Endpoint{}, 0, toolscache.Indexers{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go inf.RunWithContext(ctx)
			if stream {
				_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					return len(log.all()) > 0, nil
				})
				if reqs := log.all(); len(reqs) == 0 || reqs[0].Get("watch") != "true" || reqs[0].Get("sendInitialEvents") != "true" {
					t.Fatalf("with stream the first request is a streaming list; got %v", reqs)
				}
				return
			}
			syncCtx, done := context.WithTimeout(ctx, 10*time.Second)
			defer done()
			if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
				t.Fatalf("the informer did not sync; requests %v", log.all())
			}
			reqs := log.all()
			if reqs[0].Get("watch") != "" || reqs[0].Get("resourceVersion") != "0" || reqs[1].Get("continue") != "c2" {
				t.Fatalf("the first requests are not a LIST at resourceVersion 0 and its next page: %v", reqs)
			}
			for _, q := range reqs {
				if q.Get("sendInitialEvents") != "" {
					t.Fatalf("a streaming list was asked for: %v", q)
				}
			}
			items := inf.GetStore().List()
			if len(items) != 5 {
				t.Fatalf("the store holds %d Endpoints, want 4 of the first page and 1 of the second", len(items))
			}
			for _, it := range items {
				if ep := it.(*v1.Endpoint); ep.ManagedFields != nil || ep.Name == "" {
					t.Fatalf("stored %+v", ep.ObjectMeta)
				}
			}
			// The watch follows from the list's resourceVersion.
			var watched url.Values
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				r := log.all()
				watched = r[len(r)-1]
				return len(r) > 1 && watched.Get("watch") == "true", nil
			}); err != nil {
				t.Fatalf("no watch after the list: %v", log.all())
			}
			if rv := watched.Get("resourceVersion"); rv != "80" {
				t.Fatalf("the watch starts at %q, want the list's 80", rv)
			}
		})
	}
}

// fullList is a list decoded with its items' managedFields (as the one-pass
// decoder's JSON decoder would, had it not skipped them).
type fullList struct {
	Kind       string        `json:"kind"`
	APIVersion string        `json:"apiVersion"`
	Items      []v1.Endpoint `json:"items"`
}

// FuzzEndpointListDecoder: on any bytes, wherever client-go's decoder returns
// an Endpoint list the one-pass decoder returns the same items (without their
// managedFields) and list metadata; where client-go fails, the one-pass
// decoder fails too — unless what fails is in the managedFields it skips. It
// takes the kind only from the keys "apiVersion" and "kind", as the API server
// writes them (client-go's kind lookup ignores their case), and refuses a key
// the list names twice (client-go merges them). It never panics.
func FuzzEndpointListDecoder(f *testing.F) {
	f.Add(listBody(2))
	f.Add([]byte(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","metadata":{},"items":null}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"a","managedFields":"x"}}],"apiVersion":"polycrate.io/v1alpha1","kind":"EndpointList"}`))
	f.Add([]byte(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","items":[null,{"spec":{"remotePort":"x"}}]}`))
	f.Add([]byte(`{"kind":"EndpointList","apiVersion":"polycrate.io/v1alpha1","items":[{"metadata":{"name":"a","name":"b"}}],"x":[1]}`))
	f.Add([]byte(`{"Kind":"EndpointList","ApiVersion":"polycrate.io/v1alpha1","items":[]}`))
	codecs := serializer.NewCodecFactory(NewScheme())
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	theirDecoder := serializer.WithoutConversionCodecFactory{CodecFactory: codecs}.DecoderToVersion(info.Serializer, v1.GroupVersion)
	f.Fuzz(func(t *testing.T, data []byte) {
		var theirs v1.EndpointList
		werr := runtime.DecodeInto(theirDecoder, data, &theirs)
		ours, gerr := decodeEndpointList(bytes.NewReader(data))
		var full fullList
		ferr := kjson.UnmarshalCaseSensitivePreserveInts(data, &full)
		switch {
		case errors.Is(gerr, errListKeyTwice):
			return
		case werr == nil && (full.Kind != "EndpointList" || full.APIVersion != endpointAPIVersion):
			if gerr == nil {
				t.Fatalf("no apiVersion and kind of an Endpoint list, and the one-pass decoder returned %#v", ours)
			}
		case werr == nil:
			if gerr != nil {
				t.Fatalf("client-go decoded %#v; the one-pass decoder failed: %v", theirs, gerr)
			}
			if len(ours.Items) != len(theirs.Items) || !reflect.DeepEqual(ours.ListMeta, theirs.ListMeta) {
				t.Fatalf("client-go %#v; one-pass %#v", theirs, ours)
			}
			for i := range theirs.Items {
				if !reflect.DeepEqual(ours.Items[i], withoutManagedFields(&theirs.Items[i])) {
					t.Fatalf("item %d: client-go %#v; one-pass %#v", i, theirs.Items[i], ours.Items[i])
				}
			}
		case gerr == nil && ferr == nil:
			t.Fatalf("client-go refused it (%v), the one-pass decoder returned %#v", werr, ours)
		}
	})
}
