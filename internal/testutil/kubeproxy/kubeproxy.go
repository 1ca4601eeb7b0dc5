// Package kubeproxy stands between the operator and envtest's kube-apiserver and
// plays the faults of the API server itself for the chaos suite (test/chaos),
// which cannot restart envtest's API server in place (a restart there
// provisions new certificates and users):
//
//   - Restart: every connection is cut (watches included), new ones are
//     refused for a while, then the server "warms up": it answers 503 (or 429)
//     to everything but /readyz, which says 503 too, for a while; after that, a
//     watch from a resource version older than the restart is refused with 410
//     Gone, as a fresh watch cache does.
//   - Throttle: 429 with Retry-After on a share of the writes (API priority and
//     fairness rejecting the operator's flow).
//   - Freeze: requests get no answer (and streams no bytes) until it ends.
//
// It terminates TLS with a certificate of its own and forwards with envtest's
// admin credentials: the operator talks to it as to its API server.
package kubeproxy

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy is the API server's stand-in.
type Proxy struct {
	srv  *httptest.Server
	addr string
	// relisten is the listener after a restart (httptest closes only its first).
	relisten net.Listener
	rp       *httputil.ReverseProxy

	mu sync.Mutex
	// down: connections are refused (the listener is closed).
	down bool
	// warmUntil: everything answers 503 until then.
	warmUntil time.Time
	// restartedAt: watches from an older version are 410 Gone once, per path.
	restartRV   int64
	goneServed  map[string]bool
	throttle    float64
	frozen      chan struct{} // closed when the freeze ends; nil: not frozen
	conns       map[net.Conn]struct{}
	rng         *rand.Rand
	requests    int
	refusedSent int
}

// New starts a proxy in front of cfg's API server.
func New(cfg *rest.Config) (*Proxy, error) {
	up, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	p := &Proxy{conns: map[net.Conn]struct{}{}, goneServed: map[string]bool{}, rng: rand.New(rand.NewPCG(7, 11))}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(up)
			r.Out.Header.Del("Authorization") // the upstream transport authenticates
		},
		Transport:     tr,
		FlushInterval: -1, // watches stream
		ErrorLog:      nil,
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.EnableHTTP2 = true
	p.srv.Config.ConnState = p.track
	p.srv.StartTLS()
	p.addr = p.srv.Listener.Addr().String()
	return p, nil
}

// Kubeconfig is a kubeconfig for the proxy (its certificate trusted).
func (p *Proxy) Kubeconfig() ([]byte, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "https://" + p.addr, InsecureSkipTLSVerify: true}
	c.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{Token: "forwarded-as-envtest-admin"}
	c.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	c.CurrentContext = "proxy"
	return clientcmd.Write(*c)
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.mu.Lock()
	l := p.relisten
	p.down = true
	p.mu.Unlock()
	if l != nil {
		_ = l.Close()
	}
	p.srv.CloseClientConnections()
	p.srv.Close()
}

func (p *Proxy) track(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		if p.down {
			_ = c.Close()
			return
		}
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// Restart plays a kube-apiserver restart: connections cut and refused for
// down, then warming (503) for warm, then a fresh watch cache (410 for older
// versions). It returns when the server answers again.
func (p *Proxy) Restart(down, warm time.Duration, currentRV int64) {
	p.mu.Lock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	// Refused, not merely reset: the listener closes.
	p.mu.Lock()
	l := p.relisten
	p.mu.Unlock()
	if l == nil {
		l = p.srv.Listener
	}
	_ = l.Close()
	time.Sleep(down)
	nl, err := listenAgain(p.addr)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	p.down = false
	p.warmUntil = time.Now().Add(warm)
	p.restartRV = currentRV
	p.goneServed = map[string]bool{}
	tl := tls.NewListener(nl, p.srv.TLS)
	p.relisten = tl
	p.mu.Unlock()
	go func() { _ = p.srv.Config.Serve(tl) }()
	time.Sleep(warm)
}

func listenAgain(addr string) (net.Listener, error) {
	var err error
	for range 100 {
		var l net.Listener
		if l, err = net.Listen("tcp", addr); err == nil {
			return l, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, err
}

// Throttle answers share (0–1) of the writes with 429 and Retry-After: 1; 0 ends it.
func (p *Proxy) Throttle(share float64) {
	p.mu.Lock()
	p.throttle = share
	p.mu.Unlock()
}

// Freeze holds every request and stream without an answer for d, then lets them go.
func (p *Proxy) Freeze(d time.Duration) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.frozen = ch
	p.mu.Unlock()
	time.Sleep(d)
	p.mu.Lock()
	p.frozen = nil
	p.mu.Unlock()
	close(ch)
}

// Counts are the requests the proxy saw and those it refused itself (429/503/410).
func (p *Proxy) Counts() (requests, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.refusedSent
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests++
	frozen := p.frozen
	warming := time.Now().Before(p.warmUntil)
	throttled := p.throttle > 0 && r.Method != http.MethodGet && p.rng.Float64() < p.throttle
	gone := false
	if q := r.URL.Query(); q.Get("watch") == "true" && p.restartRV > 0 {
		if rv, err := strconv.ParseInt(q.Get("resourceVersion"), 10, 64); err == nil && rv > 0 && rv < p.restartRV && !p.goneServed[r.URL.Path] {
			gone = true
			p.goneServed[r.URL.Path] = true
		}
	}
	if warming || throttled || gone {
		p.refusedSent++
	}
	p.mu.Unlock()
	if frozen != nil {
		select {
		case <-frozen:
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case warming && r.URL.Path == "/readyz":
		http.Error(w, "[-]poststarthook/apiservice-registration-controller failed: not finished", http.StatusInternalServerError)
	case warming:
		status(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request", 1)
	case throttled:
		status(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many requests, please try again later", 1)
	case gone:
		status(w, http.StatusGone, metav1.StatusReasonExpired, fmt.Sprintf("too old resource version: %s (%d)", r.URL.Query().Get("resourceVersion"), p.restartRV), 0)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func status(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string, retryAfter int) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code)}
	if retryAfter > 0 {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(retryAfter)}
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}
