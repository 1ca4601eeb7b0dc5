package emulator

import (
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveControls serves the test controls under /_emulator/ (off with --no-controls):
//
//	GET  /_emulator/counters            reads and writes per resource
//	POST /_emulator/counters/reset      zero the counters
//	GET  /_emulator/collisions          objects created twice with one natural key
//	GET  /_emulator/requests?limit=N    the request log, newest last
//	GET|PUT|DELETE /_emulator/faults    the fault rules (PUT a JSON array)
//	POST /_emulator/reset               everything back to the seed
//	POST /_emulator/purge               purge soft-deleted objects now
//	POST /_emulator/tick                run agent-silence and purge checks now
//	POST /_emulator/s3/buckets/{id}/rotate-credentials
func (s *Server) serveControls(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/_emulator/")
	switch {
	case path == "counters" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Counters())
	case path == "counters/reset" && r.Method == http.MethodPost:
		s.mu.Lock()
		s.counters = map[string]*Counter{}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case path == "collisions" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Collisions())
	case path == "requests" && r.Method == http.MethodGet:
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		s.mu.Lock()
		out := append([]RequestRecord{}, s.requests...)
		s.mu.Unlock()
		if limit > 0 && len(out) > limit {
			out = out[len(out)-limit:]
		}
		writeJSON(w, http.StatusOK, out)
	case path == "faults":
		s.serveFaults(w, r)
	case path == "reset" && r.Method == http.MethodPost:
		if err := s.Reset(); err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case path == "purge" && r.Method == http.MethodPost:
		s.purge(time.Time{})
		w.WriteHeader(http.StatusNoContent)
	case path == "tick" && r.Method == http.MethodPost:
		s.Tick()
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(path, "s3/buckets/") && strings.HasSuffix(path, "/rotate-credentials") && r.Method == http.MethodPost:
		id := strings.TrimSuffix(strings.TrimPrefix(path, "s3/buckets/"), "/rotate-credentials")
		if !s.rotateBucketCredentials(id) {
			notFound(w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusNotFound, "client_error", "not_found", "Unknown emulator control.", nil)
	}
}

// serveFaults: GET the fault rules, PUT (or POST) a JSON array of them, DELETE them.
func (s *Server) serveFaults(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, s.faults.list())
	case http.MethodPut, http.MethodPost:
		var rules []*FaultRule
		if err := json.NewDecoder(r.Body).Decode(&rules); err != nil {
			writeError(w, http.StatusBadRequest, "client_error", "parse_error", "want a JSON array of fault rules: "+err.Error(), nil)
			return
		}
		if err := s.faults.set(rules); err != nil {
			writeError(w, http.StatusBadRequest, "client_error", "invalid", err.Error(), nil)
			return
		}
		writeJSON(w, http.StatusOK, rules)
	case http.MethodDelete:
		_ = s.faults.set(nil)
		w.WriteHeader(http.StatusNoContent)
	}
}

// Reset removes every object, reapplies the seed and clears counters, collisions,
// the request log and faults.
func (s *Server) Reset() error {
	if err := s.store.Reset(); err != nil {
		return err
	}
	s.mu.Lock()
	s.counters = map[string]*Counter{}
	s.collisions = nil
	s.requests = nil
	s.mu.Unlock()
	_ = s.faults.set(nil)
	return s.applySeed()
}

// SetFaults replaces the fault rules (in-process tests).
func (s *Server) SetFaults(rules ...FaultRule) error {
	ptrs := make([]*FaultRule, len(rules))
	for i := range rules {
		r := rules[i]
		ptrs[i] = &r
	}
	return s.faults.set(ptrs)
}

// SetLBPoolSize changes how many addresses the load balancer pool has (0: the
// seed's), e.g. to exhaust it (in-process tests).
func (s *Server) SetLBPoolSize(n int) {
	s.mu.Lock()
	s.lbPoolSize = n
	s.mu.Unlock()
}

// Counters returns a copy of the request counters (in-process tests).
func (s *Server) Counters() map[string]Counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Counter{}
	for k, v := range s.counters {
		c := *v
		c.ByMethod = maps.Clone(v.ByMethod)
		out[k] = c
	}
	return out
}

// Collisions returns the recorded natural-key collisions (in-process tests).
func (s *Server) Collisions() []Collision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Collision{}, s.collisions...)
}

// RemoveWhere removes a resource's objects whose data match, deleted or not,
// and returns how many (in-process tests: a clean slate between scenarios).
func (s *Server) RemoveWhere(resource string, match func(data map[string]any) bool) int {
	n := 0
	for _, o := range s.store.List(resource) {
		if match(o.Data) && s.store.Remove(resource, o.ID) == nil {
			n++
		}
	}
	return n
}

// Live counts a resource's objects that are not deleted (in-process tests and the
// scale harness).
func (s *Server) Live(resource string) int {
	n := 0
	for _, o := range s.store.List(resource) {
		if o.DeletedAt == nil {
			n++
		}
	}
	return n
}

// LiveObjects returns copies of the data of a resource's objects that are not
// deleted, with their "id" (in-process tests and harnesses).
func (s *Server) LiveObjects(resource string) []map[string]any {
	var out []map[string]any
	for _, o := range s.store.List(resource) {
		if o.DeletedAt != nil {
			continue
		}
		m := make(map[string]any, len(o.Data)+1)
		for k, v := range o.Data {
			m[k] = v
		}
		m["id"] = o.ID
		out = append(out, m)
	}
	return out
}

// AgentHealth returns the last health report (status, warnings, …) of every live
// agent of a kind ("operator", "agent"), for in-process tests.
func (s *Server) AgentHealth(kind string) []map[string]any {
	var out []map[string]any
	for _, o := range s.store.List("agents") {
		if h, ok := o.Data["_health"].(map[string]any); ok && o.DeletedAt == nil && o.Data["kind"] == kind {
			out = append(out, h)
		}
	}
	return out
}
