package emulator

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver for --data
)

// Object is one stored API object.
type Object struct {
	Resource     string         `json:"resource"`
	ID           string         `json:"id"`
	Workspace    string         `json:"workspace,omitempty"`
	Organization string         `json:"organization,omitempty"`
	Data         map[string]any `json:"data"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	DeletedAt    *time.Time     `json:"deleted_at,omitempty"`
	// Seq orders objects created in the same instant.
	Seq int64 `json:"seq"`
}

func (o *Object) clone() *Object {
	c := *o
	c.Data = deepCopy(o.Data).(map[string]any)
	if o.DeletedAt != nil {
		t := *o.DeletedAt
		c.DeletedAt = &t
	}
	return &c
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	default:
		return v
	}
}

// Store keeps every object in memory and, with a data file, writes each change
// through to SQLite before the request is answered: nothing accepted is lost on a
// clean or unclean stop.
//
// Objects are never changed in place: a change stores an edited copy (edit), so
// List can hand out the stored objects themselves as read-only snapshots.
type Store struct {
	mu   sync.RWMutex
	objs map[string]map[string]*Object // resource → id → object
	seq  int64
	db   *sql.DB
	// keyOf gives an object's natural key ("" for none); byKey indexes live objects by it.
	keyOf func(*Object) string
	byKey map[string]map[string]bool // resource + "\x00" + key → ids
	// byName indexes objects by their "name" field, for name_exact lookups (the
	// natural-key search every client makes before a create).
	byName map[string]map[string]bool // resource + "\x00" + name → ids
	// order lists each resource's ids in creation (Seq) order, so List needs no
	// sort: a new object's id is appended when it is numbered. Ids removed from
	// objs stay until List finds the order inexact (inOrder) and rebuilds it
	// (rebuildOrder).
	order map[string][]string
}

// OpenStore opens a store; path "" keeps everything in memory.
func OpenStore(path string) (*Store, error) {
	s := &Store{objs: map[string]map[string]*Object{}, byKey: map[string]map[string]bool{}, byName: map[string]map[string]bool{},
		order: map[string][]string{}}
	if path == "" {
		return s, nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS objects (resource TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (resource, id))`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialising %s: %w", path, err)
	}
	rows, err := db.Query(`SELECT body FROM objects`)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		o := &Object{}
		if err := json.Unmarshal([]byte(body), o); err != nil {
			return nil, fmt.Errorf("corrupt row in %s: %w", path, err)
		}
		s.put(o)
		if o.Seq > s.seq {
			s.seq = o.Seq
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for resource := range s.objs {
		s.rebuildOrder(resource)
	}
	s.db = db
	return s, nil
}

// Close closes the data file.
func (s *Store) Close() error {
	if s.db != nil {
		return s.db.Close()
	}
	return nil
}

func (s *Store) put(o *Object) {
	m := s.objs[o.Resource]
	if m == nil {
		m = map[string]*Object{}
		s.objs[o.Resource] = m
	}
	m[o.ID] = o
	s.index(o)
}

func (s *Store) indexKey(o *Object) string {
	if o == nil || s.keyOf == nil || o.DeletedAt != nil {
		return ""
	}
	if k := s.keyOf(o); k != "" {
		return o.Resource + "\x00" + k
	}
	return ""
}

func nameKey(o *Object) string {
	n, _ := o.Data["name"].(string)
	return o.Resource + "\x00" + n
}

func (s *Store) index(o *Object) {
	if k := nameKey(o); s.byName[k] == nil {
		s.byName[k] = map[string]bool{o.ID: true}
	} else {
		s.byName[k][o.ID] = true
	}
	if k := s.indexKey(o); k != "" {
		if s.byKey[k] == nil {
			s.byKey[k] = map[string]bool{}
		}
		s.byKey[k][o.ID] = true
	}
}

// SetKeyFunc sets the natural-key function and rebuilds the index.
func (s *Store) SetKeyFunc(f func(*Object) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keyOf = f
	s.byKey = map[string]map[string]bool{}
	for _, m := range s.objs {
		for _, o := range m {
			s.index(o)
		}
	}
}

// WithKey returns the live objects of a resource with this natural key. The index
// may hold stale ids (an object whose key changed, or that was deleted); they are
// checked against the current object here.
func (s *Store) WithKey(resource, key string) []*Object {
	return s.indexed(&s.byKey, resource, key, s.indexKey)
}

// WithName returns a resource's objects (deleted ones included) whose "name" is
// name, in creation order: the candidates of a name_exact filter. Stale index
// entries (renamed or removed objects) are checked against the current object.
func (s *Store) WithName(resource, name string) []*Object {
	return s.indexed(&s.byName, resource, name, nameKey)
}

