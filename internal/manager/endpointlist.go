package manager

import (
	"context"
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// The Endpoint informer's initial list is a LIST, decoded in one pass.
//
// client-go's default since Kubernetes 1.35 is the streaming list: the initial
// list comes as watch events on the watch that follows. For the operator's
// Endpoints a plain LIST costs less on both sides of the connection, and both
// sides share the machine's cores: the API server serves a streaming list's
// every object as an event of its own (a deep copy of the object for the
// event, its encoding, then a json.Compact of the event), a LIST as one
// collection; and the response is decoded here in one pass, straight from the
// stream, without its managedFields (the same decoding as the watch's,
// endpointwatch.go). At 40,000 Endpoints the list took 3.2 s and 2.9 s of the
// control plane's CPU, the streaming list 5.9 s and 8.0 s. What kept
// client-go's LIST out before was its memory: client-go's decoder holds the
// whole answer and every object with its managedFields until the store takes
// them (311 against 136 MiB peak); decoded here, each object is read from the
// stream into its slim form, once. docs/performance.md has the figures (make
// perf-informer).
//
// The reflector pages as it always does (a limit of 500; the API server's
// watch cache answers a first list at resourceVersion 0 whole); a later page,
// a relist after an expired watch and every error take the same path as
// client-go's LIST: the request is rest.Request's, so are its errors (a 410
// is an expired resource version to the reflector, as always).

// IsWatchListSemanticsUnSupported tells client-go's reflector to list with a
// LIST (util/watchlist): the one-pass LIST below unless the informer was made
// for the streaming list.
func (lw *endpointListWatch) IsWatchListSemanticsUnSupported() bool { return !lw.stream }

// ListWithContext lists the Endpoints: one request, decoded in one pass.
func (lw *endpointListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if lw.stream {
		return lw.list.ListWithContext(ctx, opts) // only when the server cannot stream a list
	}
	rc, err := lw.rest()
	if err != nil {
		return nil, err
	}
	body, err := rc.Get().Resource("endpoints").VersionedParams(&opts, metav1.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeJSON).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	return decodeEndpointList(body)
}

// decodeEndpointList reads an EndpointList from r: its list metadata and its
// items, each decoded straight from the stream into an Endpoint without its
// managedFields. The items keep their apiVersion and kind, as client-go's
// decoder leaves a list's items. The list is the pager's own type (the
// reflector's items are pointers, never copied again).
func decodeEndpointList(r io.Reader) (*metainternalversion.List, error) {
	dec := jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, fmt.Errorf("reading the Endpoint list: %w", err)
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("the Endpoint list is a JSON object, not %v", tok.Kind())
	}
	list := &metainternalversion.List{}
	var kind, apiVersion string
	seen := map[string]bool{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("reading the Endpoint list: %w", err)
		}
		name := tok.String() // the token is void after the next read
		if seen[name] {
			// The API server writes each once; client-go's decoder would merge a
			// second "items" into the first one's objects.
			return nil, fmt.Errorf("%w: %q", errListKeyTwice, name)
		}
		seen[name] = true
		switch name {
		case "kind":
			err = jsonv2.UnmarshalDecode(dec, &kind)
		case "apiVersion":
			err = jsonv2.UnmarshalDecode(dec, &apiVersion)
		case "metadata":
			err = jsonv2.UnmarshalDecode(dec, &list.ListMeta)
		case "items":
			list.Items, err = decodeEndpointItems(dec)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return nil, fmt.Errorf("reading the Endpoint list's %q: %w", name, err)
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return nil, fmt.Errorf("reading the Endpoint list: %w", err)
	}
	if kind != "EndpointList" || apiVersion != endpointAPIVersion {
		return nil, fmt.Errorf("a list of %q %q where the Endpoint list was expected", apiVersion, kind)
	}
	return list, nil
}

// errListKeyTwice: the list names a key twice.
var errListKeyTwice = errors.New("the Endpoint list names a key twice")

// decodeEndpointItems reads the items' array (null: none).
func decodeEndpointItems(dec *jsontext.Decoder) ([]runtime.Object, error) {
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return nil, err
	case tok.Kind() == 'n':
		return nil, nil
	case tok.Kind() != '[':
		return nil, fmt.Errorf("the items are a JSON array, not %v", tok.Kind())
	}
	var items []runtime.Object
	for dec.PeekKind() != ']' {
		var w endpointWire
		if err := jsonv2.UnmarshalDecode(dec, &w); err != nil {
			return nil, err
		}
		items = append(items, &v1.Endpoint{TypeMeta: w.TypeMeta, ObjectMeta: w.Metadata.ObjectMeta, Spec: w.Spec, Status: w.Status})
	}
	_, err = dec.ReadToken() // ']'
	return items, err
}
