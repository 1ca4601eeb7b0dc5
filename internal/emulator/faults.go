package emulator

import (
	"bufio"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultRule injects a failure into requests whose method and path match.
type FaultRule struct {
	// Path is a glob over the request path: * matches any run of characters, e.g.
	// "/api/v1/endpoints/*".
	Path string `json:"path"`
	// Method limits the rule to one HTTP method; "" matches all, "WRITE" all but GET/HEAD.
	Method string `json:"method,omitempty"`
	// Status answers with this code and an error envelope instead of processing the request.
	Status int `json:"status,omitempty"`
	// Rate is the probability (0–1] that a matching request is affected; default 1.
	Rate float64 `json:"rate,omitempty"`
	// LatencyMS delays the answer (also of requests that are then processed).
	LatencyMS int `json:"latency_ms,omitempty"`
	// RetryAfter is sent as the Retry-After header (seconds), with 429 or 503.
	RetryAfter int `json:"retry_after,omitempty"`
	// Drop closes the connection without an answer.
	Drop bool `json:"drop,omitempty"`
	// AfterCommit (with Drop) processes the request first — a write is committed —
	// and then drops the answer: the client cannot know that its write took.
	AfterCommit bool `json:"after_commit,omitempty"`
	// Times limits how often the rule fires; 0 = unlimited.
	Times int `json:"times,omitempty"`
	// Seed makes Rate deterministic: the same seed gives the same sequence.
	Seed int64 `json:"seed,omitempty"`

	re    *regexp.Regexp
	rng   *rand.Rand
	fired int
}

type faultSet struct {
	mu    sync.Mutex
	rules []*FaultRule
}

func newFaultSet() *faultSet { return &faultSet{} }

func (f *FaultRule) compile() error {
	if f.Path == "" {
		return fmt.Errorf("a fault rule needs a path")
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("rate must be within 0..1")
	}
	if f.Status == 0 && f.LatencyMS == 0 && !f.Drop {
		return fmt.Errorf("a fault rule needs status, latency_ms or drop")
	}
	if f.AfterCommit && (!f.Drop || f.Status != 0) {
		return fmt.Errorf("after_commit goes with drop (and no status)")
	}
	if f.Rate == 0 {
		f.Rate = 1
	}
	pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(f.Path), `\*`, ".*") + "$"
	re, err := regexp.Compile(pattern)
	if err != nil {
		return err
	}
	f.re = re
	f.rng = rand.New(rand.NewSource(f.Seed))
	return nil
}

func (fs *faultSet) set(rules []*FaultRule) error {
	for _, r := range rules {
		if err := r.compile(); err != nil {
			return err
		}
	}
	fs.mu.Lock()
	fs.rules = rules
	fs.mu.Unlock()
	return nil
}

func (fs *faultSet) list() []*FaultRule {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]*FaultRule{}, fs.rules...)
}

// match returns the rule that fires for r, if any (first matching rule decides).
func (fs *faultSet) match(r *http.Request) *FaultRule {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.rules {
		switch {
		case f.Method == "WRITE" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			continue
		case f.Method != "" && f.Method != "WRITE" && !strings.EqualFold(f.Method, r.Method):
			continue
		case !f.re.MatchString(r.URL.Path):
			continue
		case f.Times > 0 && f.fired >= f.Times:
			continue
		}
		if f.rng.Float64() >= f.Rate {
			return nil
		}
		f.fired++
		return f
	}
	return nil
}

func (f *FaultRule) describe() string {
	switch {
	case f.Drop && f.AfterCommit:
		return "drop after commit"
	case f.Drop:
		return "drop"
	case f.Status != 0:
		return strconv.Itoa(f.Status)
	default:
		return fmt.Sprintf("latency %dms", f.LatencyMS)
	}
}

// apply injects the fault; true when the request must not be processed further.
func (f *FaultRule) apply(w http.ResponseWriter, r *http.Request) bool {
	if f.LatencyMS > 0 {
		select {
		case <-time.After(time.Duration(f.LatencyMS) * time.Millisecond):
		case <-r.Context().Done():
			return true
		}
	}
	if f.Drop && !f.AfterCommit {
		drop(w)
		return true
	}
	if f.Status == 0 {
		return false
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	switch {
	case f.Status == http.StatusTooManyRequests:
		writeError(w, f.Status, "client_error", "throttled", fmt.Sprintf("Request was throttled. Expected available in %d seconds.", f.RetryAfter), nil)
	case f.Status >= 500:
		writeError(w, f.Status, "server_error", "error", "Injected server error.", nil)
	default:
		writeError(w, f.Status, "client_error", "error", "Injected client error.", nil)
	}
	return true
}

// drop closes the connection without an answer (a reset).
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// Hijack lets a drop fault close the connection through the status recorder.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("connection cannot be hijacked")
	}
	w.status = 0
	return hj.Hijack()
}
