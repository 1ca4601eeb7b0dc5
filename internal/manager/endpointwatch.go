package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
// from the stream (endpointDecoder): one pass.
// Everything around it stays client-go's and controller-runtime's: the request
// (rest.Request: its rate limiter, metrics and error conversion), the
// StreamWatcher, the reflector with its streaming list and bookmarks, the
// informer, the transform. docs/performance.md has the figures.
//
// Only Endpoints are watched this way: they are the one kind of the operator's
// own that counts in the tens of thousands; every other kind keeps client-go's
// decoder (built-in kinds come as protobuf anyway).

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

// endpointDecoder is a watch.Decoder of an Endpoint watch's response body. It
// reads the event's envelope token by token and decodes the object straight
// from the stream with encoding/json/v2's implementation
// (github.com/go-json-experiment/json): one pass over its bytes. The decoder
// of encoding/json's kind (sigs.k8s.io/json, what client-go's serializer uses)
// scans a value whole before it decodes it — two passes, and 2.6 times the
// time (BenchmarkEndpointDecoder: 21.6 against 8.3 ms per 1,000 Endpoints). The
// options make it read what encoding/json reads: names matched case-
// sensitively (as sigs.k8s.io/json's strict mode), duplicate names allowed
// (the last one counts) and invalid UTF-8 replaced. FuzzEndpointDecoder holds
// it to client-go's decoding.
type endpointDecoder struct {
	body io.ReadCloser
	dec  *jsontext.Decoder
}

func newEndpointDecoder(body io.ReadCloser) *endpointDecoder {
	return &endpointDecoder{body: body, dec: jsontext.NewDecoder(body, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))}
}

// Decode reads the next event. An object is returned as client-go's decoder
// returns it — a fresh *v1.Endpoint without its apiVersion and kind, or for an
// ERROR event the *metav1.Status — except that an Endpoint comes without its
// managedFields (endpointMeta).
func (d *endpointDecoder) Decode() (watch.EventType, runtime.Object, error) {
	typ, obj, raw, err := d.event()
	if err != nil {
		return "", nil, streamEnd(err)
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		if obj == nil {
			// The object came before the type (the API server writes the type
			// first), or twice: decoded now that the type is known.
			obj = &endpointWire{}
			if err := jsonv2.Unmarshal(raw, obj, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)); err != nil {
				return "", nil, err
			}
		}
		if obj.Kind != "Endpoint" || obj.APIVersion != endpointAPIVersion {
			// client-go's decoder goes by the kind: it fails on a missing or
			// unknown one, and the reflector refuses any other.
			return "", nil, fmt.Errorf("a %s watch event of %q %q in the Endpoint watch", typ, obj.APIVersion, obj.Kind)
		}
		// No apiVersion and kind, as client-go's decoder leaves it.
		return typ, &v1.Endpoint{ObjectMeta: obj.Metadata.ObjectMeta, Spec: obj.Spec, Status: obj.Status}, nil
	case watch.Error:
		// Decoded as encoding/json decodes it: its "status" is a string where an
		// Endpoint has a struct (a type error that does not stop the decoding).
		var wire endpointWire
		_ = kjson.UnmarshalCaseSensitivePreserveInts(raw, &wire)
		return typ, wire.status(), nil
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", typ)
	}
}

// streamEnd gives the end of the stream as client-go's own decoder gives it:
// the bare io.EOF and io.ErrUnexpectedEOF, which client-go's StreamWatcher
// compares by equality and takes as a dropped connection (the reflector then
// resumes its watch from the last resource version). The JSON decoder wraps
// them (a syntactic error at an offset); wrapped, the StreamWatcher reported
// an ERROR event and the reflector relisted every Endpoint — 40,000 at the
// 20,000-Ingress tier — at each kube-apiserver restart. Other read errors
// (a reset, a timeout) pass as they are: client-go's checks look into them.
func streamEnd(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF
	case errors.Is(err, io.EOF):
		return io.EOF
	}
	return err
}

