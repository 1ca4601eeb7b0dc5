// Package emulator is a local Polycrate API: strict with requests, durable, and
// driven by one table of resources (resources.go). It implements the contract in
// docs/api-contract.md for development, the demo and the tests.
package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config configures a Server.
type Config struct {
	// Seed is the tenancy; nil uses the default seed.
	Seed *Seed
	// DataFile keeps every object in SQLite; "" keeps them in memory.
	DataFile string
	// NoControls turns the /_emulator/ test controls off.
	NoControls bool
	// AgentSilenceThreshold: an agent silent this long turns CRITICAL and a downtime
	// opens (default 5 minutes).
	AgentSilenceThreshold time.Duration
	// PurgeAfter: soft-deleted objects disappear this long after DELETE (default 1 minute).
	PurgeAfter time.Duration
	// DefaultPageSize and MaxPageSize of paginated lists (defaults 100 and 1000).
	DefaultPageSize, MaxPageSize int
	// Logger logs one line per request at debug level.
	Logger *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// LBAddressDelay is how long a new load balancer instance waits for its public
	// address from the seed's pool (default 2 s; negative: at once).
	LBAddressDelay time.Duration
}

// Server is the emulator.
type Server struct {
	cfg   Config
	seed  *Seed
	store *Store
	log   *slog.Logger

	tokens map[string]principal // bearer token → who

	mu         sync.Mutex
	counters   map[string]*Counter // resource → counts
	collisions []Collision
	requests   []RequestRecord
	faults     *faultSet
	lbPoolSize int // overrides the seed's ip_pool_size (SetLBPoolSize)
}

// Counter counts requests to one resource.
type Counter struct {
	Reads  int `json:"reads"`
	Writes int `json:"writes"`
	// ByMethod counts per HTTP method.
	ByMethod map[string]int `json:"by_method"`
}

// Collision records a second live object with the same natural key.
type Collision struct {
	Resource string    `json:"resource"`
	Key      string    `json:"key"`
	IDs      []string  `json:"ids"`
	At       time.Time `json:"at"`
}

