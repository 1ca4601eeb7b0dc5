package examples

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/gomega"
)

// backends serves the example hosts as their services would: each host its
// health path (a 302 to a login page for the legacy app, 202 for the events
// service, the database's state in the body), until it is broken.
type backends struct {
	srv    *httptest.Server
	port   int
	mu     sync.Mutex
	broken map[string]bool
}

func startBackends(caFile string) *backends {
	b := &backends{broken: map[string]bool{}}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{localCA(caFile, exampleHosts)}, MinVersion: tls.VersionTLS12}
	b.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	b.srv.StartTLS()
	_, port, err := net.SplitHostPort(b.srv.Listener.Addr().String())
	Expect(err).NotTo(HaveOccurred())
	b.port, _ = strconv.Atoi(port)
	return b
}

// breakHost makes host answer as a failing service would.
func (b *backends) breakHost(host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.broken[host] = true
}

func (b *backends) isBroken(host string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.broken[host]
}

func (b *backends) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	host = strings.ToLower(host)
	broken := b.isBroken(host)
	switch {
	case host == "db-api.example.com" && r.URL.Path == "/health/deep":
		// Still 200 when broken: only the body says the database is gone (example 4).
		state := map[bool]string{false: "connected", true: "disconnected"}[broken]
		_, _ = io.WriteString(w, `{"status":"ok","database":"`+state+`","cache":"ok"}`)
	case host == "events.example.com" && r.URL.Path == "/health":
		// The events service accepts with 202 (example 9); a broken one answers 200.
		w.WriteHeader(map[bool]int{false: http.StatusAccepted, true: http.StatusOK}[broken])
	case broken:
		http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
	case host == "legacy.example.com" && r.URL.Path == "/":
		http.Redirect(w, r, "/login", http.StatusFound) // example 7
	case host == "legacy.example.com" && r.URL.Path == "/login":
		_, _ = io.WriteString(w, "<form>login</form>")
	case healthPaths[host] == r.URL.Path:
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	default:
		http.NotFound(w, r)
	}
}

// healthPaths are the paths each service answers 200 on.
var healthPaths = map[string]string{
	"app.example.com":     "/",
	"pay.example.com":     "/health/ready",
	"api.mycompany.com":   "/api/v1/health",
	"api.example.com":     "/api/health",
	"data.example.com":    "/readyz",
	"booking.example.com": "/health",
}
