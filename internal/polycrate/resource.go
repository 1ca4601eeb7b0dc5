package polycrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Resource is one standard ("ManagedObject") collection of the API: D is the
// detail model, L the list row, R the create/update body.
type Resource[D any, L any, R any] struct {
	c    *Client
	name string // metrics label
	path string // collection path with trailing slash
}

func newResource[D any, L any, R any](c *Client, name, path string) Resource[D, L, R] {
	return Resource[D, L, R]{c: c, name: name, path: path}
}

// Path is the collection path.
func (r Resource[D, L, R]) Path() string { return r.path }

// deletedProbe reads the soft-delete marker of any detail answer.
type deletedProbe struct {
	IsDeleted bool `json:"is_deleted"`
}

// Get reads one object. A soft-deleted object (is_deleted) is reported as 404: for
// the operator it is gone.
func (r Resource[D, L, R]) Get(ctx context.Context, id string) (*D, error) {
	path := r.path + url.PathEscape(id) + "/"
	b, err := r.c.do(ctx, call{resource: r.name, method: http.MethodGet, path: path})
	if err != nil {
		return nil, err
	}
	var probe deletedProbe
	if json.Unmarshal(b, &probe) == nil && probe.IsDeleted {
		return nil, &APIError{Method: http.MethodGet, Path: path, StatusCode: http.StatusNotFound, Type: "client_error",
			Errors: []ErrorItem{{Code: "not_found", Detail: "The object is deleted (is_deleted)."}}}
	}
	out := new(D)
	return out, decode(b, out, http.MethodGet, path)
}

// List reads every page of the collection with the given filters, leaving out
// rows marked is_deleted.
func (r Resource[D, L, R]) List(ctx context.Context, query url.Values) ([]L, error) {
	raw, err := listAll[json.RawMessage](ctx, r.c, r.name, r.path, query)
	if err != nil {
		return nil, err
	}
	out := make([]L, 0, len(raw))
	for _, m := range raw {
		var probe deletedProbe
		if json.Unmarshal(m, &probe) == nil && probe.IsDeleted {
			continue
		}
		var row L
		if err := decode(m, &row, http.MethodGet, r.path); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// Create creates an object (201). An answer without an id is an error: a create
// counts as done only when the API confirmed it with the new object's id.
func (r Resource[D, L, R]) Create(ctx context.Context, req R) (*D, error) {
	out := new(D)
	return out, r.c.create(ctx, r.name, r.path, req, out)
}

// create POSTs a new object and decodes the answer, which must carry its id.
func (c *Client) create(ctx context.Context, resource, path string, body, out any) error {
	b, err := c.do(ctx, call{resource: resource, method: http.MethodPost, path: path, body: body,
		accept: []int{http.StatusOK, http.StatusCreated}})
	if err != nil {
		return err
	}
	if err := requireID(b, http.MethodPost, path); err != nil {
		return err
	}
	return decode(b, out, http.MethodPost, path)
}

// requireID fails unless a write's answer names the object's id.
func requireID(b []byte, method, path string) error {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return &DecodeError{Method: method, Path: path, Err: err}
	}
	if id := strings.Trim(string(probe.ID), `"`); id == "" || id == "null" {
		return &DecodeError{Method: method, Path: path, Err: errors.New("the answer carries no id, so the write is not confirmed")}
	}
	return nil
}

// Update replaces an object's writable fields (PUT).
func (r Resource[D, L, R]) Update(ctx context.Context, id string, req R) (*D, error) {
	out := new(D)
	return out, r.c.send(ctx, r.name, http.MethodPut, r.path+url.PathEscape(id)+"/", req, out)
}

// Patch changes some fields (PATCH); patch is any JSON object.
func (r Resource[D, L, R]) Patch(ctx context.Context, id string, patch any) (*D, error) {
	out := new(D)
	return out, r.c.send(ctx, r.name, http.MethodPatch, r.path+url.PathEscape(id)+"/", patch, out)
}

// Delete deletes an object; 202 (soft delete) and 204 both succeed. Use
// IgnoreNotFound where "already gone" is fine.
func (r Resource[D, L, R]) Delete(ctx context.Context, id string) error {
	return r.c.send(ctx, r.name, http.MethodDelete, r.path+url.PathEscape(id)+"/", nil, nil)
}

// Ref names a related object. It decodes from a bare UUID (detail models) and from a
// nested object {id, name, …} (list rows and *Simple models).
type Ref struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// UnmarshalJSON accepts "uuid", {"id": …} and null.
func (r *Ref) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*r = Ref{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &r.ID)
	}
	type plain Ref
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Ref(p)
	return nil
}

// Meta is what every ManagedObject answer carries.
type Meta struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	DisplayName  *string        `json:"display_name,omitempty"`
	Labels       map[string]any `json:"labels,omitempty"`
	Annotations  map[string]any `json:"annotations,omitempty"`
	State        string         `json:"state,omitempty"`
	IsDeleted    bool           `json:"is_deleted,omitempty"`
	DeletedAt    *time.Time     `json:"deleted_at,omitempty"`
	CreatedAt    *time.Time     `json:"created_at,omitempty"`
	UpdatedAt    *time.Time     `json:"updated_at,omitempty"`
	Workspace    *Ref           `json:"workspace,omitempty"`
	Organization *Ref           `json:"organization,omitempty"`
}

// Row is what every list row carries. Its Name is the display name where one is
// set (as the real list serializers do): never match on it; look objects up with
// the name_exact filter instead.
type Row struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	State        string         `json:"state,omitempty"`
	Labels       map[string]any `json:"labels,omitempty"`
	Workspace    *Ref           `json:"workspace,omitempty"`
	Organization *Ref           `json:"organization,omitempty"`
}

// Common writable fields, embedded in request bodies.
type Common struct {
	DisplayName       *string           `json:"display_name,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	ProviderReference *string           `json:"provider_reference,omitempty"`
}

// Query builds list filters from key/value pairs.
func Query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }
