package emulator

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// serveResource is the one generic handler of every table resource.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, p principal, res *Resource, rest string) {
	if res.Name == "loadbalancers/instances" {
		s.assignLBAddresses() // what is due shows without the background ticker
	}
	if rest == "" {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, p, res)
		case http.MethodPost:
			s.create(w, r, p, res)
		default:
			writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", fmt.Sprintf("Method \"%s\" not allowed.", r.Method), nil)
		}
		return
	}
	id, tail, _ := strings.Cut(rest, "/")
	if tail != "" || !strings.HasSuffix(rest, "/") {
		writeError(w, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
		return
	}
	switch r.Method {
	case http.MethodGet:
		o, ok := s.visible(res, id, p, true)
		if !ok {
			notFound(w)
			return
		}
		writeJSON(w, http.StatusOK, s.render(res, o))
	case http.MethodPut, http.MethodPatch:
		s.update(w, r, p, res, id, r.Method == http.MethodPatch)
	case http.MethodDelete:
		s.destroy(w, p, res, id)
	default:
		writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", fmt.Sprintf("Method \"%s\" not allowed.", r.Method), nil)
	}
}

func notFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "client_error", "not_found", "No object matches the given query.", nil)
}

func forbidden(w http.ResponseWriter, detail string) {
	writeError(w, http.StatusForbidden, "client_error", "permission_denied", detail, nil)
}

// sees reports whether a principal may see an object.
func (p principal) sees(res *Resource, o *Object) bool {
	if p.system {
		return true
	}
	switch res.Scope {
	case ScopeWorkspace:
		return o.Workspace == p.workspace
	case ScopeOrganization:
		return o.Organization == p.org
	default:
		return true
	}
}

// visible returns an object the principal may see; soft-deleted ones only when
// includeDeleted (a GET of a deleted object shows is_deleted until purged).
func (s *Server) visible(res *Resource, id string, p principal, includeDeleted bool) (*Object, bool) {
	o, ok := s.store.Get(res.Name, id)
	if !ok || !p.sees(res, o) || (o.DeletedAt != nil && !includeDeleted) {
		return nil, false
	}
	return o, true
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, p principal, res *Resource) {
	q := r.URL.Query()
	candidates := func() []*Object { return s.store.List(res.Name) }
	if v := q["name_exact"]; len(v) == 1 && res.Filters["name_exact"] == "name" {
		// The name index narrows the scan; matches still applies every filter.
		candidates = func() []*Object { return s.store.WithName(res.Name, v[0]) }
	}
	var items []*Object
	filters, search, archivedToo := filtersOf(res, q), strings.ToLower(q.Get("search")), q.Get("archived") == "true"
	for _, o := range candidates() {
		if o.DeletedAt != nil || !p.sees(res, o) {
			continue
		}
		if archived, _ := o.Data["archived"].(bool); archived && !archivedToo {
			continue
		}
		if s.matches(res, o, filters, search) {
			items = append(items, o)
		}
	}
	ordering := q.Get("ordering")
	if ordering == "" && res.ListPlain {
		ordering = "created_at"
	}
	s.order(items, ordering)
	if res.ListPlain {
		out := make([]any, 0, len(items))
		for _, o := range items {
			out = append(out, s.renderRow(res, o))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	s.paginate(w, r, items, func(o *Object) any { return s.renderRow(res, o) })
}

// paginate writes a DRF page-number page {count, next, previous, results}.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, items []*Object, row func(*Object) any) {
	q := r.URL.Query()
	size := s.cfg.DefaultPageSize
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil && n > 0 {
			size = min(n, s.cfg.MaxPageSize)
		}
	}
	page := 1
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusNotFound, "client_error", "not_found", "Invalid page.", nil)
			return
		}
		page = n
	}
	pages := max(1, (len(items)+size-1)/size)
	if page > pages {
		writeError(w, http.StatusNotFound, "client_error", "not_found", "Invalid page.", nil)
		return
	}
	lo, hi := (page-1)*size, min(page*size, len(items))
	results := make([]any, 0, hi-lo)
	for _, o := range items[lo:hi] {
		results = append(results, row(o))
	}
	link := func(n int) any {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		qq := r.URL.Query()
		qq.Set("page", strconv.Itoa(n))
		u.RawQuery = qq.Encode()
		return u.String()
	}
	var next, prev any
	if page < pages {
		next = link(page + 1)
	}
	if page > 1 {
		prev = link(page - 1)
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(items), "next": next, "previous": prev, "results": results})
}

// filter is one list filter a request sets: the field it reads and the values
// it accepts.
type filter struct {
	param, field string
	want         []string
}

// filtersOf are the resource's list filters the query sets, read once per
// request rather than per object; unknown parameters are ignored, as the real
// service does.
func filtersOf(res *Resource, q url.Values) []filter {
	var out []filter
	for param, field := range res.Filters {
		if want := q[param]; len(want) > 0 {
			out = append(out, filter{param, field, want})
		}
	}
	return out
}

// matches applies the request's filters and its search term.
func (s *Server) matches(res *Resource, o *Object, filters []filter, search string) bool {
	var rendered map[string]any
	for _, f := range filters {
		var have any
		var found bool
		if v, ok := lookupPath(o.Data, f.field); ok {
			have, found = v, true
		} else {
			if rendered == nil {
				rendered = s.render(res, o)
			}
			have, found = lookupPath(rendered, f.field)
		}
		hv := ""
		if found && have != nil {
			hv = scalarString(have)
		}
		matched := false
		for _, wv := range f.want {
			switch {
			case f.param == "name":
				matched = matched || strings.Contains(strings.ToLower(hv), strings.ToLower(wv))
			default:
				matched = matched || hv == wv
			}
		}
		if !matched {
			return false
		}
	}
	if search != "" {
		name, _ := o.Data["name"].(string)
		dn, _ := o.Data["display_name"].(string)
		if !strings.Contains(strings.ToLower(name), search) && !strings.Contains(strings.ToLower(dn), search) {
			return false
		}
	}
	return true
}

func lookupPath(m map[string]any, path string) (any, bool) {
	cur := any(m)
	for part := range strings.SplitSeq(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[part]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case map[string]any:
		if id, ok := t["id"].(string); ok {
			return id
		}
	}
	return fmt.Sprint(v)
}

// order sorts by ?ordering (field or -field); default -created_at, as ManagedObjectBaseViewset.
func (s *Server) order(items []*Object, ordering string) {
	if ordering == "" {
		ordering = "-created_at"
	}
	desc := strings.HasPrefix(ordering, "-")
	field := strings.TrimPrefix(ordering, "-")
	if field == "created_at" || field == "id" {
		// The store lists in creation order: a reversal, not a sort of every
		// object on every page.
		bySeq := func(a, b *Object) int { return cmp.Compare(a.Seq, b.Seq) }
		if !slices.IsSortedFunc(items, bySeq) {
			slices.SortStableFunc(items, bySeq)
		}
		if desc {
			slices.Reverse(items)
		}
		return
	}
	sort.SliceStable(items, func(i, j int) bool {
		c := strings.Compare(scalarString(items[i].Data[field]), scalarString(items[j].Data[field]))
		if desc {
			return c > 0
		}
		return c < 0
	})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, p principal, res *Resource) {
	if res.NoWrites {
		writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", "Method \"POST\" not allowed.", nil)
		return
	}
	if !p.system && res.AgentReadOnly {
		forbidden(w, "Agent tokens may not create "+res.Name+".")
		return
	}
	body, ok := readBody(w, r, true)
	if !ok {
		return
	}
	ws, org, errs, status := s.owner(p, res, body)
	if status != 0 {
		forbidden(w, errs[0].Detail)
		return
	}
	errs = append(errs, validateObject(res.requestFields(true), body, "", false)...)
	errs = append(errs, s.checkReferences(res, body, p, ws)...)
	if len(errs) > 0 {
		writeValidation(w, errs)
		return
	}
	now := s.cfg.Now().UTC()
	o := &Object{Resource: res.Name, ID: uuid.NewString(), Workspace: ws, Organization: org, Data: body, CreatedAt: now, UpdatedAt: now}
	applyDefaults(res.Fields, o.Data)
	if e := s.beforeCreate(res, o, p); e != nil {
		writeHookError(w, e)
		return
	}
	var conflict string
	err := s.store.Update(res.Name, func(objs map[string]*Object) ([]*Object, error) {
		conflict = s.uniqueViolation(res, o, objs)
		if conflict != "" {
			return nil, nil
		}
		objs[o.ID] = o
		return []*Object{o}, nil
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
		return
	}
	if conflict != "" {
		writeError(w, http.StatusConflict, "client_error", "conflict", conflict, nil)
		return
	}
	s.recordCollisions(res, o)
	writeJSON(w, http.StatusCreated, s.createResponse(res, o))
}

// owner decides the workspace and organization of a new object.
func (s *Server) owner(p principal, res *Resource, body map[string]any) (ws, org string, errs []FieldError, status int) {
	if res.Scope == ScopeGlobal {
		return "", "", nil, 0
	}
	if !p.system {
		// Agent tokens: the workspace comes from the token, never from the body; a body
		// that names another workspace or organization is refused.
		for _, k := range []string{"workspace", "workspace_id"} {
			if v, ok := body[k].(string); ok && v != p.workspace {
				return "", "", []FieldError{{Detail: "This token may only write objects of its own workspace."}}, http.StatusForbidden
			}
		}
		for _, k := range []string{"organization", "organization_id"} {
			if v, ok := body[k].(string); ok && v != p.org {
				return "", "", []FieldError{{Detail: "This token may only write objects of its own organization."}}, http.StatusForbidden
			}
		}
		if res.Scope == ScopeOrganization {
			return "", p.org, nil, 0
		}
		return p.workspace, p.org, nil, 0
	}
	// System tokens name the workspace (or organization) in the body.
	for _, k := range []string{"workspace_id", "workspace"} {
		if v, ok := body[k].(string); ok {
			if _, inSchema := res.field(k); !inSchema && res.CreateFields == nil {
				delete(body, k)
			}
			if wo, ok := s.store.Get("workspaces", v); ok {
				return wo.ID, wo.Organization, nil, 0
			}
			return "", "", []FieldError{{k, "does_not_exist", fmt.Sprintf("Invalid pk \"%s\" - object does not exist.", v)}}, 0
		}
	}
	for _, k := range []string{"organization_id", "organization"} {
		if v, ok := body[k].(string); ok && res.Scope == ScopeOrganization {
			return "", v, nil, 0
		}
	}
	return "", "", []FieldError{{"workspace_id", "required", "System tokens must name the workspace (workspace_id) of a new object."}}, 0
}

// checkReferences validates foreign keys: the object must exist, be live and be
// visible in the same workspace.
func (s *Server) checkReferences(res *Resource, body map[string]any, p principal, ws string) []FieldError {
	var errs []FieldError
	for _, f := range res.Fields {
		v, ok := body[f.Name].(string)
		if f.FK == "" || !ok {
			continue
		}
		target := byName[f.FK]
		o, found := s.store.Get(f.FK, v)
		if !found || o.DeletedAt != nil || (target.Scope == ScopeWorkspace && o.Workspace != ws && !p.system) {
			errs = append(errs, FieldError{f.Name, "does_not_exist", fmt.Sprintf("Invalid pk \"%s\" - object does not exist.", v)})
		}
	}
	return errs
}

func applyDefaults(fields []Field, m map[string]any) {
	for _, f := range fields {
		if f.ReadOnly || f.WriteOnly {
			continue
		}
		v, ok := m[f.Name]
		if !ok && f.Default != nil {
			m[f.Name] = f.Default
		}
		if sub, isMap := v.(map[string]any); isMap && f.Kind == Obj {
			applyDefaults(f.Fields, sub)
		}
	}
}

// uniqueViolation checks the unique constraints against the live objects.
func (s *Server) uniqueViolation(res *Resource, o *Object, objs map[string]*Object) string {
	if !res.UniquePerWorkspace && len(res.Unique) == 0 {
		return ""
	}
	for _, other := range objs {
		if other.ID == o.ID || other.DeletedAt != nil {
			continue
		}
		if res.UniquePerWorkspace && other.Workspace == o.Workspace {
			return fmt.Sprintf("A %s already exists for this workspace (unique_k8s_cluster_per_workspace): %s.", strings.TrimSuffix(res.Name[strings.LastIndex(res.Name, "/")+1:], "s"), other.ID)
		}
		if len(res.Unique) > 0 && (res.UniqueGlobal || other.Workspace == o.Workspace) && sameValues(res.Unique, o.Data, other.Data) {
			return fmt.Sprintf("An object with this %s already exists.", strings.Join(res.Unique, " and "))
		}
	}
	return ""
}

func sameValues(fields []string, a, b map[string]any) bool {
	for _, f := range fields {
		if scalarString(a[f]) != scalarString(b[f]) {
			return false
		}
	}
	return true
}

// naturalKey is an object's natural key within its workspace ("" when a field is missing).
func naturalKey(o *Object) string {
	res := byName[o.Resource]
	if res == nil || len(res.NaturalKey) == 0 {
		return ""
	}
	parts := make([]string, 0, len(res.NaturalKey)+2)
	parts = append(parts, "ws="+o.Workspace, "org="+o.Organization)
	for _, f := range res.NaturalKey {
		v, ok := o.Data[f]
		if !ok {
			return ""
		}
		parts = append(parts, f+"="+scalarString(v))
	}
	return strings.Join(parts, ",")
}

// recordCollisions notes other live objects of the same workspace with the same natural key.
func (s *Server) recordCollisions(res *Resource, o *Object) {
	key := naturalKey(o)
	if key == "" {
		return
	}
	same := s.store.WithKey(res.Name, key)
	if len(same) < 2 {
		return
	}
	ids := make([]string, len(same))
	for i, x := range same {
		ids[i] = x.ID
	}
	parts := make([]string, len(res.NaturalKey))
	for i, f := range res.NaturalKey {
		parts[i] = f + "=" + scalarString(o.Data[f])
	}
	s.mu.Lock()
	s.collisions = append(s.collisions, Collision{Resource: res.Name, Key: strings.Join(parts, ","), IDs: ids, At: s.cfg.Now().UTC()})
	s.mu.Unlock()
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, p principal, res *Resource, id string, partial bool) {
	if res.NoWrites {
		writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", fmt.Sprintf("Method \"%s\" not allowed.", r.Method), nil)
		return
	}
	if !p.system && res.AgentReadOnly {
		forbidden(w, "Agent tokens may not change "+res.Name+".")
		return
	}
	if _, ok := s.visible(res, id, p, false); !ok {
		notFound(w)
		return
	}
	body, ok := readBody(w, r, partial)
	if !ok {
		return
	}
	if !p.system {
		if _, _, errs, status := s.owner(p, res, body); status != 0 {
			forbidden(w, errs[0].Detail)
			return
		}
	}
	fields := res.requestFields(false)
	errs := validateObject(fields, body, "", partial || res.UpdateFields != nil)
	cur, _ := s.store.Get(res.Name, id)
	errs = append(errs, s.checkReferences(res, body, p, cur.Workspace)...)
	if len(errs) > 0 {
		writeValidation(w, errs)
		return
	}
	var updated *Object
	var conflict string
	err := s.store.Update(res.Name, func(objs map[string]*Object) ([]*Object, error) {
		o := objs[id]
		if o == nil || o.DeletedAt != nil {
			return nil, nil
		}
		next := o.clone()
		// PATCH replaces each field it names, nested objects (spec) included, as the
		// real API's JSON-backed serializers do: clients send the whole spec.
		for k, v := range body {
			next.Data[k] = v
		}
		applyDefaults(res.Fields, next.Data)
		next.UpdatedAt = s.cfg.Now().UTC()
		if conflict = s.uniqueViolation(res, next, objs); conflict != "" {
			return nil, nil
		}
		objs[id] = next
		updated = next
		return []*Object{next}, nil
	})
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
	case conflict != "":
		writeError(w, http.StatusConflict, "client_error", "conflict", conflict, nil)
	case updated == nil:
		notFound(w)
	default:
		s.recordCollisions(res, updated)
		writeJSON(w, http.StatusOK, s.updateResponse(res, updated))
	}
}

func (s *Server) destroy(w http.ResponseWriter, p principal, res *Resource, id string) {
	if !p.system && (res.AgentNoDelete || res.AgentReadOnly) {
		forbidden(w, "Agent tokens may not delete "+res.Name+".")
		return
	}
	o, ok := s.visible(res, id, p, true)
	if !ok {
		notFound(w)
		return
	}
	if !res.SoftDelete {
		if err := s.store.Remove(res.Name, id); err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if o.DeletedAt == nil {
		now := s.cfg.Now().UTC()
		err := s.store.Update(res.Name, func(objs map[string]*Object) ([]*Object, error) {
			cur := edit(objs, id, func(o *Object) { o.DeletedAt, o.UpdatedAt = &now, now })
			return []*Object{cur}, nil
		})
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// purgeDeleted removes soft-deleted objects PurgeAfter after their deletion.
func (s *Server) purgeDeleted() { s.purge(s.cfg.Now().Add(-s.cfg.PurgeAfter)) }

// purge removes for good the objects soft-deleted before cutoff (zero: all).
func (s *Server) purge(cutoff time.Time) {
	for _, res := range Table {
		for _, o := range s.store.List(res.Name) {
			if o.DeletedAt != nil && (cutoff.IsZero() || o.DeletedAt.Before(cutoff)) {
				_ = s.store.Remove(res.Name, o.ID)
			}
		}
	}
}

// render is an object's detail representation.
func (s *Server) render(res *Resource, o *Object) map[string]any {
	out := map[string]any{}
	for k, v := range o.Data {
		if strings.HasPrefix(k, "_") {
			continue
		}
		if f, ok := res.field(k); ok && f.WriteOnly {
			continue
		}
		out[k] = deepCopy(v)
	}
	ro := map[string]any{
		"id":         o.ID,
		"url":        "http://emulator" + res.Path + o.ID + "/",
		"created_at": o.CreatedAt.Format(time.RFC3339Nano),
		"updated_at": o.UpdatedAt.Format(time.RFC3339Nano),
		"deleted_at": nil, "is_deleted": o.DeletedAt != nil,
		"state": "OK", "last_state": "OK", "conditions": map[string]any{},
		"reconciliation_running": false,
		"created":                map[string]any{"created_at": o.CreatedAt.Format(time.RFC3339Nano)},
		"organization":           s.orgSimple(o.Organization),
		"workspace":              s.workspaceSimple(o.Workspace),
	}
	if o.DeletedAt != nil {
		ro["deleted_at"] = o.DeletedAt.Format(time.RFC3339Nano)
	}
	for k, v := range ro {
		if f, ok := res.field(k); ok && f.ReadOnly {
			if _, set := out[k]; !set || k == "id" || k == "is_deleted" || k == "deleted_at" {
				out[k] = v
			}
		}
	}
	s.decorate(res, o, out)
	for _, f := range res.Fields {
		if _, ok := out[f.Name]; !ok && (f.Null || f.Kind == Any) && !f.WriteOnly {
			out[f.Name] = nil
		}
	}
	return out
}

// renderRow is an object's list-row representation: the common list fields plus
// the resource's own; name is the display name where one is set, as in the real
// list serializers.
func (s *Server) renderRow(res *Resource, o *Object) map[string]any {
	full := s.render(res, o)
	keep := []string{"id", "name", "state", "labels", "conditions", "organization", "workspace", "created", "archived", "reconciliation_running", "url"}
	keep = append(keep, res.ListFields...)
	out := map[string]any{}
	for _, k := range keep {
		if v, ok := full[k]; ok {
			// List serializers nest related objects ({id, name, url}) where the detail
			// model has a bare UUID.
			if f, isField := res.field(k); isField && f.FK != "" {
				if id, isStr := v.(string); isStr {
					v = s.refObject(f.FK, id)
				}
			}
			out[k] = v
		}
	}
	if dn, ok := full["display_name"].(string); ok && dn != "" && !res.ListPlain {
		out["name"] = dn
	}
	return out
}

func (s *Server) createResponse(res *Resource, o *Object) any {
	switch res.Name {
	case "s3/buckets":
		return s.bucketCreateResponse(o)
	case "loadbalancers/instances":
		full := s.render(res, o)
		return pick(full, "id", "display_name", "config", "ports", "consumer_meta", "labels", "annotations",
			map[string]any{"workspace": o.Workspace, "organization": o.Organization})
	}
	return s.render(res, o)
}

func (s *Server) updateResponse(res *Resource, o *Object) any {
	switch res.Name {
	case "s3/buckets":
		full := s.render(res, o)
		return pick(full, "id", "name", "reconciliation_running", "region", "provider_reference", "labels", "annotations",
			"include_in_cost_statement", "cors_allow_all", map[string]any{"workspace": o.Workspace, "organization": o.Organization, "credential": nil})
	case "loadbalancers/instances":
		return pick(s.render(res, o), "config", "ports", "labels", "annotations")
	}
	return s.render(res, o)
}

// pick copies named keys; a trailing map adds or overrides values.
func pick(m map[string]any, keys ...any) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		switch t := k.(type) {
		case string:
			if v, ok := m[t]; ok {
				out[t] = v
			}
		case map[string]any:
			for kk, v := range t {
				out[kk] = v
			}
		}
	}
	return out
}

// refObject is the nested {id, name, url} form of a related object.
func (s *Server) refObject(resource, id string) map[string]any {
	out := map[string]any{"id": id, "name": nil, "url": "http://emulator" + byName[resource].Path + id + "/"}
	if o, ok := s.store.Get(resource, id); ok {
		out["name"] = o.Data["name"]
	}
	return out
}

func (s *Server) orgSimple(id string) any {
	if id == "" {
		return nil
	}
	o, ok := s.store.Get("organizations", id)
	if !ok {
		return map[string]any{"id": id}
	}
	return map[string]any{"id": o.ID, "name": o.Data["name"], "display_name": o.Data["display_name"], "slug": o.Data["slug"],
		"reconciliation_running": false, "kind": "generic", "legal_name": o.Data["legal_name"],
		"url": "http://emulator/api/v1/organizations/" + o.ID + "/"}
}

func (s *Server) workspaceSimple(id string) any {
	if id == "" {
		return nil
	}
	o, ok := s.store.Get("workspaces", id)
	if !ok {
		return map[string]any{"id": id}
	}
	return map[string]any{"id": o.ID, "name": o.Data["name"], "display_name": o.Data["display_name"],
		"reconciliation_running": false, "kind": "polycrate", "organization": s.orgSimple(o.Organization),
		"legacy": false, "url": "http://emulator/api/v1/workspaces/" + o.ID + "/"}
}

// hookError is a failure of a resource-specific hook, rendered as an API error.
type hookError struct {
	status     int
	typ, code  string
	detail     string
	attr       string
	validation bool
}

func writeHookError(w http.ResponseWriter, e *hookError) {
	if e.validation {
		writeValidation(w, []FieldError{{e.attr, e.code, e.detail}})
		return
	}
	writeError(w, e.status, e.typ, e.code, e.detail, nil)
}
