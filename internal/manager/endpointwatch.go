package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// The Endpoint informer's watch decodes each event in one pass.
//
// What bounds a restart at 20,000 Ingresses is the initial list of the 40,000
// Endpoints, which client-go's streaming list sends as watch events, and 79 %
// of the CPU that list costs is client-go's watch decoding (make
// perf-informer -cpuprofile): it frames each event (one scan), finds its kind
// (encoding/json: a validity scan and a skipping decode), decodes the envelope
// into a WatchEvent (another scan and a decode that copies the object's bytes),
// and then does the same two steps again for the object — seven passes over
// every byte for one real decode, because the JSON serializer must handle any
// kind. The kind of this watch is known, so the event is decoded once, straight
// from the stream, by the same case-sensitive, int-preserving decoder
// client-go's JSON serializer uses (sigs.k8s.io/json): one scan, one decode.
// Everything around it stays client-go's and controller-runtime's: the request
// (rest.Request: its rate limiter, metrics and error conversion), the
// StreamWatcher, the reflector with its streaming list and bookmarks, the
// informer, the transform. docs/performance.md has the figures.
//
// Only Endpoints are watched this way: they are the one kind of the operator's
// own that counts in the tens of thousands; every other kind keeps client-go's
// decoder (built-in kinds come as protobuf anyway).

// endpointEvent is one watch event of the Endpoint watch as it is on the wire.
type endpointEvent struct {
	Type   watch.EventType `json:"type"`
	Object endpointWire    `json:"object"`
}

// endpointWire is an event's object: an Endpoint, or — in an ERROR event — a
// metav1.Status, whose fields besides "status" (a string where an Endpoint has
// a struct: an UnmarshalTypeError, ignored for ERROR events) have names of
// their own here. They are kept raw, decoded for an ERROR event only: an
// Endpoint with a field of such a name (none has one) must decode as
// client-go's decoder decodes it, which ignores them.
type endpointWire struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        endpointMeta      `json:"metadata,omitempty"`
	Spec            v1.EndpointSpec   `json:"spec"`
	Status          v1.EndpointStatus `json:"status,omitempty"`

	Message json.RawMessage `json:"message,omitempty"`
	Reason  json.RawMessage `json:"reason,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
	Code    json.RawMessage `json:"code,omitempty"`
}

// status is an ERROR event's metav1.Status. A field that does not decode is
// left empty: the reflector reads the code and reason it can.
func (o *endpointWire) status() *metav1.Status {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure}
	decodeRaw(o.Message, &st.Message)
	decodeRaw(o.Reason, &st.Reason)
	decodeRaw(o.Details, &st.Details)
	decodeRaw(o.Code, &st.Code)
	return st
}

// decodeRaw decodes raw into v when it is there; a value that does not decode
// leaves v as it was.
func decodeRaw(raw json.RawMessage, v any) {
	if len(raw) > 0 {
		_ = kjson.UnmarshalCaseSensitivePreserveInts(raw, v)
	}
}

// endpointMeta is an Endpoint's metadata without its managedFields: the field
// of the same name here hides ObjectMeta's (the shallower field wins), and its
// value is scanned past, never decoded. The cache's transform drops them from
// every object anyway (manager.go); decoding them first was half the bytes
// the decoder allocated — the server-side apply record of an Endpoint the
// operator wrote is about half its JSON (docs/performance.md).
type endpointMeta struct {
	metav1.ObjectMeta `json:",inline"`
	ManagedFields     skipped `json:"managedFields,omitempty"`
}

// skipped is a JSON value that is not decoded.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

var endpointAPIVersion = v1.GroupVersion.String()

// endpointDecoder is a watch.Decoder of an Endpoint watch's response body.
type endpointDecoder struct {
	body io.ReadCloser
	dec  kjson.Decoder
}

func newEndpointDecoder(body io.ReadCloser) *endpointDecoder {
	return &endpointDecoder{body: body, dec: kjson.NewDecoderCaseSensitivePreserveInts(body)}
}

// Decode reads the next event. An object is returned as client-go's decoder
// returns it — a fresh *v1.Endpoint without its apiVersion and kind, or for an
// ERROR event the *metav1.Status — except that an Endpoint comes without its
// managedFields (endpointMeta).
func (d *endpointDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var ev endpointEvent // fresh: decoding into a used one would merge maps
	// The decoder reads a whole value before it decodes one: a syntax error (or
	// the stream's end: io.EOF, the StreamWatcher's normal close) leaves the type
	// empty, and an ERROR event's error is its "status" (see endpointWire).
	if err := d.dec.Decode(&ev); err != nil && ev.Type != watch.Error {
		return "", nil, err
	}
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		o := &ev.Object
		if o.Kind != "Endpoint" || o.APIVersion != endpointAPIVersion {
			// client-go's decoder goes by the kind: it fails on a missing or
			// unknown one, and the reflector refuses any other.
			return "", nil, fmt.Errorf("a %s watch event of %q %q in the Endpoint watch", ev.Type, o.APIVersion, o.Kind)
		}
		// No apiVersion and kind, as client-go's decoder leaves it.
		return ev.Type, &v1.Endpoint{ObjectMeta: o.Metadata.ObjectMeta, Spec: o.Spec, Status: o.Status}, nil
	case watch.Error:
		return ev.Type, ev.Object.status(), nil
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", ev.Type)
	}
}

// Close closes the response body.
func (d *endpointDecoder) Close() { _ = d.body.Close() }

// endpointListWatch lists through the informer's own ListerWatcher (the
// paginated LIST, should the server not offer streaming lists) and watches with
// the one-pass decoder, with the options controller-runtime's watch sets. It
// watches cluster-wide with no selector, as the manager's cache is configured
// for Endpoints (New: no DefaultNamespaces, no ByObject entry for them); a
// namespaced or selected Endpoint cache must not take this path.
type endpointListWatch struct {
	list toolscache.ListerWatcherWithContext
	rest func() (rest.Interface, error)
}

func (lw *endpointListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return lw.list.ListWithContext(ctx, opts)
}

// List and Watch complete the older ListerWatcher interface.
func (lw *endpointListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

func (lw *endpointListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

func (lw *endpointListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	rc, err := lw.rest()
	if err != nil {
		return nil, err
	}
	// What controller-runtime's watch sets (its cache watches with bookmarks).
	opts.Watch, opts.AllowWatchBookmarks = true, true
	body, err := rc.Get().Resource("endpoints").VersionedParams(&opts, metav1.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeJSON).Stream(ctx)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(newEndpointDecoder(body),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// endpointInformers returns the cache's NewInformer: the Endpoint informer
// watches with the one-pass decoder, every other is controller-runtime's.
// client returns the manager's HTTP client once it exists (nil before: a
// client of its own is built).
func endpointInformers(cfg *rest.Config, scheme *runtime.Scheme, client func() *http.Client) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	gvk := v1.GroupVersion.WithKind("Endpoint")
	restClient := sync.OnceValues(func() (rest.Interface, error) {
		hc := client()
		if hc == nil {
			var err error
			if hc, err = rest.HTTPClientFor(cfg); err != nil {
				return nil, err
			}
		}
		return apiutil.RESTClientForGVK(gvk, true, false, cfg, serializer.NewCodecFactory(scheme), hc)
	})
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, ok := obj.(*v1.Endpoint); ok {
			lw = &endpointListWatch{list: toolscache.ToListerWatcherWithContext(lw), rest: restClient}
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
	}
}