// errErrorAfterObject: an event whose object was decoded as an Endpoint names
// its type a second time, as ERROR. client-go would take the object as the
// ERROR's Status; the API server never writes a type twice, nor an ERROR's
// object as an Endpoint, so the watch ends here (and the reflector watches
// anew).
var errErrorAfterObject = errors.New("a watch event's type became ERROR after its object was decoded as an Endpoint")

// event reads one event's envelope: its type, and its object — decoded when
// the type came first and is not ERROR (the API server's order), else kept raw
// for Decode.
func (d *endpointDecoder) event() (typ watch.EventType, obj *endpointWire, raw []byte, err error) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return "", nil, nil, err // io.EOF: the StreamWatcher's normal end
	}
	if tok.Kind() != '{' {
		return "", nil, nil, fmt.Errorf("a watch event is a JSON object, not %v", tok.Kind())
	}
	for d.dec.PeekKind() != '}' {
		name, err := d.dec.ReadToken()
		if err != nil {
			return "", nil, nil, err
		}
		switch name.String() {
		case "type":
			v, err := d.dec.ReadToken()
			if err != nil {
				return "", nil, nil, err
			}
			switch v.Kind() {
			case '"':
				typ = watch.EventType(v.String())
			case 'n': // null leaves it as it was
			default:
				return "", nil, nil, fmt.Errorf("a watch event's type is a string, not %v", v.Kind())
			}
			if obj != nil && typ == watch.Error {
				return "", nil, nil, errErrorAfterObject
			}
		case "object":
			if typ != "" && typ != watch.Error {
				obj, raw = &endpointWire{}, nil
				if err := jsonv2.UnmarshalDecode(d.dec, obj); err != nil {
					return "", nil, nil, err
				}
				continue
			}
			v, err := d.dec.ReadValue()
			if err != nil {
				return "", nil, nil, err
			}
			obj, raw = nil, bytes.Clone(v)
		default:
			if err := d.dec.SkipValue(); err != nil {
				return "", nil, nil, err
			}
		}
	}
	if _, err := d.dec.ReadToken(); err != nil { // '}'
		return "", nil, nil, err
	}
	return typ, obj, raw, nil
}

// Close closes the response body.
func (d *endpointDecoder) Close() { _ = d.body.Close() }

// endpointListWatch lists with a LIST decoded in one pass (endpointlist.go) and
// watches with the one-pass decoder, with the options controller-runtime's
// watch sets. With stream, the reflector takes client-go's streaming list
// instead (the initial list as this watch's events), and lists through the
// informer's own ListerWatcher only should the server not offer streaming
// lists. It lists and watches cluster-wide with no selector, as the manager's
// cache is configured for Endpoints (New: no DefaultNamespaces, no ByObject
// entry for them); a namespaced or selected Endpoint cache must not take this
// path.
type endpointListWatch struct {
	list   toolscache.ListerWatcherWithContext
	rest   func() (rest.Interface, error)
	stream bool
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
// lists and watches with the one-pass decoders (stream: client-go's streaming
// list instead of the LIST), every other is controller-runtime's. client
// returns the manager's HTTP client once it exists (nil before: a client of
// its own is built).
func endpointInformers(cfg *rest.Config, scheme *runtime.Scheme, client func() *http.Client, stream, stock bool, back func()) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
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
	gate := newAPIGate(cfg, client)
	gate.back = back
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, ok := obj.(*v1.Endpoint); ok && !stock {
			lw = &endpointListWatch{list: toolscache.ToListerWatcherWithContext(lw), rest: restClient, stream: stream}
		}
		// Every informer comes back within seconds of its API server (resilient.go).
		r := &resilientLW{inner: toolscache.ToListerWatcherWithContext(lw), gate: gate, example: obj}
		inf := toolscache.NewSharedIndexInformer(r, obj, resync, idx)
		r.store = inf.GetStore()
		return inf
	}
}
