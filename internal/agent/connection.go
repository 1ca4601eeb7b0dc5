// Package agent is the operator as an agent of the Polycrate API: its connection
// (URL, token, client), its stable identity, and the health report that registers
// it, keeps it alive and resolves its workspace.
package agent

import (
	"context"
	"errors"
	"sync"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// ErrNotConnected is returned by a token source while no token is configured.
var ErrNotConnected = errors.New("no Polycrate API token configured")

// Connection is the operator's link to the API: the client for the configured URL
// and the current token. The OperatorConfig controller configures it; the agent
// and the sync controllers use it. Safe for concurrent use.
type Connection struct {
	mu      sync.RWMutex
	url     string
	token   string
	client  *polycrate.Client
	opts    polycrate.Options
	version int // increments on every change
}

// NewConnection prepares a connection; opts carries the user agent and metrics
// (BaseURL and Token are set by Configure).
func NewConnection(opts polycrate.Options) *Connection {
	return &Connection{opts: opts}
}

// Configure sets the API URL and token. It reports whether anything changed. The
// client reads the token on every request, so a new token takes effect at once.
func (c *Connection) Configure(url, token string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if url == c.url && token == c.token && c.client != nil {
		return false, nil
	}
	if url != c.url || c.client == nil {
		o := c.opts
		o.BaseURL = url
		o.Token = c.tokenSource
		cl, err := polycrate.New(o)
		if err != nil {
			return false, err
		}
		c.client = cl
		c.url = url
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
		c.url = ""
		c.version++
	}
}

// Client is the API client, or nil while the operator has no URL and token.
func (c *Connection) Client() *polycrate.Client {
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
