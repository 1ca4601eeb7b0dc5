package externaldns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// MediaType is the webhook protocol's media type and version.
const MediaType = "application/external.dns.webhook+json;version=1"

// MaxBody bounds a request body (a plan of thousands of records fits).
const MaxBody = 4 << 20

// requestTimeout bounds one request's work against the API.
const requestTimeout = 60 * time.Second

// Handler serves the protocol: GET / (negotiation: the domain filter), GET
// /records, POST /records (apply changes, 204), POST /adjustendpoints,
// GET /healthz.
func Handler(p *Provider, log logr.Logger) http.Handler {
	h := &handler{p: p, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.negotiate)
	mux.HandleFunc("GET /records", h.records)
	mux.HandleFunc("POST /records", h.applyChanges)
	mux.HandleFunc("POST /adjustendpoints", h.adjustEndpoints)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// handler serves the protocol's requests with a Provider.
type handler struct {
	p   *Provider
	log logr.Logger
}

// fail answers a failed request with its status and a plain-text reason.
func (h *handler) fail(w http.ResponseWriter, what string, err error) {
	code := statusOf(err)
	h.log.Info("external-dns request failed", "request", what, "status", code, "error", err.Error())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "%s: %s\n", what, err.Error())
}

// reply answers with v in the protocol's media type.
func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", MediaType)
	w.Header().Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a request body of the protocol's media type, at most MaxBody bytes.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !acceptable(ct) {
		return fmt.Errorf("%w: Content-Type %q: send %s", errUnsupportedMedia, ct, MediaType)
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("%w: more than %d bytes", errTooLarge, MaxBody)
		}
		return fmt.Errorf("%w: the body is not valid JSON: %s", ErrInvalid, err.Error())
	}
	return nil
}

// negotiate: GET /, the domain filter.
func (h *handler) negotiate(w http.ResponseWriter, r *http.Request) {
	if a := r.Header.Get("Accept"); a != "" && !acceptable(a) {
		h.fail(w, "negotiate", fmt.Errorf("%w: Accept %q: this provider speaks %s", errNotAcceptable, a, MediaType))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	f, err := h.p.DomainFilter(ctx)
	if err != nil {
		h.fail(w, "negotiate", err)
		return
	}
	reply(w, f)
}

// records: GET /records.
func (h *handler) records(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	eps, err := h.p.Records(ctx)
	if err != nil {
		h.fail(w, "records", err)
		return
	}
	if eps == nil {
		eps = []*Endpoint{}
	}
	reply(w, eps)
}

// applyChanges: POST /records, 204 once every change is written.
func (h *handler) applyChanges(w http.ResponseWriter, r *http.Request) {
	var ch Changes
	if err := decode(w, r, &ch); err != nil {
		h.fail(w, "apply changes", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if err := h.p.ApplyChanges(ctx, &ch); err != nil {
		h.fail(w, "apply changes", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// adjustEndpoints: POST /adjustendpoints.
func (h *handler) adjustEndpoints(w http.ResponseWriter, r *http.Request) {
	var eps []*Endpoint
	if err := decode(w, r, &eps); err != nil {
		h.fail(w, "adjust endpoints", err)
		return
	}
	if eps == nil {
		eps = []*Endpoint{}
	}
	reply(w, h.p.AdjustEndpoints(eps))
}

var (
	errNotAcceptable    = errors.New("not acceptable")
	errUnsupportedMedia = errors.New("unsupported media type")
	errTooLarge         = errors.New("request body too large")
)

// acceptable: the protocol's media type (any parameter order), JSON, or */*.
func acceptable(header string) bool {
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch {
		case mt == "application/external.dns.webhook+json" && (params["version"] == "" || params["version"] == "1"),
			mt == "application/json", mt == "*/*", mt == "application/*":
			return true
		}
	}
	return false
}

// statusOf maps a failure to the answer external-dns acts on: 4xx (not retried)
// for what the request got wrong or the API refused, 5xx (retried) for what may
// pass: no connection, the API away or failing.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errNotAcceptable):
		return http.StatusNotAcceptable
	case errors.Is(err, errUnsupportedMedia):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case polycrate.IsTransient(err):
		return http.StatusBadGateway
	case polycrate.IsValidation(err) || polycrate.IsNotFound(err) || polycrate.IsConflict(err):
		return http.StatusUnprocessableEntity
	case polycrate.IsUnauthorized(err) || polycrate.IsForbidden(err):
		return http.StatusBadGateway // the agent token: fixed on the operator's side, worth retrying
	}
	return http.StatusServiceUnavailable
}

// Server serves the provider on external_dns_webhook.port while
// external_dns_webhook.enabled (default true), live (controller.LiveServer,
// embedded: Start and NeedLeaderElection — every replica serves behind the
// Service, each with its own API connection, operatorconfig.Replica).
type Server struct {
	Config *liveconfig.Store
	Conn   *polycrate.Connection
	Log    logr.Logger

	controller.LiveServer[int]
}

// NewServer returns s ready to run.
func NewServer(s *Server) *Server {
	s.LiveServer = controller.LiveServer[int]{Name: "the external-dns webhook provider", Config: s.Config, Log: s.Log,
		Want: func(snap *liveconfig.Snapshot) (int, bool) {
			w := snap.Spec.ExternalDNSWebhook
			port := int(w.Port)
			if port == 0 {
				port = 8888
			}
			return port, liveconfig.Enabled(w.Enabled)
		},
		Serve: s.serve}
	return s
}

// Running is the port being served, 0 when none.
func (s *Server) Running() int {
	port, _ := s.LiveServer.Running()
	return port
}

func (s *Server) serve(ctx context.Context, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	provider := &Provider{Client: s.Conn.Client, Filter: func() []string {
		if snap := s.Config.Get(); snap != nil {
			return snap.Spec.ExternalDNSWebhook.DomainFilter
		}
		return nil
	}}
	srv := &http.Server{Handler: Handler(provider, s.Log), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 2 * requestTimeout}
	return controller.ServeHTTP(ctx, srv, l, false)
}