// indexed reads one entry of an index (&s.byKey, &s.byName; read under the lock)
// in creation order, keeping
// only the objects whose current key (keyOf) still is the entry's.
func (s *Store) indexed(idx *map[string]map[string]bool, resource, value string, keyOf func(*Object) string) []*Object {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k := resource + "\x00" + value
	var out []*Object
	for id := range (*idx)[k] {
		if o := s.objs[resource][id]; o != nil && keyOf(o) == k {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Get returns a copy of an object (deleted ones included).
func (s *Store) Get(resource, id string) (*Object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[resource][id]
	if !ok {
		return nil, false
	}
	return o.clone(), true
}

// List returns a resource's objects in creation order. They are the stored
// snapshots: read them, never change them.
//
// It reads the resource's creation order instead of sorting: a full paged
// listing of n objects costs n per page, not n·log n (BenchmarkListAllPages).
func (s *Store) List(resource string) []*Object {
	s.mu.RLock()
	out, ok := s.inOrder(resource)
	s.mu.RUnlock()
	if ok {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.objs[resource]
	out = make([]*Object, 0, len(m))
	for _, id := range s.rebuildOrder(resource) {
		out = append(out, m[id])
	}
	return out
}

// inOrder reads a resource's objects along its creation order (the caller holds
// mu). It reports false when the order is no longer exact: an object missing
// from it or listed twice (an id removed and stored again), or more removed ids
// in it than live ones.
func (s *Store) inOrder(resource string) ([]*Object, bool) {
	m := s.objs[resource]
	out := make([]*Object, 0, len(m))
	stale := 0
	var last int64
	for _, id := range s.order[resource] {
		o := m[id]
		if o == nil {
			stale++
			continue
		}
		if o.Seq <= last {
			return nil, false
		}
		last = o.Seq
		out = append(out, o)
	}
	return out, len(out) == len(m) && stale <= len(m)
}

// rebuildOrder sorts a resource's ids by Seq (the caller holds mu for writing):
// after loading a data file, and when inOrder finds the order stale.
func (s *Store) rebuildOrder(resource string) []string {
	m := s.objs[resource]
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return m[ids[i]].Seq < m[ids[j]].Seq })
	s.order[resource] = ids
	return ids
}

// Update runs fn on the live set of one resource under the write lock and persists
// the objects fn returns as changed. fn adds objects to the map or replaces them
// with edited copies (edit); it never changes a stored object in place.
func (s *Store) Update(resource string, fn func(objs map[string]*Object) ([]*Object, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.objs[resource]
	if m == nil {
		m = map[string]*Object{}
		s.objs[resource] = m
	}
	changed, err := fn(m)
	if err != nil {
		return err
	}
	return s.commitLocked(changed)
}

// commitLocked numbers new objects, indexes and persists them; the caller holds mu.
func (s *Store) commitLocked(objs []*Object) error {
	for _, o := range objs {
		if o.Seq == 0 {
			s.seq++
			o.Seq = s.seq
			s.order[o.Resource] = append(s.order[o.Resource], o.ID)
		}
		s.put(o)
		if err := s.persist(o); err != nil {
			return err
		}
	}
	return nil
}

// edit replaces objs[id] with an edited copy and returns it (nil when absent).
func edit(objs map[string]*Object, id string, fn func(*Object)) *Object {
	o := objs[id]
	if o == nil {
		return nil
	}
	c := o.clone()
	fn(c)
	objs[id] = c
	return c
}

// Save stores objects of any resources (used by the seed and server-side behaviour).
func (s *Store) Save(objs ...*Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(objs)
}

// Remove deletes an object for good (hard delete, purge).
func (s *Store) Remove(resource, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs[resource], id)
	if s.db != nil {
		if _, err := s.db.Exec(`DELETE FROM objects WHERE resource = ? AND id = ?`, resource, id); err != nil {
			return fmt.Errorf("removing %s/%s: %w", resource, id, err)
		}
	}
	return nil
}

// Reset removes every object.
func (s *Store) Reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = map[string]map[string]*Object{}
	s.byKey = map[string]map[string]bool{}
	s.byName = map[string]map[string]bool{}
	s.order = map[string][]string{}
	if s.db != nil {
		if _, err := s.db.Exec(`DELETE FROM objects`); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) persist(o *Object) error {
	if s.db == nil {
		return nil
	}
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if _, err := s.db.Exec(`INSERT INTO objects (resource, id, body) VALUES (?, ?, ?)
		ON CONFLICT (resource, id) DO UPDATE SET body = excluded.body`, o.Resource, o.ID, string(body)); err != nil {
		return fmt.Errorf("persisting %s/%s: %w", o.Resource, o.ID, err)
	}
	return nil
}
