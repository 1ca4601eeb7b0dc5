// Package faultproxy is an HTTP reverse proxy for chaos tests: it stands between
// the operator and the API and, by the Fault it is given, answers in the API's
// place (a status with Retry-After), delays answers, or resets the connection
// before the request reaches the API or after the API committed it (the answer
// is lost: the client cannot know whether its write took). It logs every request
// it sees, so a test can count what reached the API per time window — the
// emulator's own counters cannot see what the proxy answered itself.
package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Fault is what the proxy does to the requests it affects.
type Fault struct {
	// WritesOnly limits the fault to POST, PUT, PATCH and DELETE.
	WritesOnly bool
	// Rate is the share (0–1] of the matching requests affected; 0 means all.
	Rate float64
	// Latency delays each affected request before it is forwarded.
	Latency time.Duration
	// Status answers in the API's place (e.g. 503, 429) with the API's error envelope.
	Status int
	// RetryAfter is sent with Status as Retry-After (seconds).
	RetryAfter int
	// ResetBefore closes the connection (RST) without forwarding: nothing committed.
	ResetBefore bool
	// ResetAfter forwards the request, lets the API commit it, then resets the
	// connection instead of passing the answer on.
	ResetAfter bool
}

// Request is one request the proxy saw.
type Request struct {
	At       time.Time
	Method   string
	Path     string
	Affected bool
}

// Proxy is the fault-injecting reverse proxy.
type Proxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy

	mu    sync.Mutex
	fault *Fault
	rng   *rand.Rand
	log   []Request
}

// New returns a proxy to target (e.g. the emulator's URL); seed makes Rate
// deterministic.
func New(target string, seed int64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: invalid target %q", target)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &Proxy{target: u, rp: rp, rng: rand.New(rand.NewSource(seed))}, nil
}

// Set replaces the fault (nil: pass everything through).
func (p *Proxy) Set(f *Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f != nil {
		cp := *f
		f = &cp
	}
	p.fault = f
}

// Requests returns the requests seen at or after since.
func (p *Proxy) Requests(since time.Time) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.log {
		if !r.At.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// Count is how many requests the proxy saw in [from, to).
func (p *Proxy) Count(from, to time.Time) int {
	n := 0
	for _, r := range p.Requests(from) {
		if r.At.Before(to) {
			n++
		}
	}
	return n
}

func isWrite(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch || m == http.MethodDelete
}

// ServeHTTP applies the current fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	f := p.fault
	affected := f != nil && (!f.WritesOnly || isWrite(r.Method)) && (f.Rate <= 0 || f.Rate >= 1 || p.rng.Float64() < f.Rate)
	p.log = append(p.log, Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Affected: affected})
	p.mu.Unlock()
	if !affected {
		p.rp.ServeHTTP(w, r)
		return
	}
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch {
	case f.ResetBefore:
		reset(w)
	case f.Status != 0:
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		kind, code := "server_error", "error"
		if f.Status == http.StatusTooManyRequests {
			kind, code = "client_error", "throttled"
		}
		_, _ = fmt.Fprintf(w, `{"type":%q,"errors":[{"code":%q,"detail":"injected by the chaos proxy","attr":null}]}`, kind, code)
	case f.ResetAfter:
		// Forward and read the whole answer (the API has committed), then lose it.
		rec := httptest.NewRecorder()
		body := new(bytes.Buffer)
		_, _ = body.ReadFrom(r.Body)
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
		p.rp.ServeHTTP(rec, r2)
		reset(w)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// reset closes the client's connection with an RST (SO_LINGER 0).
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
