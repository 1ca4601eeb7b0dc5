package polycrate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// ErrNotConnected: there is no connection (no token configured yet); whoever
// needs the API waits for one.
var ErrNotConnected = errors.New("not connected to the Polycrate API")

// Connection is the operator's link to the API: the client for the configured URL
// and the current token. The OperatorConfig controller configures it; the agent
// and the sync controllers use it. Safe for concurrent use.
type Connection struct {
	mu      sync.RWMutex
	url     string
	ca      string
	token   string
	client  *Client
	opts    Options
	version int // increments on every change
}

// NewConnection prepares a connection; opts carries the user agent, metrics and
// the breaker (BaseURL and Token are set by Configure). Without a breaker in opts
// the connection gets one of its own with the defaults. Its clients do not retry
// (unless opts.MaxRetries says so): the operator's callers have loops of their
// own (work queues, report intervals), and two layers of retries would stack.
func NewConnection(opts Options) *Connection {
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	if opts.Breaker == nil {
		opts.Breaker = NewBreaker(BreakerOptions{Metrics: opts.Metrics})
	}
	return &Connection{opts: opts}
}

// Breaker is the connection's circuit breaker (every client it builds uses it).
func (c *Connection) Breaker() *Breaker { return c.opts.Breaker }

// ErrInvalidCA is returned by Configure for a ca_certificate that is no PEM
// certificate.
var ErrInvalidCA = errors.New("api_sync.ca_certificate is invalid")

// Configure sets the API URL, the PEM CA bundle trusted for it besides the
// system's roots ("" = the system's roots only) and the token. It reports
// whether anything changed. The client reads the token on every request, so a new
// token takes effect at once; a new URL or CA builds a new client.
func (c *Connection) Configure(url, caPEM, token string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if url == c.url && caPEM == c.ca && token == c.token && c.client != nil {
		return false, nil
	}
	if url != c.url || caPEM != c.ca || c.client == nil {
		o := c.opts
		o.BaseURL = url
		o.Token = c.tokenSource
		if caPEM != "" {
			hc, err := clientWithCA(o.HTTPClient, caPEM)
			if err != nil {
				return false, err
			}
			o.HTTPClient = hc
		}
		cl, err := New(o)
		if err != nil {
			return false, err
		}
		if url != c.url && c.url != "" {
			c.opts.Breaker.Reset() // what failed was another API
		}
		c.client = cl
		c.url, c.ca = url, caPEM
	}
	c.token = token
	c.version++
	return true, nil
}

// Disconnect forgets the token: Client returns nil until the next Configure.
func (c *Connection) Disconnect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" || c.client != nil {
		c.token = ""
		c.client = nil
		c.url, c.ca = "", ""
		c.version++
	}
}

// Client is the API client, or nil while the operator has no URL and token.
func (c *Connection) Client() *Client {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.client
}

// Version changes whenever the URL or token changes.
func (c *Connection) Version() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}

func (c *Connection) tokenSource(context.Context) (string, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.token == "" {
		return "", ErrNotConnected
	}
	return c.token, nil
}

// clientWithCA is an HTTP client that trusts the system's roots and the PEM
// certificates given (an API behind a private CA or a TLS-inspecting proxy).
func clientWithCA(base *http.Client, caPEM string) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	rest, n := []byte(caPEM), 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: a certificate cannot be parsed: %v", ErrInvalidCA, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: it holds no PEM certificate", ErrInvalidCA)
	}
	var tr *http.Transport
	if base != nil {
		if t, ok := base.Transport.(*http.Transport); ok {
			tr = t.Clone()
		}
	}
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	hc := &http.Client{Transport: tr}
	if base != nil {
		hc.Timeout = base.Timeout
	}
	return hc, nil
}