// RequestRecord is one entry of the request log.
type RequestRecord struct {
	At       time.Time `json:"at"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	Status   int       `json:"status"`
	Duration string    `json:"duration"`
	Fault    string    `json:"fault,omitempty"`
}

const requestLogSize = 2000

type principal struct {
	system    bool
	workspace string // workspace id (agent tokens)
	org       string // organization id (agent tokens)
}

// New builds a server and applies its seed.
func New(cfg Config) (*Server, error) {
	if cfg.Seed == nil {
		s, err := ParseSeed(DefaultSeedYAML)
		if err != nil {
			return nil, err
		}
		cfg.Seed = s
	}
	if cfg.AgentSilenceThreshold == 0 {
		cfg.AgentSilenceThreshold = 5 * time.Minute
	}
	if cfg.PurgeAfter == 0 {
		cfg.PurgeAfter = time.Minute
	}
	if cfg.DefaultPageSize == 0 {
		cfg.DefaultPageSize = 100
	}
	if cfg.MaxPageSize == 0 {
		cfg.MaxPageSize = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LBAddressDelay == 0 {
		cfg.LBAddressDelay = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st, err := OpenStore(cfg.DataFile)
	if err != nil {
		return nil, err
	}
	st.SetKeyFunc(naturalKey)
	s := &Server{cfg: cfg, seed: cfg.Seed, store: st, log: cfg.Logger,
		counters: map[string]*Counter{}, faults: newFaultSet()}
	if err := s.applySeed(); err != nil {
		_ = st.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the data file.
func (s *Server) Close() error { return s.store.Close() }

// Run runs the server's background behaviour (agent silence, purge of soft-deleted
// objects) until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Tick()
		}
	}
}

// Tick runs the background behaviour once (tests call it directly).
func (s *Server) Tick() {
	s.assignLBAddresses()
	s.checkAgentSilence()
	s.purgeDeleted()
}

// ListenAndServe serves on addr until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, l)
}

// Serve serves on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.Run(ctx)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the emulator's HTTP handler.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	path := r.URL.Path
	var fault string
	defer func() {
		if rec := recover(); rec != nil {
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			s.log.Error("handler panic", "method", r.Method, "path", path, "panic", rec)
			writeError(sw, http.StatusInternalServerError, "server_error", "error", "Internal server error.", nil)
		}
		d := time.Since(start)
		s.log.Debug("request", "method", r.Method, "path", path, "status", sw.status, "duration", d, "fault", fault)
		if strings.HasPrefix(path, "/_emulator/") {
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, RequestRecord{At: start, Method: r.Method, Path: r.URL.RequestURI(), Status: sw.status, Duration: d.String(), Fault: fault})
		if len(s.requests) > requestLogSize {
			s.requests = s.requests[len(s.requests)-requestLogSize:]
		}
		s.mu.Unlock()
	}()

	switch {
	case path == "/" || path == "/index.html":
		s.serveIndex(sw, r)
		return
	case strings.HasPrefix(path, "/_emulator/"):
		if s.cfg.NoControls {
			writeError(sw, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
			return
		}
		s.serveControls(sw, r)
		return
	case strings.HasPrefix(path, "/system/operator-rollout"):
		if s.cfg.NoControls {
			writeError(sw, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
			return
		}
		s.serveDashboard(sw, r)
		return
	case !strings.HasPrefix(path, "/api/"):
		writeError(sw, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
		return
	}

	s.count(r)
	f := s.faults.match(r)
	if f != nil {
		fault = f.describe()
		if f.apply(sw, r) {
			return
		}
	}
	if f != nil && f.AfterCommit {
		// The request is processed in full (a write is committed), its answer
		// thrown away, and the connection reset.
		rec := &discardWriter{header: http.Header{}}
		if p, ok := s.authenticate(rec, r); ok {
			s.route(rec, r, p)
		}
		drop(sw)
		return
	}
	p, ok := s.authenticate(sw, r)
	if !ok {
		return
	}
	s.route(sw, r, p)
}

// discardWriter takes an answer that is never sent.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// count increments the read/write counters of the resource a request addresses.
func (s *Server) count(r *http.Request) {
	name := resourceNameFor(r.URL.Path)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counters[name]
	if c == nil {
		c = &Counter{ByMethod: map[string]int{}}
		s.counters[name] = c
	}
	c.ByMethod[r.Method]++
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		c.Reads++
	} else {
		c.Writes++
	}
}

// resourceNameFor names the counter of a path: a table resource, or the special
// operation (agent/health, system/config, operator-rollout, …).
func resourceNameFor(path string) string {
	if res, _ := matchResource(path); res != nil {
		return res.Name
	}
	p := strings.TrimPrefix(path, "/api/v1/")
	p = strings.TrimSuffix(p, "/")
	if strings.HasPrefix(p, "operator-rollout") {
		return "operator-rollout"
	}
	return p
}

// matchResource finds the table resource whose path prefixes path (longest first),
// returning the rest of the path.
func matchResource(path string) (*Resource, string) {
	var best *Resource
	for _, r := range Table {
		if strings.HasPrefix(path, r.Path) && (best == nil || len(r.Path) > len(best.Path)) {
			best = r
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, strings.TrimPrefix(path, best.Path)
}

func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (principal, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		writeError(w, http.StatusUnauthorized, "client_error", "not_authenticated", "Authentication credentials were not provided.", nil)
		return principal{}, false
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		writeError(w, http.StatusUnauthorized, "client_error", "authentication_failed", "Invalid authorization header. Use 'Bearer <token>'.", nil)
		return principal{}, false
	}
	p, ok := s.tokens[strings.TrimSpace(token)]
	if !ok {
		writeError(w, http.StatusUnauthorized, "client_error", "authentication_failed", "Invalid token.", nil)
		return principal{}, false
	}
	return p, true
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, p principal) {
	path := r.URL.Path
	switch {
	case path == "/api/v1/agent/health/":
		s.onlyMethods(w, r, p, s.agentHealth, http.MethodPost)
	case path == "/api/v1/agent/endpoints/":
		s.onlyMethods(w, r, p, s.agentEndpoints, http.MethodGet)
	case path == "/api/v1/agent/errors/":
		s.onlyMethods(w, r, p, s.agentErrors, http.MethodPost)
	case path == "/api/v1/system/config/":
		s.onlyMethods(w, r, p, s.systemConfig, http.MethodGet, http.MethodPatch)
	case strings.HasPrefix(path, "/api/v1/operator-rollout/"):
		s.operatorRollout(w, r, p)
	case path == "/api/v1/domains/dnszones/resolve/":
		s.onlyMethods(w, r, p, s.resolveZone, http.MethodGet)
	case strings.HasPrefix(path, "/api/v1/s3/buckets/") && strings.HasSuffix(path, "/credentials/"):
		s.onlyMethods(w, r, p, s.bucketCredentials, http.MethodGet)
	case strings.HasPrefix(path, "/api/v1/agents/") && strings.HasSuffix(path, "/assignments/"):
		s.onlyMethods(w, r, p, s.agentAssignments, http.MethodGet)
	default:
		res, rest := matchResource(path)
		if res == nil {
			writeError(w, http.StatusNotFound, "client_error", "not_found", "Not found.", nil)
			return
		}
		s.serveResource(w, r, p, res, rest)
	}
}

func (s *Server) onlyMethods(w http.ResponseWriter, r *http.Request, p principal, h func(http.ResponseWriter, *http.Request, principal), methods ...string) {
	for _, m := range methods {
		if r.Method == m {
			h(w, r, p)
			return
		}
	}
	writeError(w, http.StatusMethodNotAllowed, "client_error", "method_not_allowed", fmt.Sprintf("Method \"%s\" not allowed.", r.Method), nil)
}

// errorEnvelope is the drf-standardized-errors body.
type errorEnvelope struct {
	Type   string       `json:"type"`
	Errors []FieldError `json:"errors"`
}

func writeError(w http.ResponseWriter, status int, typ, code, detail string, attr *string) {
	fe := FieldError{Code: code, Detail: detail}
	if attr != nil {
		fe.Attr = *attr
	}
	writeJSON(w, status, errorEnvelopeJSON(typ, []FieldError{fe}, attr == nil))
}

// errorEnvelopeJSON renders errors with attr null where it has none.
func errorEnvelopeJSON(typ string, errs []FieldError, nullAttr bool) any {
	items := make([]map[string]any, len(errs))
	for i, e := range errs {
		var attr any = e.Attr
		if nullAttr || e.Attr == "" {
			attr = nil
		}
		items[i] = map[string]any{"code": e.Code, "detail": e.Detail, "attr": attr}
	}
	return map[string]any{"type": typ, "errors": items}
}

func writeValidation(w http.ResponseWriter, errs []FieldError) {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Attr < errs[j].Attr })
	writeJSON(w, http.StatusBadRequest, errorEnvelopeJSON("validation_error", errs, false))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody decodes a JSON object body. An empty body is an empty object when
// allowEmpty; anything else that is not a JSON object is a 400 parse error.
func readBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) (map[string]any, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "client_error", "unsupported_media_type",
			fmt.Sprintf("Unsupported media type \"%s\" in request. The emulator accepts application/json only.", ct), nil)
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "client_error", "parse_error", "Could not read the request body.", nil)
		return nil, false
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if allowEmpty {
			return map[string]any{}, true
		}
		writeError(w, http.StatusBadRequest, "client_error", "parse_error", "JSON parse error - Expecting value: line 1 column 1 (char 0)", nil)
		return nil, false
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		writeError(w, http.StatusBadRequest, "client_error", "parse_error", "JSON parse error - "+err.Error(), nil)
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		attr := "non_field_errors"
		writeValidation(w, []FieldError{{attr, "invalid", "Invalid data. Expected a dictionary, but got " + jsonTypeName(v) + "."}})
		return nil, false
	}
	return m, true
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "str"
	case float64:
		return "int"
	case bool:
		return "bool"
	case nil:
		return "NoneType"
	}
	return "object"
}
